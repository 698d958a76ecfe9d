#!/usr/bin/env bash
# proxy-binaries-ab.sh — two builds of the proxy side by side in one run
# (docs/benchmarks.md#the-proxys-rooms-2026-11-28): each `redlock` binary
# runs `redlock proxy` (its default event loops) with five fresh masters of
# its own, and both are measured in turn, round by round, A then B on odd
# rounds and B then A on even ones, with the same redis-benchmark command;
# CPU per SET NX PX from /proc/<pid>/stat, medians and each round's B ÷ A.
# PROXY_FLAGS adds flags to both proxies (see proxy-lib.sh).
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
source "$(dirname "$0")/proxy-lib.sh"
read -r aport apid < <(proxy "$binA" A)
read -r bport bpid < <(proxy "$binB" B)
for p in "$aport" "$bport"; do redis-benchmark -p "$p" -c 50 -n 20000 -q SET w:__rand_int__ v NX PX 30000 >/dev/null 2>&1; done
for r in $(seq "$rounds"); do
  order=("A $aport $apid" "B $bport $bpid")
  [ $((r % 2)) -eq 0 ] && order=("B $bport $bpid" "A $aport $apid")
  for t in "${order[@]}"; do
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
for k in sorted(d):
    v = d[k]
    print(f"{k}: CPU per SET median {statistics.median(v):.1f} µs ({', '.join(f'{x:.1f}' for x in v)})")
r = [round(b / a, 3) for a, b in zip(d["A"], d["B"])]
print("B ÷ A by round:", r, " median", round(statistics.median(r), 3))
PY
