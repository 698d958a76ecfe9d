#!/usr/bin/env bash
# engine-sametime-ab.sh — two builds of the engine's bench run at the same
# time (docs/benchmarks.md#proxy, the engine's CPU per acquisition): every
# round starts `redlock bench --workload acquire --concurrency 1000` of both
# builds at once, each with its own five masters, so that the host's drift
# (a quarter within the hour on the shared 2-vCPU host) falls on both alike;
# it prints each round's client CPU per acquisition and new ÷ old, and the
# median. An A/A pair of one binary read 0.96–1.02.
# Usage:
#   internal/tools/engine-sametime-ab.sh OLD_BINARY NEW_BINARY [rounds] [more bench flags]
set -euo pipefail
old=$1 new=$2 rounds=${3:-8}
shift $(($# < 3 ? $# : 3))
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM
run() { "$1" bench --workload acquire --concurrency 1000 --duration 5s --master-timeout 1s --json --quiet "${@:3}" 2>/dev/null | tail -1 >"$dir/$2"; }
for _ in $(seq 1 "$rounds"); do
  run "$old" old "$@" &
  j1=$!
  run "$new" new "$@" &
  j2=$!
  s1=0 s2=0
  wait "$j1" || s1=$?
  wait "$j2" || s2=$?
  [ "$s1$s2" = 00 ] || { echo "a bench failed (old: $s1, new: $s2)" >&2; exit 1; }
  python3 - "$dir" <<'PY' | tee -a "$dir/ratios"
import json, sys
o, n = (json.load(open(f"{sys.argv[1]}/{k}")) for k in ("old", "new"))
a, b = o["client_cpu_us_per_cycle"], n["client_cpu_us_per_cycle"]
print(f"old {a:.2f} µs ({o['cycles_per_sec']:.0f}/s)  new {b:.2f} µs ({n['cycles_per_sec']:.0f}/s)  new ÷ old {b / a:.3f}")
PY
done
awk '{print $NF}' "$dir/ratios" | sort -n | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "median new ÷ old %.3f over %d rounds\n", m, NR}'
