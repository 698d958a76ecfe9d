package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the result as a table that fits 80 columns: one row
// per target with throughput, the ratio to the target, acquire and cycle
// latency, refusals, errors and client CPU; then notes. [Result.WriteWideTable]
// writes every column.
func (r Result) WriteTable(w io.Writer) error { return r.writeTable(w, false) }

// WriteWideTable writes the table with every column (attempts, more
// percentiles, release latency, acquired and missed counts).
func (r Result) WriteWideTable(w io.Writer) error { return r.writeTable(w, true) }

func (r Result) writeTable(w io.Writer, wide bool) error {
	masters := fmt.Sprintf("masters %d/%d up", r.MastersUp, r.Masters)
	if r.Target == TargetProxy && r.Masters == 0 {
		masters = "masters behind the proxy"
	}
	fmt.Fprintf(w, "%s  workers %d  keys %d  ttl %v  hold %v  %s  procs %d\n",
		masters, r.Concurrency, r.Keys, time.Duration(r.TTLMillis)*time.Millisecond,
		time.Duration(r.HoldMillis*1e6), r.Workload, r.GOMAXPROCS)
	var notes []string
	if r.Rate > 0 {
		notes = append(notes, fmt.Sprintf("open loop at %.0f/s", r.Rate))
	}
	if r.Embedded {
		notes = append(notes, "embedded masters: not representative")
	}
	if r.Interrupted {
		notes = append(notes, "interrupted")
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "(%s)\n", strings.Join(notes, "; "))
	}
	ratioHead := r.Target + "÷row"
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	waited := r.waited()
	rate, waitHead := "cycles/s", ""
	if waited {
		rate, waitHead = "hand-offs/s", "wait p50\twait p99\t"
	}
	if wide {
		fmt.Fprintf(tw, "target\t%s\t%s\t%sattempts/s\tacq p50 µs\tacq p99 µs\trel p99 µs\tcycle p50 µs\tcycle p90 µs\tcycle p99 µs\tcycle p99.9 µs\tcycle max µs\tacquired\tfailed\terrors\tmissed\tcpu µs/cycle\t\n", rate, ratioHead, waitHead)
	} else {
		fmt.Fprintf(tw, "target\t%s\t%s\t%sacq p99\tcyc p50\tcyc p99\tfailed\terrors\t\n", rate, ratioHead, waitHead)
	}
	for _, p := range r.phases() {
		ratio := r.ratio(p)
		if waited {
			ratio += "\t" + waitCell(p, p.WaitP50) + "\t" + waitCell(p, p.WaitP99)
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%.1f\t\n",
				p.Target, p.CyclesPerSec, ratio, p.AttemptsPerSec, p.AcquireP50, p.AcquireP99, p.Release.P99,
				p.CycleP50, p.Cycle.P90, p.CycleP99, p.Cycle.P999, p.Cycle.Max,
				p.Acquired, p.FailedAcquires, p.Errors, p.Missed, p.ClientCPUPerCycle)
		} else {
			fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%d\t%d\t\n",
				p.Target, p.CyclesPerSec, ratio, p.AcquireP99, p.CycleP50, p.CycleP99, p.FailedAcquires, p.Errors)
		}
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(tw, "ceiling\t%.0f\t%.2fx\t\n", c.CyclesPerSec, r.CeilingFraction)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if wide {
		fmt.Fprintln(w, "(latencies in µs; cpu µs/cycle: this process's CPU time per cycle)")
	} else {
		fmt.Fprintln(w, "(latencies in µs; --wide for more columns)")
	}
	if len(r.Peers) > 0 || r.Ceiling != nil {
		fmt.Fprintf(w, "(%s÷row: the %s's cycles/s divided by the row's)\n", r.Target, r.Target)
	}
	for _, p := range r.Peers {
		if rs := r.roundRatios(p); len(rs) > 1 {
			fmt.Fprintf(w, "%s ÷ %s per round:", r.Target, p.Target)
			for _, x := range rs {
				fmt.Fprintf(w, " %.2fx", x)
			}
			s := slices.Sorted(slices.Values(rs))
			fmt.Fprintf(w, "  (min %.2fx, median %.2fx)\n", s[0], median(s))
		}
	}
	if r.Ceiling != nil && r.Ceiling.Errors > 0 {
		fmt.Fprintf(w, "ceiling errors: %d\n", r.Ceiling.Errors)
	}
	if r.Ceiling != nil {
		fmt.Fprintf(w, "(ceiling: SET NX PX + compare-and-delete EVALSHA pairs/s of the\n quorum-th fastest master, %d deep pipeline, all masters at once;\n slowest master %.0f/s)\n", r.Ceiling.Window, r.Ceiling.SlowestPerSec)
	}
	for _, p := range r.phases() {
		if p.FirstError != "" {
			msg := p.Target + " first error: " + strings.Join(strings.Fields(p.FirstError), " ")
			if r := []rune(msg); !wide && len(r) > 80 {
				msg = string(r[:79]) + "…"
			}
			fmt.Fprintln(w, msg)
		}
	}
	if r.Sweep != nil {
		if err := r.Sweep.writeTable(w); err != nil {
			return err
		}
	}
	if len(r.TopFlat) > 0 {
		fmt.Fprintln(w)
		writeTop(w, "top 10 by flat CPU", r.TopFlat, true)
		writeTop(w, "top 10 by cumulative CPU", r.TopCum, false)
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintf(w, "profiles: %s\n", strings.Join(r.Profiles, " "))
	}
	return nil
}

func writeTop(w io.Writer, title string, fs []FuncStat, byFlat bool) {
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  flat s\tflat%\tcum s\tcum%\tfunction")
	for _, f := range fs {
		fmt.Fprintf(tw, "  %.2f\t%.1f%%\t%.2f\t%.1f%%\t%s\n", f.Flat, f.FlatPct, f.Cum, f.CumPct, f.Name)
	}
	tw.Flush()
}

// writeTable writes one row per sweep point and target with a bar chart
// of cycles/s.
func (s *SweepResult) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "\nsweep over %s\n", s.Var)
	var best float64
	for _, p := range s.Points {
		for _, ph := range p.Phases {
			best = max(best, ph.CyclesPerSec)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\ttarget\tcycles/s\tcycle p50 µs\tcycle p99 µs\terrors\tcycles/s chart\n", s.Var)
	for _, p := range s.Points {
		for _, ph := range p.Phases {
			bar := ""
			if best > 0 {
				bar = strings.Repeat("#", int(40*ph.CyclesPerSec/best+0.5))
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%.0f\t%d\t%s\n", p.Value, ph.Target, ph.CyclesPerSec, ph.CycleP50, ph.CycleP99, ph.Errors, bar)
		}
	}
	return tw.Flush()
}

// roundRatios returns the target's cycles/s over p's in each round of an
// interleaved run (nil without rounds).
func (r Result) roundRatios(p Phase) []float64 {
	t, q := r.RoundCyclesPerSec, p.RoundCyclesPerSec
	if len(t) != len(q) || len(t) < 2 {
		return nil
	}
	out := make([]float64, len(t))
	for i := range t {
		if q[i] > 0 {
			out[i] = t[i] / q[i]
		}
	}
	return out
}

// median returns the median of sorted s (s not empty).
func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio renders the target's cycles/s divided by p's ("1.00x" for the
// target itself, "-" when p completed nothing).
func (r Result) ratio(p Phase) string {
	switch {
	case p.Target == r.Target:
		return "1.00x"
	case p.CyclesPerSec > 0:
		return fmt.Sprintf("%.2fx", r.CyclesPerSec/p.CyclesPerSec)
	}
	return "-"
}

// waited reports whether a target of r waited for its locks (the wait
// columns are shown).
func (r *Result) waited() bool {
	for _, p := range r.phases() {
		if p.Waited {
			return true
		}
	}
	return false
}

// waitCell formats a wait percentile, or "-" for a target that did not
// wait (it polled with one attempt per operation).
func waitCell(p Phase, v float64) string {
	if !p.Waited {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}
