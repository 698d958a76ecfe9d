#!/usr/bin/env bash
# proxy-sametime-ab.sh — two builds of the proxy measured at the same time
# (docs/benchmarks.md#proxy): each `redlock` binary runs `redlock proxy`
# with five fresh masters of its own, and every round runs the same
# redis-benchmark SET NX PX against both at once, so that the host's drift
# (±10–15 % between rounds run in turn) falls on both alike; CPU per SET
# from /proc/<pid>/stat. The two proxies are not alike in place (the second
# started read 1.5–3 % more in an A/A run), so the rounds run twice, the
# builds in one order and then the other, and the ratio is the geometric
# mean of the two halves' medians (the place's share cancels).
# PROXY_FLAGS adds flags to both proxies (see proxy-lib.sh).
# Usage:
#   internal/tools/proxy-sametime-ab.sh OLD_BINARY NEW_BINARY [rounds per order] [redis-benchmark args]
#   PROXY_FLAGS='--master-timeout 1s --event-loops 1' internal/tools/proxy-sametime-ab.sh /tmp/redlock-old /tmp/redlock-new 8 -c 1000 -P 1 -n 100000 -r 1000000
set -euo pipefail
cd "$(dirname "$0")"
source ./proxy-lib.sh
trap 'kill $(jobs -p) 2>/dev/null; cleanup' EXIT
trap 'exit 1' INT TERM
old=$1 new=$2 rounds=${3:-8}
shift $(($# < 3 ? $# : 3))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-c 1000 -P 1 -n 100000 -r 1000000)
n=100000
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = -n ] && n=${args[$((i + 1))]}; done
hz=$(getconf CLK_TCK)
half() { # half FIRST SECOND LABEL: rounds with FIRST started first; prints "LABEL new÷old" per round
  local first=$1 second=$2 label=$3 p1 pid1 p2 pid2 a0 b0 a1 b1 j1 j2
  read -r p1 pid1 < <(proxy "$first" "${label}1")
  read -r p2 pid2 < <(proxy "$second" "${label}2")
  for _ in $(seq 1 "$rounds"); do
    a0=$(cpu "$pid1") b0=$(cpu "$pid2")
    bench "${label}1" "$p1" "${args[@]}" &
    j1=$!
    bench "${label}2" "$p2" "${args[@]}" &
    j2=$!
    s1=0 s2=0
    wait "$j1" || s1=$?
    wait "$j2" || s2=$?
    [ "$s1$s2" = 00 ] || exit 1 # bench said which
    a1=$(cpu "$pid1") b1=$(cpu "$pid2")
    echo "$label $a0 $a1 $b0 $b1"
  done
  stop # this half's proxies and their masters
}
{
  half "$old" "$new" on # old started first: (old, new)
  half "$new" "$old" no # new started first: (new, old)
} >"$dir/out"
python3 - "$dir/out" "$n" "$hz" <<'PY'
import math, statistics, sys
n, hz = int(sys.argv[2]), int(sys.argv[3])
us = lambda a, b: (float(b) - float(a)) / hz * 1e6 / n
halves = {"on": [], "no": []}
for line in open(sys.argv[1]):
    label, a0, a1, b0, b1 = line.split()
    first, second = us(a0, a1), us(b0, b1)
    old, new = (first, second) if label == "on" else (second, first)
    halves[label].append((old, new))
for label, name in (("on", "old started first"), ("no", "new started first")):
    r = [round(new / old, 3) for old, new in halves[label]]
    print(f"{name}: old {statistics.median(o for o, _ in halves[label]):.1f} µs, new {statistics.median(x for _, x in halves[label]):.1f} µs per SET; new ÷ old by round {r}, median {statistics.median(r):.3f}")
m = [statistics.median(new / old for old, new in halves[k]) for k in halves]
print(f"new ÷ old: {math.sqrt(m[0] * m[1]):.3f} (geometric mean of the two orders' medians)")
PY
