// Package bench generates lock load against N Redis masters and reports
// throughput and latency: the library behind `redlock bench`.
//
// [Run] starts local masters when none are given (real redis-server
// processes when installed, else embedded in-process ones, flagged in the
// result as not representative) and drives a target — the embedded engine
// or a RESP proxy driven by this module's pipelined connection — with one
// of three workloads (cycle, acquire, contended). The load is closed-loop
// (Config.Concurrency workers) or open-loop at a fixed arrival rate
// (Config.Rate), where latency is measured from each arrival's scheduled
// start so a slow target cannot hide its latency (no coordinated
// omission). Latencies go into HDR histograms (acquire, release, full
// cycle). In the same run it can measure peers on the same masters
// (go-redsync/redsync v4 over go-redis v9; Redlock written on rueidis
// clients, one per master) and the masters' own pipelined ceiling, so
// speed claims are ratios from one run; sweep concurrency or
// the number of masters; write CPU/heap/mutex/block profiles and read the
// CPU profile back (github.com/google/pprof/profile) for its hottest
// functions; and write a self-contained HTML report ([WriteReport]).
//
// Guarantees: Run validates the whole Config before starting anything
// (errors match [ErrBadConfig]); it stops at ctx's end and still returns
// what it measured (Result.Interrupted), writing profiles and the report;
// every goroutine it starts has exited when it returns; local masters it
// started are stopped.
//
// Not guaranteed: numbers from embedded masters, or from a machine whose
// CPUs are shared with the masters and other work, say little about a
// deployment. The CPU profile covers the target's measured windows only
// (not the warm-ups, peers, ceiling or start-up), but all of the process
// in them: embedded masters included.
package bench
