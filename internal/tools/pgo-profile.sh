#!/usr/bin/env bash
# pgo-profile.sh — writes cmd/redlock/default.pgo, the CPU profile `go
# build` optimises the redlock command with (profile-guided optimisation:
# hotter call sites inlined, the masters' interface calls devirtualised).
# It profiles a build made without it (-pgo=off) on what the command spends
# its CPU on: the engine bench at 1,000 acquiring lockers, at 256 cycling,
# on one hot key (64 waiters) and with one locker, and the proxy on its
# event loop under redis-benchmark's SET NX PX from 1,000 clients; then
# merges the five. Run it again when the hot paths change (a stale profile
# only optimises less: the compiler matches it by function and line
# offset). About a minute. Measured gains: docs/benchmarks.md (Proxy) and
# its journal, 2026-11-29.
# Usage: internal/tools/pgo-profile.sh [output, default cmd/redlock/default.pgo]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-cmd/redlock/default.pgo}
source internal/tools/proxy-lib.sh
bin=$dir/redlock
go build -pgo=off -o "$bin" ./cmd/redlock
b() { "$bin" bench --duration 8s --master-timeout 1s --quiet --cpuprofile "$dir/$1.prof" "${@:2}" >/dev/null; }
b acquire --workload acquire --concurrency 1000
b cycle --concurrency 256
b hot --workload contended --keys 1 --concurrency 64
b one --concurrency 1
pport=$(port)
read -r p _ < <(proxy "$bin" A --event-loops 1 --master-timeout 1s --pprof-addr "127.0.0.1:$pport")
bench warm "$p" -c 1000 -P 1 -n 100000 -r 1000000
curl -fsS "http://127.0.0.1:$pport/debug/pprof/profile?seconds=8" -o "$dir/proxy.prof" &
bench proxy "$p" -c 1000 -P 1 -n 1000000 -r 1000000 &
wait %1
kill %2 2>/dev/null || true
go tool pprof -proto "$dir"/{acquire,cycle,hot,one,proxy}.prof >"$out" 2>/dev/null
echo "wrote $out ($(wc -c <"$out") bytes)"
