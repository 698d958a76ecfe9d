package fault_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/netns"
)

// soakOps is each soak run's acquisitions (operations for a lock kind):
// a few seconds a run, so that a soak mixes many.
const soakOps = 3000

// soakRun is one of the fault suite's scenarios as the soak runs it: it
// returns the operations made, the faults injected and the violations
// found (its own assertions fail t as in its suite).
type soakRun struct {
	name string
	do   func(t *testing.T, seed uint64) (ops, faults, violations int)
}

// soakRuns lists every scenario of the fault suite: process faults through
// the engine and the proxy (TestFault), every lock kind and Redisson
// through two proxy processes with the retry nemesis, the retry burst and
// the paused Do/Lead holders (TestFaultKinds), partitions
// (TestFaultPartition) and master clock jumps with the clock check on
// (TestFaultClockJump).
func soakRuns() []soakRun {
	var runs []soakRun
	for _, sc := range scenarios {
		runs = append(runs, soakRun{sc.name, func(t *testing.T, seed uint64) (int, int, int) {
			r := runScenario(t, sc, seed, soakOps)
			soakChecks(t, r.res.Entries, soakOps, r.faultsInjected, r.hist.OK(), r.hist)
			return r.res.Entries, r.faultsInjected, r.res.Violations()
		}})
	}
	for _, ks := range kindScenarios {
		runs = append(runs, soakRun{"kind/" + ks.name, func(t *testing.T, seed uint64) (int, int, int) {
			// runKind fails t on a violation and returns its table row:
			// "| name | operations | …".
			row := runKind(t, ks, seed, soakOps)
			ops, _ := strconv.Atoi(strings.TrimSpace(strings.Split(row, "|")[2]))
			v := 0
			if t.Failed() {
				v = 1
			}
			return ops, 1, v // its restarts and stops are not counted: one
		}})
	}
	// The retry burst and the paused Do/Lead holders (TestFaultKinds):
	// a trial counts as an operation and as a fault.
	runs = append(runs, soakRun{"kind/retry-burst", func(t *testing.T, seed uint64) (int, int, int) {
		n, v := checkRetryBurst(t, seed)
		return n, n, v
	}}, soakRun{"kind/paused-do-lead", func(t *testing.T, seed uint64) (int, int, int) {
		n, v := checkPaused(t, seed)
		return n, n, v
	}})
	for _, sc := range partScenarios {
		runs = append(runs, soakRun{sc.name, func(t *testing.T, seed uint64) (int, int, int) {
			netns.Require(t)
			r := runPartition(t, sc, seed, soakOps/2)
			soakChecks(t, r.res.Entries, soakOps/2, r.faultsInjected, true, nil) // runPartition checks its history
			return r.res.Entries, r.faultsInjected, r.res.Violations()
		}})
	}
	for _, sc := range clockScenarios {
		runs = append(runs, soakRun{sc.name, func(t *testing.T, seed uint64) (int, int, int) {
			r := runClockJump(t, sc, false, seed, soakOps/2)
			soakChecks(t, r.res.Entries, soakOps/2, r.jumps, r.hist.OK(), r.hist)
			if r.detected == 0 {
				t.Error("no engine saw a jump")
			}
			return r.res.Entries, r.jumps, r.res.Violations()
		}})
	}
	return runs
}

// soakChecks fails t when a run proves nothing or its history does not
// linearize: fewer operations than its target, no fault injected.
func soakChecks(t *testing.T, ops, target, faults int, linearizable bool, hist any) {
	t.Helper()
	if ops < target {
		t.Errorf("only %d operations of %d", ops, target)
	}
	if faults == 0 {
		t.Error("no fault was injected")
	}
	if !linearizable {
		t.Errorf("the history is not linearizable: %v", hist)
	}
}

// TestSoak runs the fault suite's scenarios one after another, each chosen
// at random with a seed of its own, until REDLOCK_SOAK (a duration) is
// spent: `make soak` (10 minutes; SOAK=60s in CI). It reports the runs,
// operations, faults injected and violations; any violation, or any
// scenario's own check, fails it.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("REDLOCK_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("REDLOCK_SOAK is not set: make soak")
	}
	seed := uint64(envInt("REDLOCK_FAULT_SEED", int(time.Now().UnixNano()%1_000_000_000)))
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	runs := soakRuns()
	t.Logf("soak: %v, seed %d (REDLOCK_FAULT_SEED), %d scenarios, %d operations a run", d, seed, len(runs), soakOps)
	start := time.Now()
	var nruns, ops, faults, violations int
	picked := map[string]int{}
	for i := 0; time.Since(start) < d; i++ {
		r := runs[rng.IntN(len(runs))]
		picked[r.name]++
		ok := t.Run(fmt.Sprintf("%d-%s", i, strings.NewReplacer("/", "-", " ", "-", ",", "").Replace(r.name)), func(t *testing.T) {
			o, f, v := r.do(t, seed+uint64(i))
			ops, faults, violations = ops+o, faults+f, violations+v
			if v != 0 {
				t.Errorf("%d violations", v)
			}
		})
		nruns++
		if !ok && violations == 0 {
			violations++ // a scenario's own check failed
		}
	}
	t.Logf("soak: %d runs in %v, %d operations, %d faults injected, %d violations; runs per scenario: %v",
		nruns, time.Since(start).Round(time.Second), ops, faults, violations, picked)
}
