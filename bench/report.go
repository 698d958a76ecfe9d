package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes r as a human-readable table: one row per target, with
// ratios against the engine, and the ceiling when measured.
func (r Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "masters=%d concurrency=%d keys=%d ttl=%dms gomaxprocs=%d", r.Masters, r.Concurrency, r.Keys, r.TTLMillis, r.GOMAXPROCS)
	if r.Embedded {
		fmt.Fprint(w, " (embedded masters: not representative)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tcycles/s\tvs engine\tacq p50 µs\tacq p99 µs\tcycle p50 µs\tcycle p99 µs\tcycle p99.9 µs\tacquired\tfailed\terrors\t")
	rows := append([]Phase{r.Phase}, r.Peers...)
	for _, p := range rows {
		ratio := "1.00x"
		if p.Target != r.Target && p.CyclesPerSec > 0 {
			ratio = fmt.Sprintf("%.2fx slower", r.CyclesPerSec/p.CyclesPerSec)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t\n",
			p.Target, p.CyclesPerSec, ratio, p.AcquireP50, p.AcquireP99, p.CycleP50, p.CycleP99, p.Cycle.P999,
			p.Acquired, p.FailedAcquires, p.Errors)
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(tw, "ceiling\t%.0f\tengine = %.2f of it\t\t\t\t\t\t\t\t%d\t\n", c.CyclesPerSec, r.CeilingFraction, c.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range rows {
		if p.FirstError != "" {
			fmt.Fprintf(w, "%s first error: %s\n", p.Target, p.FirstError)
		}
	}
	return nil
}
