# redlock — make targets. `make test` is what CI runs (.ci/run).
GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test race deps vet cross bench fmt fuzz fault soak

# test installs redis-server when missing (Debian, as root), then vets and
# runs every test with the race detector against real redis-server masters
# and, at the same time, the full fault suite (each waits on masters and
# sockets much of the time: on 2 cores the two together take about the
# time of the race run alone; each one's output is printed when it ends).
# REDLOCK_REQUIRE_NETNS: the partition tests (masters behind links that
# drop packets, internal/test/netns) need root and ip netns, which CI has:
# there they fail instead of skipping.
test: deps vet
	$(MAKE) --no-print-directory -j2 --output-sync=target race fault cross
	@# The proxy's clients are on its event loop above; its goroutine path
	@# (TLS clients, subscribers, large requests) keeps its bounds: about 15 s.
	REDLOCK_REQUIRE_REDIS=1 REDLOCK_PROXY_EVENT_LOOPS=-1 $(GO) test -race -count=1 -run '$(GOROUTINE_PATH_TESTS)' ./proxy/...

# race runs every test with the race detector (the fault suite at a tenth
# of its size). -timeout 30m: a package's binary, not a test, is what the
# default 10 minutes bound — the fault package under the race detector
# took 8.5 of them beside the full fault suite on a machine loaded 15-fold
# (each test bounds its own waits).
# GOFLAGS=-pgo=off: cmd/redlock's default.pgo would otherwise make its test
# binary, and the binaries tests build with go build, compile the whole
# dependency tree a second time (with the profile; ~4.5 min more on a fresh
# 2-core machine). TestDefaultPGO checks the profile itself.
race:
	GOFLAGS=-pgo=off REDLOCK_REQUIRE_REDIS=1 REDLOCK_REQUIRE_PEERS=1 REDLOCK_REQUIRE_NETNS=1 $(GO) test -race -count=1 -timeout 30m ./...

# cross: the packages build outside Unix too (cmd/redlock then only says it
# needs Unix) — Windows, the one system whose syscall package differs. About
# a minute cold; in test it takes the fault suite's slot when that ends.
cross:
	GOOS=windows $(GO) build ./...

# fault runs the fault suite at full size (without the race detector, which
# ./... above already ran it under at a tenth of the size): contended
# lockers through the engine and the proxy while masters are killed -9,
# SIGSTOPped, restarted empty and slowed down; zero overlaps, zero stale
# fencing tokens accepted, every history linearizable. About 75 s on a
# 2-core machine. The results table is in docs/safety.md.
# The lock kinds (reentrant, LockAll, semaphore, read-write) run
# FAULT_KIND_OPS operations each (the Redisson read-write and fair rows
# through the proxy a share of them) through the same faults, about 75 s.
# TestFaultPartition cuts links (internal/test/netns: one master, 2 and 3
# of 5, a bridge between two processes), about 25 s.
# TestFaultClockJump: masters' clocks jump past the TTL, clock check on
# and off (FAULT_ACQUISITIONS/60 per run), about 25 s.
GOROUTINE_PATH_TESTS := ^(TestHostileInputBeforeAuth|TestUnauthenticatedBounds|TestMemoryBound|TestOrderStateBounded|TestWriterPanicNoDeadlock|TestWaitingCommandsHoldNoSlot|TestPanicContained|TestPoolFullKeepsOrder|TestCloseWithQueuedWork|TestDirectAndPipelined|TestKeyPrefixCharged|TestReplyBuffersStaySmall|TestOverloadBusy|TestAdmissionLimit|TestRequirePass|TestBadInput|TestMaxClients|TestIdleTimeout|TestPipeline|TestShutdown|TestGarbage|TestRedsync|TestNodeRedlock|TestAllocs)$$
FAULT_ACQUISITIONS ?= 120000
FAULT_KIND_OPS ?= 5000
FAULT_SEED ?= 11
fault:
	REDLOCK_REQUIRE_REDIS=1 REDLOCK_FAULT_ACQUISITIONS=$(FAULT_ACQUISITIONS) REDLOCK_FAULT_KIND_OPS=$(FAULT_KIND_OPS) \
		REDLOCK_FAULT_SEED=$(FAULT_SEED) $(GO) test -count=1 -v -timeout 30m -run '^TestFault(Kinds|Partition|ClockJump)?$$' ./internal/test/fault
	@# The watchdog at full size (10,000 auto-extended locks for 3 TTLs; the
	@# race run above holds 2,000) and the loss signal under SIGSTOP.
	REDLOCK_REQUIRE_REDIS=1 $(GO) test -count=1 -v -run '^TestWatchdog' ./engine

# soak runs every fault scenario — process faults, partitions, clock
# jumps, every lock kind and Redisson — one after another, each chosen at
# random with a seed of its own, for SOAK (make soak SOAK=60s in CI), and
# reports runs, operations, faults and violations (TestSoak).
SOAK ?= 10m
soak:
	REDLOCK_REQUIRE_REDIS=1 REDLOCK_REQUIRE_NETNS=1 REDLOCK_SOAK=$(SOAK) $(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./internal/test/fault

deps:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing redis-server and redis-tools (apt-get)"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y -q redis-server redis-tools >/dev/null 2>&1 || \
			{ apt-get update -q >/dev/null && apt-get install -y -q redis-server redis-tools >/dev/null; }; \
		else \
			echo "redis-server not found: install it (Debian: apt-get install redis-server redis-tools)" >&2; exit 1; \
		fi; \
	fi
	@redis-server --version
	@# ip (iproute2) for the partition tests' network namespaces.
	@if ! command -v ip >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing iproute2 (apt-get)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q iproute2 >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q iproute2 >/dev/null; }; \
	fi
	@# Proxy peer libraries: Debian's python3-redis for the system python3,
	@# and the node packages pinned in proxy/testdata/node/package-lock.json.
	@if ! /usr/bin/python3 -c 'import redis.lock' >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing python3-redis, nodejs and npm (apt-get)"; \
			export DEBIAN_FRONTEND=noninteractive; \
			pkgs="python3-redis"; command -v node >/dev/null 2>&1 || pkgs="$$pkgs nodejs"; command -v npm >/dev/null 2>&1 || pkgs="$$pkgs npm"; \
			apt-get install -y -q $$pkgs >/dev/null 2>&1 || \
			{ apt-get update -q >/dev/null && apt-get install -y -q $$pkgs >/dev/null; }; \
		else \
			echo "proxy peer tests need python3-redis, node and npm (Debian: apt-get install python3-redis nodejs npm)" >&2; \
		fi; \
	fi
	@if [ ! -d proxy/testdata/node/node_modules ] && command -v npm >/dev/null 2>&1; then \
		echo "installing proxy/testdata/node packages (npm ci)"; \
		npm ci --prefix proxy/testdata/node --no-audit --no-fund >/dev/null; \
	fi
	@# chromium renders the bench report in bench's browser test (headless).
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium (apt-get)"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y -q chromium >/dev/null 2>&1 || \
			{ apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
		else \
			echo "chromium not found: the bench report browser test will skip (Debian: apt-get install chromium)" >&2; \
		fi; \
	fi

# fuzz runs every fuzz target for a fixed number of inputs (about 10-15 s
# each on a 2-core machine). Counts, not durations: with a -fuzztime
# duration, Go 1.26's fuzz coordinator can end a clean run with a bare
# "context deadline exceeded" (golang/go#75804, fixed in Go 1.27). A finding
# fails the run and is written under the package's testdata/fuzz.
# FUZZ_MINIMIZE bounds the minimising of each new input (Go's default is
# 60 s an input): FuzzServe, whose inputs run the whole server, spent most
# of its budget minimising (30,000 inputs: 33 s, 3 new; with 200x: 24 s,
# 48 new). A finding is still written; re-minimise it locally.
FUZZ_SCALE ?= 1
FUZZ_MINIMIZE ?= 200x
fuzz:
	@set -e; for t in proxy:FuzzServe:30000 proxy/internal/redisson:FuzzWakeMessage:20000 proxy/internal/respserver:FuzzLoopFraming:100000 resp:FuzzCommandReader:400000 resp:FuzzReader:250000 \
		resp:FuzzReaderLimits:400000 resp:FuzzRoundTrip:250000 resp:FuzzAppendRESP3:200000; do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$$(( $${rest#*:} * $(FUZZ_SCALE) )); \
		echo "$(GO) test ./$$pkg -run '^\$$' -fuzz '^$$name\$$' -fuzztime $${n}x -fuzzminimizetime $(FUZZ_MINIMIZE)"; \
		start=$$(date +%s); \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $${n}x -fuzzminimizetime $(FUZZ_MINIMIZE); \
		echo "$$name: $$n inputs in $$(( $$(date +%s) - start ))s"; \
	done

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed" >&2; exit 1; }

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./resp ./engine

fmt:
	gofmt -w .
