# proxy-lib.sh — sourced by proxy-ab.sh and proxy-binaries-ab.sh: a scratch
# directory, free loopback ports, masters and proxies whose pids are kept
# in files (they start in subshells: $(master), <(proxy ...)), all stopped
# on exit, and the CPU of a pid. PROXY_FLAGS adds flags to every proxy (on
# a loaded host, PROXY_FLAGS='--master-timeout 1s' keeps the masters'
# stalls from failing redis-benchmark, which stops at the first error).
dir=$(mktemp -d)
stop() { # stops every master and proxy started so far; their pid files go (no reused pid is signalled later)
  for f in "$dir"/*.pid; do [ -e "$f" ] && { kill "$(cat "$f")" 2>/dev/null || true; rm -f "$f"; }; done
}
cleanup() {
  stop
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
master() { # prints its address; its pid is in $dir/PORT.pid
  local p; p=$(port)
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --dir "$dir" --logfile "$dir/$p.log" --pidfile "$dir/$p.pid" >/dev/null
  until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.05; done
  echo "127.0.0.1:$p"
}
proxy() { # proxy BINARY NAME [flags...]: five masters of its own; prints its port and pid
  local bin=$1 name=$2 ms="" p pid
  shift 2
  for _ in 1 2 3 4 5; do ms="$ms,$(master)"; done
  while :; do # again on another port if this one was taken meanwhile
    p=$(port)
    "$bin" proxy --listen "127.0.0.1:$p" --masters "${ms#,}" --fresh-masters "$@" ${PROXY_FLAGS:-} >"$dir/proxy$name.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/proxy$name.pid"
    until redis-cli -p "$p" ping >/dev/null 2>&1 || ! kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    kill -0 "$pid" 2>/dev/null && break
  done
  echo "$p $pid"
}
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
# bench NAME PORT ARGS...: one redis-benchmark round of SET NX PX (its log
# is NAME's: two may run at once); exits on its failure
bench() {
  local name=$1 p=$2
  shift 2
  redis-benchmark -p "$p" "$@" -q SET "k$RANDOM$RANDOM:__rand_int__" v NX PX 30000 >"$dir/bench-$name.log" 2>&1 ||
    { echo "redis-benchmark against $name failed:" >&2; tail -5 "$dir/bench-$name.log" >&2; exit 1; }
}
