package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// minEpoch is the fewest operations an epoch holds before the next cut:
// porcupine's cost grows with the square of a partition's length (it
// hashes a bitset of the partition per step), so shorter is faster; the
// floor only bounds the number of partitions.
const minEpoch = 64

// Result is what Check found.
type Result struct {
	Ops        int                   // operations checked
	Keys       int                   // keys (partitions of the model)
	Epochs     int                   // key epochs, each checked on its own
	Outcome    porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Detail     string                // if Illegal: where no linearization got further
	Elapsed    time.Duration
	info       porcupine.LinearizationInfo
	verboseRun bool
}

// OK reports whether the history is linearizable.
func (r Result) OK() bool { return r.Outcome == porcupine.Ok }

func (r Result) String() string {
	switch r.Outcome {
	case porcupine.Ok:
		return fmt.Sprintf("%d ops checked (%d keys, %d epochs) in %v, linearizable", r.Ops, r.Keys, r.Epochs, r.Elapsed.Round(time.Millisecond))
	case porcupine.Illegal:
		return fmt.Sprintf("%d ops checked, NOT linearizable: %s", r.Ops, r.Detail)
	}
	return fmt.Sprintf("%d ops, not checked within the time limit (%v)", r.Ops, r.Elapsed.Round(time.Millisecond))
}

// Visualize writes porcupine's HTML view of an illegal history's longest
// linearizations to path.
func (r Result) Visualize(path string) error {
	if !r.verboseRun {
		return fmt.Errorf("history: no visualization for a %s result", r.Outcome)
	}
	return porcupine.VisualizePath(model, r.info, path)
}

// Check checks ops against the model (see the package doc) within timeout
// (0: none). No-ops (refused or failed acquires and extends) are skipped.
func Check(ops []Op, timeout time.Duration) (Result, error) {
	start := time.Now()
	hist := make([]porcupine.Operation, 0, len(ops))
	keys := map[string]bool{}
	for i := range ops {
		op := &ops[i]
		if op.Return < op.Call {
			return Result{}, fmt.Errorf("history: operation returns before its call: %s", describe(op))
		}
		if noop(op) {
			continue
		}
		keys[op.Key] = true
		hist = append(hist, porcupine.Operation{ClientId: op.Client, Input: op, Output: op, Call: int64(op.Call), Return: int64(op.Return)})
	}
	parts := partition(hist)
	r := Result{Ops: len(hist), Keys: len(keys), Epochs: len(parts)}
	m := model
	m.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return parts }
	r.Outcome = porcupine.CheckOperationsTimeout(m, hist, timeout)
	if r.Outcome == porcupine.Illegal {
		// Again, keeping the longest linearizations, to say where.
		r.Outcome, r.info = porcupine.CheckOperationsVerbose(m, hist, timeout)
		r.verboseRun = true
		r.Detail = detail(parts, r.info)
	}
	r.Elapsed = time.Since(start)
	return r, nil
}

// detail names the first partition no linearization covers: its longest
// linearizable prefix, the state after it, and the operations it could not
// take next.
func detail(parts [][]porcupine.Operation, info porcupine.LinearizationInfo) string {
	partials := info.PartialLinearizations()
	for p, part := range parts {
		if p >= len(partials) {
			break
		}
		best := []int(nil)
		for _, l := range partials[p] {
			if len(l) > len(best) {
				best = l
			}
		}
		if len(best) == len(part) {
			continue
		}
		// porcupine numbers a partition's operations in its order.
		in := make([]bool, len(part))
		s := state{}
		for _, id := range best {
			in[id] = true
			s = replay(s, part[id].Input)
		}
		var next []string
		for id, op := range part {
			if !in[id] && len(next) < 3 {
				if o, ok := op.Input.(*Op); ok {
					next = append(next, describe(o))
				}
			}
		}
		key := ""
		switch in := part[0].Input.(type) {
		case seed:
			key = in.key
		case *Op:
			key = in.Key
		}
		return fmt.Sprintf("key %s: %d of %d operations linearize, then the state is %s; none of the next can follow: %s",
			key, len(best), len(part), model.DescribeState(s), strings.Join(next, "; "))
	}
	return "no partition failed (timed out?)"
}

func replay(s state, in any) state {
	_, next := model.Step(s, in, nil)
	return next.(state)
}

// partition splits a history by key, then each key's history into epochs
// (see the package doc): each epoch after the first starts with a seed
// operation, before all of its others, carrying the highest token granted
// and stored before the cut.
func partition(hist []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range hist {
		k := o.Input.(*Op).Key
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], o)
	}
	slices.Sort(keys)
	var parts [][]porcupine.Operation
	for _, k := range keys {
		parts = append(parts, epochs(k, byKey[k])...)
	}
	return parts
}

// epochs cuts one key's history (see the package doc).
func epochs(key string, ops []porcupine.Operation) [][]porcupine.Operation {
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	type grant struct {
		end      int64 // validity end, extensions included
		lastExt  int   // index of its last extend (-1: none)
		released bool  // its release is before the cut being considered
	}
	grants := map[int]*grant{}
	for i, o := range ops {
		op := o.Input.(*Op)
		g := grants[op.Grant]
		if g == nil {
			g = &grant{lastExt: -1}
			grants[op.Grant] = g
		}
		switch op.Kind {
		case Acquire:
			g.end = max(g.end, int64(op.Until))
		case Extend:
			g.end = max(g.end, int64(op.Until))
			g.lastExt = i
		}
	}
	var parts [][]porcupine.Operation
	start := 0
	var seedFence, seedStored, fence, stored int64
	maxRet := int64(math.MinInt64)
	maxExt := -1
	var open []*grant // grants before the cut, not yet known released or ended
	for i, o := range ops {
		if i-start >= minEpoch && maxRet < o.Call && maxExt < i {
			open = slices.DeleteFunc(open, func(g *grant) bool { return g.released || g.end <= o.Call })
			if len(open) == 0 {
				parts = append(parts, withSeed(key, ops[start:i], start > 0, seedFence, seedStored))
				start, seedFence, seedStored = i, fence, stored
			}
		}
		maxRet = max(maxRet, o.Return)
		op := o.Input.(*Op)
		g := grants[op.Grant]
		switch op.Kind {
		case Acquire:
			open = append(open, g)
			maxExt = max(maxExt, g.lastExt)
			fence = max(fence, op.Token)
		case Release:
			g.released = true
		case Write:
			if op.Outcome == OK {
				stored = max(stored, op.Token)
			}
		}
	}
	return append(parts, withSeed(key, ops[start:], start > 0, seedFence, seedStored))
}

func withSeed(key string, ops []porcupine.Operation, seeded bool, fence, stored int64) []porcupine.Operation {
	if !seeded {
		return ops
	}
	at := ops[0].Call - 1 // returns before every operation of the epoch is called
	return append([]porcupine.Operation{{ClientId: 0, Input: seed{key, fence, stored}, Output: nil, Call: at, Return: at}}, ops...)
}
