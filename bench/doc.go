// Package bench generates lock load against N Redis masters and reports
// throughput and latency: the library behind `redlock bench`.
//
// [Run] starts local masters when none are given (real redis-server
// processes when installed, else embedded in-process ones, flagged in the
// result as not representative), drives the engine with Config.Concurrency
// closed-loop workers for Config.Duration, and returns a [Result] with HDR
// histogram percentiles. Optionally it measures peers in the same run on
// the same masters (go-redsync/redsync v4 over go-redis v9) and the
// masters' own pipelined ceiling, so speed claims are ratios from one run.
//
// Guarantees: Run stops at ctx's end and still returns what it measured;
// every goroutine it starts has exited when it returns; local masters it
// started are stopped.
package bench
