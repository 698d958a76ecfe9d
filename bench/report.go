package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// WriteTable writes the result as a table that fits 80 columns: one row
// per target with throughput, the ratio to the target, acquire and cycle
// latency, refusals and errors; then notes. [Result.WriteWideTable]
// writes every column.
func (r Result) WriteTable(w io.Writer) error { return r.writeTable(w, false) }

// WriteWideTable writes the table with every column (attempts, more
// percentiles, release latency, acquired and missed counts, the client's
// CPU time per cycle).
func (r Result) WriteWideTable(w io.Writer) error { return r.writeTable(w, true) }

func (r Result) writeTable(w io.Writer, wide bool) error {
	fmt.Fprintf(w, "%s  workers %d  keys %d  ttl %v  hold %v  %s  procs %d\n",
		r.mastersNote(), r.Concurrency, r.Keys, time.Duration(r.TTLMillis)*time.Millisecond,
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := r.columns(wide)
	for _, c := range cols {
		fmt.Fprint(tw, c.Head, "\t")
	}
	fmt.Fprintln(tw)
	for _, p := range r.phases() {
		for _, c := range cols {
			fmt.Fprint(tw, c.cell(p), "\t")
		}
		fmt.Fprintln(tw)
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(tw, "ceiling\t%.0f\t%.2fx\t", c.CyclesPerSec, r.CeilingFraction)
		if wide {
			for _, col := range cols[3:] {
				fmt.Fprint(tw, c.cell(col.ID), "\t")
			}
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if wide {
		fmt.Fprintf(w, "(latencies in µs; %s)\n", cpuNote)
	} else {
		fmt.Fprintln(w, "(latencies in µs; --wide for more columns)")
	}
	fmt.Fprintln(w, wrap("("+CountsNote+")", 78))
	if len(r.Peers) > 0 || r.Ceiling != nil {
		fmt.Fprintf(w, "(%s)\n", r.ratioNote())
	}
	for _, p := range r.Peers {
		if n := r.roundNote(p); n != "" {
			fmt.Fprintln(w, n)
		}
	}
	if r.Ceiling != nil && r.Ceiling.Errors > 0 {
		fmt.Fprintf(w, "ceiling errors: %d\n", r.Ceiling.Errors)
	}
	if r.Ceiling != nil {
		fmt.Fprintln(w, wrap("(ceiling: "+r.Ceiling.note()+")", 72))
	}
	for _, p := range r.phases() {
		if p.FirstError != "" {
			// Whole, wrapped: its end names the masters and their causes.
			fmt.Fprintln(w, wrap(p.Target+" first error: "+strings.Join(strings.Fields(p.FirstError), " "), 78))
		}
	}
	if n := r.timeoutNote(); n != "" {
		fmt.Fprintln(w, wrap(n, 78))
	}
	if r.Sweep != nil {
		if err := r.Sweep.writeTable(w); err != nil {
			return err
		}
	}
	if len(r.TopFlat) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "(%s)\n", r.profileNote())
		writeTop(w, "top 10 by flat CPU", r.TopFlat, true)
		writeTop(w, "top 10 by cumulative CPU", r.TopCum, false)
	}
	if len(r.Profiles) > 0 {
		fmt.Fprintf(w, "profiles: %s\n", strings.Join(r.Profiles, " "))
	}
	return nil
}

// profileNote says what the CPU profile covers (Config.CPUProfile).
func (r Result) profileNote() string {
	return "CPU profile of the " + r.Target + "'s measured windows only: not the warm-ups, peers or ceiling"
}

// column is one column of the comparison table. Its header and its cells
// come from the same entry, so no figure is printed without a heading.
type column struct {
	Head string // header, with the unit where the layout shows units
	ID   string // HTML id suffix of a cell ("cycles": id="engine-cycles"), or ""
	Left bool   // text, left-aligned in HTML
	cell func(Phase) string
}

// cpuNote explains the cpu µs/cycle column.
const cpuNote = "cpu µs/cycle: this process's CPU time per cycle"

// CountsNote explains the failed and errors columns (Phase.FailedAcquires
// and Phase.Errors): a refusal is contention, not a fault. The table, the
// HTML report and `redlock bench -h` show it.
const CountsNote = "failed counts acquisitions refused because the key was held: " +
	"contention, expected with a small --keys; errors counts operations that " +
	"failed otherwise: no quorum of masters, timeouts, I/O errors, releases not confirmed"

// columns returns the comparison table's columns. The default layout fits
// 80 columns (its latencies are in µs, said in a note, not in every
// header); wide has every figure and is also the HTML report's table.
func (r Result) columns(wide bool) []column {
	f0 := func(f func(Phase) float64) func(Phase) string {
		return func(p Phase) string { return fmt.Sprintf("%.0f", f(p)) }
	}
	n := func(f func(Phase) uint64) func(Phase) string {
		return func(p Phase) string { return strconv.FormatUint(f(p), 10) }
	}
	waited, rate, us := r.waited(), "cycles/s", ""
	if waited {
		rate = "hand-offs/s"
	}
	if wide {
		us = " µs"
	}
	cols := []column{
		{Head: "target", Left: true, cell: func(p Phase) string { return p.Target }},
		{Head: rate, ID: "cycles", cell: f0(func(p Phase) float64 { return p.CyclesPerSec })},
		{Head: r.Target + "÷row", cell: r.ratio},
	}
	if waited {
		cols = append(cols,
			column{Head: "wait p50" + us, ID: "wait-p50", cell: func(p Phase) string { return waitCell(p, p.WaitP50) }},
			column{Head: "wait p99" + us, ID: "wait-p99", cell: func(p Phase) string { return waitCell(p, p.WaitP99) }})
	}
	failed := column{Head: "failed", cell: n(func(p Phase) uint64 { return p.FailedAcquires })}
	errs := column{Head: "errors", cell: n(func(p Phase) uint64 { return p.Errors })}
	if !wide {
		return append(cols,
			column{Head: "acq p99", cell: f0(func(p Phase) float64 { return p.AcquireP99 })},
			column{Head: "cyc p50", cell: f0(func(p Phase) float64 { return p.CycleP50 })},
			column{Head: "cyc p99", cell: f0(func(p Phase) float64 { return p.CycleP99 })},
			failed, errs)
	}
	return append(cols,
		column{Head: "attempts/s", cell: f0(func(p Phase) float64 { return p.AttemptsPerSec })},
		column{Head: "acq p50 µs", cell: f0(func(p Phase) float64 { return p.AcquireP50 })},
		column{Head: "acq p99 µs", cell: f0(func(p Phase) float64 { return p.AcquireP99 })},
		column{Head: "rel p99 µs", cell: f0(func(p Phase) float64 { return p.Release.P99 })},
		column{Head: "cycle p50 µs", cell: f0(func(p Phase) float64 { return p.CycleP50 })},
		column{Head: "cycle p90 µs", cell: f0(func(p Phase) float64 { return p.Cycle.P90 })},
		column{Head: "cycle p99 µs", cell: f0(func(p Phase) float64 { return p.CycleP99 })},
		column{Head: "cycle p99.9 µs", cell: f0(func(p Phase) float64 { return p.Cycle.P999 })},
		column{Head: "cycle max µs", cell: f0(func(p Phase) float64 { return p.Cycle.Max })},
		column{Head: "acquired", cell: n(func(p Phase) uint64 { return p.Acquired })},
		failed, errs,
		column{Head: "missed", cell: n(func(p Phase) uint64 { return p.Missed })},
		column{Head: "cpu µs/cycle", ID: "cpu", cell: func(p Phase) string { return fmt.Sprintf("%.1f", p.ClientCPUPerCycle) }},
		column{Head: "syscalls/cycle", ID: "sys", cell: f1(func(p Phase) float64 { return p.ClientSyscallsPerCycle })},
		column{Head: "masters µs/cycle", ID: "mcpu", cell: f1(func(p Phase) float64 { return p.MasterCPUPerCycle })},
		column{Head: "masters syscalls/cycle", ID: "msys", cell: f1(func(p Phase) float64 { return p.MasterSyscallsPerCycle })},
		column{Head: "proxy µs/cycle", ID: "pcpu", cell: f1(func(p Phase) float64 { return p.ProxyCPUPerCycle })})
}

// f1 formats a per-cycle figure with one decimal, "-" when not measured.
func f1(v func(Phase) float64) func(Phase) string {
	return func(p Phase) string {
		if x := v(p); x > 0 {
			return fmt.Sprintf("%.1f", x)
		}
		return "-"
	}
}

// mastersNote says how many masters were up at the start.
func (r Result) mastersNote() string {
	if r.Target == TargetProxy && r.Masters == 0 {
		return "masters behind the proxy"
	}
	return fmt.Sprintf("masters %d/%d up", r.MastersUp, r.Masters)
}

// ratioNote explains the ratio column.
func (r Result) ratioNote() string {
	return fmt.Sprintf("%s÷row: the %s's cycles/s divided by the row's", r.Target, r.Target)
}

// roundNote lists the target's ratio to p in each round of an interleaved
// run ("" without rounds).
func (r Result) roundNote(p Phase) string {
	rs := r.roundRatios(p)
	if len(rs) < 2 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s ÷ %s per round:", r.Target, p.Target)
	for _, x := range rs {
		fmt.Fprintf(&b, " %.2fx", x)
	}
	s := slices.Sorted(slices.Values(rs))
	fmt.Fprintf(&b, "  (min %.2fx, median %.2fx)", s[0], median(s))
	return b.String()
}

// cell is the ceiling row's figure in the wide table's column id: the
// pumps' and the masters' CPU per pair (one SET NX PX and one release on
// every master, the unit a lock cycle is), blank elsewhere.
func (c *CeilingInfo) cell(id string) string {
	switch {
	case id == "cpu" && c.ClientCPUPerPair > 0:
		return fmt.Sprintf("%.1f", c.ClientCPUPerPair)
	case id == "mcpu" && c.MasterCPUPerPair > 0:
		return fmt.Sprintf("%.1f", c.MasterCPUPerPair)
	}
	return ""
}

// note says what the ceiling measured.
func (c *CeilingInfo) note() string {
	n := fmt.Sprintf("SET NX PX + compare-and-delete EVALSHA pairs/s of the quorum-th fastest master, %d deep pipeline, all masters at once; slowest master %.0f/s",
		c.Window, c.SlowestPerSec)
	if c.MasterCPUPerPair > 0 {
		n += fmt.Sprintf("; CPU per pair on every master: pumps %.1f µs, masters %.1f µs together", c.ClientCPUPerPair, c.MasterCPUPerPair)
	}
	return n
}

// wrap breaks s at spaces into lines of at most width runes (a longer
// word stays whole); continuation lines start with a space.
// timeoutNote suggests a longer --master-timeout when the engine's cycle
// p99 is above its per-master timeout: masters answering slower than
// that count as failed, and the errors are the timeout's, not the
// masters' ("" otherwise).
func (r Result) timeoutNote() string {
	mt := r.MasterTimeoutMillis * 1000 // µs
	if mt <= 0 || r.Target != TargetEngine || r.CycleP99 <= mt {
		return ""
	}
	return fmt.Sprintf("note: the cycle p99 (%.0f µs) is above the per-master timeout (%v): a master slower than that counts as "+
		"failed (this host may be overloaded); a longer --master-timeout tells slow masters from failed ones",
		r.CycleP99, time.Duration(r.MasterTimeoutMillis*1e6))
}

func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		l := utf8.RuneCountInString(word)
		switch {
		case i == 0:
		case n+1+l > width:
			b.WriteString("\n ")
			n = 1
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += l
	}
	return b.String()
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
	fmt.Fprintf(tw, "%s\ttarget\tcycles/s\tcycle p50 µs\tcycle p99 µs\terrors\tmissed\tcycles/s chart\n", s.Var)
	for _, p := range s.Points {
		for _, ph := range p.Phases {
			bar := ""
			if best > 0 {
				bar = strings.Repeat("#", int(40*ph.CyclesPerSec/best+0.5))
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.0f\t%.0f\t%d\t%d\t%s\n", p.Value, ph.Target, ph.CyclesPerSec, ph.CycleP50, ph.CycleP99, ph.Errors, ph.Missed, bar)
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
