package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteTable writes r as human-readable tables: one row per target with
// throughput ratios against the primary target, the ceiling when
// measured, the sweep when there is one, and the hottest functions of the
// CPU profile.
func (r Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "masters=%d concurrency=%d keys=%d ttl=%dms hold=%gms workload=%s gomaxprocs=%d",
		r.Masters, r.Concurrency, r.Keys, r.TTLMillis, r.HoldMillis, r.Workload, r.GOMAXPROCS)
	if r.Rate > 0 {
		fmt.Fprintf(w, " rate=%.0f/s (open loop)", r.Rate)
	}
	if r.Embedded {
		fmt.Fprint(w, " (embedded masters: not representative)")
	}
	if r.Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tcycles/s\tvs %s\tattempts/s\tacq p50 µs\tacq p99 µs\trel p99 µs\tcycle p50 µs\tcycle p90 µs\tcycle p99 µs\tcycle p99.9 µs\tcycle max µs\tacquired\tfailed\terrors\tmissed\t\n", r.Target)
	for _, p := range r.phases() {
		ratio := r.ratio(p)
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%.1f\t\n",
			p.Target, p.CyclesPerSec, ratio, p.AttemptsPerSec, p.AcquireP50, p.AcquireP99, p.Release.P99,
			p.CycleP50, p.Cycle.P90, p.CycleP99, p.Cycle.P999, p.Cycle.Max,
			p.Acquired, p.FailedAcquires, p.Errors, p.Missed, p.ClientCPUPerCycle)
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(tw, "ceiling\t%.0f\t%s = %.2f of it\t\t\t\t\t\t\t\t\t\t\t\t%d\t\t\t\n", c.CyclesPerSec, r.Target, r.CeilingFraction, c.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Peers) > 0 {
		fmt.Fprintf(w, "(vs %s: the %s's cycles/s divided by the row's)\n", r.Target, r.Target)
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
	fmt.Fprintln(w, "(cpu µs/cycle: this process's CPU time in the measured window per cycle)")
	if r.Ceiling != nil {
		fmt.Fprintf(w, "(ceiling: SET NX PX + compare-and-delete EVALSHA pairs/s of the quorum-th fastest master, %d deep pipeline, all masters at once; slowest master %.0f/s)\n", r.Ceiling.Window, r.Ceiling.SlowestPerSec)
	}
	for _, p := range r.phases() {
		if p.FirstError != "" {
			fmt.Fprintf(w, "%s first error: %s\n", p.Target, p.FirstError)
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
