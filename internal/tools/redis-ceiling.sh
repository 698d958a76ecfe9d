#!/usr/bin/env bash
# redis-ceiling.sh — the masters' own ceiling for one Redlock cycle, measured
# with redis-benchmark as issue #2 defines it: on N fresh local masters at
# once, pipelined 64 deep, first SET NX PX, then the compare-and-delete
# EVALSHA; per master cycle capacity = 1/(1/set + 1/evalsha); the ceiling
# is that of the slowest master. Usage: redis-ceiling.sh [N] [requests]
set -euo pipefail
n=${1:-5}
reqs=${2:-1000000}
dir=$(mktemp -d)
ports=()
cleanup() { for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done; rm -rf "$dir"; }
trap cleanup EXIT
for i in $(seq 1 "$n"); do
  p=$((17000 + RANDOM % 20000))
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --dir "$dir" --logfile "$dir/$p.log" --pidfile "$dir/$p.pid" >/dev/null
  ports+=("$p")
done
for p in "${ports[@]}"; do until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.05; done; done
script='if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end'
sha=""
for p in "${ports[@]}"; do sha=$(redis-cli -p "$p" script load "$script"); done

run() { # run NAME ARGS... on every master at once; print per-master req/s
  local name=$1; shift
  for p in "${ports[@]}"; do
    redis-benchmark -p "$p" -P 64 -n "$reqs" -r 100000 --csv "$@" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"' > "$dir/$name.$p" &
  done
  wait
}
run set SET k:__rand_int__ v NX PX 30000
run evalsha EVALSHA "$sha" 1 k:__rand_int__ v
slowest=""
for p in "${ports[@]}"; do
  s=$(cat "$dir/set.$p"); e=$(cat "$dir/evalsha.$p")
  c=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.0f", 1/(1/s + 1/e) }')
  echo "master :$p  SET NX PX ${s}/s  EVALSHA ${e}/s  cycle capacity ${c}/s"
  if [ -z "$slowest" ] || [ "$c" -lt "$slowest" ]; then slowest=$c; fi
done
echo "ceiling (slowest master): ${slowest} cycles/s"
