#!/usr/bin/env bash
# proxy-binaries-ab.sh — two builds of the proxy side by side in one run
# (docs/benchmarks.md#the-proxys-rooms-2026-11-28): each `redlock` binary
# runs `redlock proxy` (its default event loops) with five fresh masters of
# its own, and both are measured in turn, round by round, A then B on odd
# rounds and B then A on even ones, with the same redis-benchmark command;
# CPU per SET NX PX from /proc/<pid>/stat, medians and each round's B ÷ A.
# PROXY_FLAGS adds flags to both proxies (on a loaded host,
# PROXY_FLAGS='--master-timeout 1s' keeps the masters' stalls from failing
# redis-benchmark, which stops at the first error reply).
# Usage:
#   internal/tools/proxy-binaries-ab.sh OLD_BINARY NEW_BINARY [rounds] [redis-benchmark args]
#   git worktree add /tmp/old <rev> && (cd /tmp/old && go build -o /tmp/redlock-old ./cmd/redlock)
#   go build -o /tmp/redlock-new ./cmd/redlock
#   internal/tools/proxy-binaries-ab.sh /tmp/redlock-old /tmp/redlock-new 8 -c 1000 -P 1 -n 100000 -r 1000000
set -euo pipefail
binA=$1 binB=$2
rounds=${3:-6}
shift 3 || shift $#
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-c 1000 -P 1 -n 100000 -r 1000000)
n=$(printf '%s\n' "${args[@]}" | awk 'p{print; exit} $0=="-n"{p=1}')
dir=$(mktemp -d)
cleanup() { # the proxies' and masters' pids are in files: they start in subshells
  for f in "$dir"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.2
  rm -rf "$dir"
}
trap cleanup EXIT
port() { # a free loopback port (nothing accepts on it now)
  local p
  while :; do
    p=$((17000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
master() {
  local p; p=$(port)
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --dir "$dir" --logfile "$dir/$p.log" --pidfile "$dir/$p.pid" >/dev/null
  until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.05; done
  echo "127.0.0.1:$p"
}
proxy() { # proxy BINARY NAME: prints its port and pid
  local ms="" p pid
  for _ in 1 2 3 4 5; do ms="$ms,$(master)"; done
  while :; do # again on another port if this one was taken meanwhile
    p=$(port)
    "$1" proxy --listen "127.0.0.1:$p" --masters "${ms#,}" --fresh-masters ${PROXY_FLAGS:-} >"$dir/proxy$2.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/proxy$2.pid"
    until redis-cli -p "$p" ping >/dev/null 2>&1 || ! kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    kill -0 "$pid" 2>/dev/null && break
  done
  echo "$p $pid"
}
read -r aport apid < <(proxy "$binA" A)
read -r bport bpid < <(proxy "$binB" B)
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for p in "$aport" "$bport"; do redis-benchmark -p "$p" -c 50 -n 20000 -q SET w:__rand_int__ v NX PX 30000 >/dev/null 2>&1; done
for r in $(seq "$rounds"); do
  order=("A $aport $apid" "B $bport $bpid")
  [ $((r % 2)) -eq 0 ] && order=("B $bport $bpid" "A $aport $apid")
  for t in "${order[@]}"; do
    set -- $t
    c0=$(cpu "$3")
    redis-benchmark -p "$2" "${args[@]}" -q SET "k$r:__rand_int__" v NX PX 30000 >"$dir/bench.log" 2>&1 ||
      { echo "redis-benchmark against $1 failed:" >&2; tail -5 "$dir/bench.log" >&2; exit 1; }
    c1=$(cpu "$3")
    echo "$1 $c0 $c1"
  done
done > "$dir/out"
python3 - "$dir/out" "$n" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys, collections
d = collections.defaultdict(list)
n, hz = int(sys.argv[2]), int(sys.argv[3])
for line in open(sys.argv[1]):
    k, a, b = line.split()
    d[k].append((float(b) - float(a)) / hz * 1e6 / n)
for k in sorted(d):
    v = d[k]
    print(f"{k}: CPU per SET median {statistics.median(v):.1f} µs ({', '.join(f'{x:.1f}' for x in v)})")
r = [round(b / a, 3) for a, b in zip(d["A"], d["B"])]
print("B ÷ A by round:", r, " median", round(statistics.median(r), 3))
PY
