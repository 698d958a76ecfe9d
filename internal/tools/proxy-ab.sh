#!/usr/bin/env bash
# proxy-ab.sh — the proxy's CPU per SET NX PX on its two client paths and a
# plain redis-server's, side by side in one run (docs/benchmarks.md#proxy):
# a proxy on goroutines (--event-loops -1) and one on its event loop
# (--event-loops 1), each with five fresh masters of its own, and a plain
# redis-server, measured round by round in turn with the same
# redis-benchmark command (CPU from /proc/<pid>/stat; medians and the
# ratios of each round). Usage:
#   internal/tools/proxy-ab.sh [rounds] [redis-benchmark args]
#   internal/tools/proxy-ab.sh 6 -c 1000 -P 1 -n 100000 -r 1000000
# PROXY_FLAGS adds flags to both proxies (see proxy-lib.sh).
set -euo pipefail
rounds=${1:-6}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-c 1000 -P 1 -n 100000 -r 1000000)
n=$(printf '%s\n' "${args[@]}" | awk 'p{print; exit} $0=="-n"{p=1}')
source "$(dirname "$0")/proxy-lib.sh"
go build -o "$dir/redlock" ./cmd/redlock
read -r gport gpid < <(proxy "$dir/redlock" G --event-loops -1)
read -r lport lpid < <(proxy "$dir/redlock" L --event-loops 1)
rport=$(master | cut -d: -f2)
rpid=$(cat "$dir/$rport.pid")
for p in "$gport" "$lport"; do redis-benchmark -p "$p" -c 50 -n 20000 -q SET w:__rand_int__ v NX PX 30000 >/dev/null 2>&1; done
for r in $(seq "$rounds"); do
  for t in "goroutines $gport $gpid" "loop $lport $lpid" "redis $rport $rpid"; do
    set -- $t
    c0=$(cpu "$3")
    bench "$1" "$2" "${args[@]}"
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
for k, v in d.items():
    print(f"{k}: CPU per SET median {statistics.median(v):.1f} µs ({', '.join(f'{x:.1f}' for x in v)})")
pair = lambda a, b: [round(y / x, 2) for x, y in zip(d[a], d[b])]
print("loop ÷ goroutines:", pair("goroutines", "loop"))
print("loop ÷ redis:", pair("redis", "loop"), " goroutines ÷ redis:", pair("redis", "goroutines"))
PY
