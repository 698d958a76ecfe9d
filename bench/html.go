package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// WriteReport writes a self-contained report of r into dir: index.html
// (inline SVG charts, tables and the environment; no external resources)
// and result.json. Profiles are written there by [Run] itself.
func WriteReport(dir string, r Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(renderHTML(r)), 0o644); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	return nil
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

const css = `body{font-family:sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#eef}td.l,th.l{text-align:left}svg{display:block;margin:8px 0}
.note{color:#666;font-size:13px}`

// renderHTML returns the report page.
func renderHTML(r Result) string {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>redlock bench report</title><style>%s</style></head><body>\n", css)
	b.WriteString("<h1>redlock bench report</h1>\n")
	fmt.Fprintf(&b, "<p class=\"note\" id=\"summary\">%s: %d masters, concurrency %d, %d keys, TTL %d ms, hold %g ms, workload %s",
		e(r.Target), r.Masters, r.Concurrency, r.Keys, r.TTLMillis, r.HoldMillis, e(r.Workload))
	if r.Rate > 0 {
		fmt.Fprintf(&b, ", open loop at %.0f/s", r.Rate)
	}
	if r.Embedded {
		b.WriteString(" — <b>embedded masters: numbers not representative</b>")
	}
	if r.Interrupted {
		b.WriteString(" — <b>interrupted</b>")
	}
	b.WriteString("</p>\n")

	// Comparison table.
	waited := r.waited()
	rate, waitHead := "cycles/s", ""
	if waited {
		rate, waitHead = "hand-offs/s", "<th>wait p50 µs</th><th>wait p99 µs</th>"
	}
	b.WriteString("<h2>Comparison</h2>\n<table id=\"comparison\"><tr><th class=\"l\">target</th><th>" + rate + "</th><th>vs " + e(r.Target) +
		"</th>" + waitHead + "<th>attempts/s</th><th>acquire p50 µs</th><th>acquire p99 µs</th><th>release p99 µs</th><th>cycle p50 µs</th><th>cycle p99 µs</th><th>cycle p99.9 µs</th><th>acquired</th><th>failed</th><th>errors</th><th>missed</th></tr>\n")
	for _, p := range r.phases() {
		ratio := r.ratio(p)
		if waited {
			ratio += "</td><td id=\"" + e(p.Target) + "-wait-p50\">" + waitCell(p, p.WaitP50) + "</td><td id=\"" + e(p.Target) + "-wait-p99\">" + waitCell(p, p.WaitP99)
		}
		fmt.Fprintf(&b, "<tr><td class=\"l\">%s</td><td id=\"%s-cycles\">%.0f</td><td>%s</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>\n",
			e(p.Target), e(p.Target), p.CyclesPerSec, ratio, p.AttemptsPerSec, p.AcquireP50, p.AcquireP99, p.Release.P99,
			p.CycleP50, p.CycleP99, p.Cycle.P999, p.Acquired, p.FailedAcquires, p.Errors, p.Missed)
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(&b, "<tr><td class=\"l\">ceiling</td><td id=\"ceiling-cycles\">%.0f</td><td>%s = %.2f of it</td><td colspan=\"11\" class=\"l\">SET NX PX + compare-and-delete EVALSHA pairs/s of the quorum-th fastest master, %d deep pipeline, all masters at once (slowest master: %.0f/s)</td></tr>\n",
			c.CyclesPerSec, e(r.Target), r.CeilingFraction, c.Window, c.SlowestPerSec)
	}
	b.WriteString("</table>\n")
	for _, p := range r.phases() {
		if p.FirstError != "" {
			fmt.Fprintf(&b, "<p class=\"note\">%s first error: %s</p>\n", e(p.Target), e(p.FirstError))
		}
	}

	// Throughput over time.
	var ts []series
	for _, p := range r.phases() {
		s := series{name: p.Target}
		for i, v := range p.PerSecond {
			s.xs = append(s.xs, float64(i+1))
			s.ys = append(s.ys, float64(v))
		}
		if len(s.xs) > 0 {
			ts = append(ts, s)
		}
	}
	b.WriteString("<h2>Throughput over time</h2>\n")
	if len(ts) > 0 {
		b.WriteString(lineChart("throughput-chart", "completed cycles per second", "second of the run", "cycles/s", ts, false))
	} else {
		b.WriteString("<p class=\"note\">The run was shorter than one second: no per-second series.</p>\n")
	}

	// Latency percentiles.
	b.WriteString("<h2>Latency percentiles</h2>\n")
	groups := []string{"p50", "p90", "p99", "p99.9", "max"}
	var bs []series
	for _, p := range r.phases() {
		c := p.Cycle
		bs = append(bs, series{name: p.Target + " cycle", ys: []float64{c.P50, c.P90, c.P99, c.P999, c.Max}})
		if p.Acquire.Count > 0 && r.Workload != WorkloadAcquire {
			a := p.Acquire
			bs = append(bs, series{name: p.Target + " acquire", ys: []float64{a.P50, a.P90, a.P99, a.P999, a.Max}})
		}
	}
	b.WriteString(barChart("latency-chart", "latency (µs, log scale)", groups, bs))
	b.WriteString("<table id=\"latency\"><tr><th class=\"l\">target</th><th class=\"l\">operation</th><th>count</th><th>p50 µs</th><th>p90 µs</th><th>p99 µs</th><th>p99.9 µs</th><th>max µs</th><th>mean µs</th></tr>\n")
	for _, p := range r.phases() {
		for _, op := range []struct {
			name string
			l    Latency
		}{{"acquire", p.Acquire}, {"release", p.Release}, {"cycle", p.Cycle}} {
			l := op.l
			fmt.Fprintf(&b, "<tr><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%.1f</td></tr>\n",
				e(p.Target), op.name, l.Count, l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
		}
	}
	b.WriteString("</table>\n")

	// Sweep.
	if sw := r.Sweep; sw != nil && len(sw.Points) > 0 {
		fmt.Fprintf(&b, "<h2>Sweep over %s</h2>\n", e(sw.Var))
		byTarget := map[string]int{}
		var thr, p99 []series
		for _, pt := range sw.Points {
			for _, ph := range pt.Phases {
				i, ok := byTarget[ph.Target]
				if !ok {
					i = len(thr)
					byTarget[ph.Target] = i
					thr = append(thr, series{name: ph.Target})
					p99 = append(p99, series{name: ph.Target})
				}
				thr[i].xs = append(thr[i].xs, float64(pt.Value))
				thr[i].ys = append(thr[i].ys, ph.CyclesPerSec)
				p99[i].xs = append(p99[i].xs, float64(pt.Value))
				p99[i].ys = append(p99[i].ys, ph.CycleP99)
			}
		}
		logX := sw.Var == SweepConcurrency
		b.WriteString(lineChart("sweep-throughput-chart", "cycles/s against "+sw.Var, sw.Var, "cycles/s", thr, logX))
		b.WriteString(lineChart("sweep-p99-chart", "cycle p99 against "+sw.Var, sw.Var, "p99 µs", p99, logX))
		fmt.Fprintf(&b, "<table id=\"sweep\"><tr><th>%s</th><th class=\"l\">target</th><th>cycles/s</th><th>cycle p50 µs</th><th>cycle p99 µs</th><th>errors</th></tr>\n", e(sw.Var))
		for _, pt := range sw.Points {
			for _, ph := range pt.Phases {
				fmt.Fprintf(&b, "<tr><td>%d</td><td class=\"l\">%s</td><td>%.0f</td><td>%.0f</td><td>%.0f</td><td>%d</td></tr>\n",
					pt.Value, e(ph.Target), ph.CyclesPerSec, ph.CycleP50, ph.CycleP99, ph.Errors)
			}
		}
		b.WriteString("</table>\n")
	}

	// Profile.
	if len(r.TopFlat) > 0 {
		b.WriteString("<h2>Hottest functions (CPU profile)</h2>\n")
		for _, t := range []struct {
			id, title string
			fs        []FuncStat
		}{{"top-flat", "by flat time", r.TopFlat}, {"top-cum", "by cumulative time", r.TopCum}} {
			fmt.Fprintf(&b, "<p>%s</p><table id=\"%s\"><tr><th>flat s</th><th>flat%%</th><th>cum s</th><th>cum%%</th><th class=\"l\">function</th></tr>\n", t.title, t.id)
			for _, f := range t.fs {
				fmt.Fprintf(&b, "<tr><td>%.2f</td><td>%.1f%%</td><td>%.2f</td><td>%.1f%%</td><td class=\"l\">%s</td></tr>\n", f.Flat, f.FlatPct, f.Cum, f.CumPct, e(f.Name))
			}
			b.WriteString("</table>\n")
		}
	}
	if len(r.Profiles) > 0 {
		b.WriteString("<p>Profiles (read with <code>go tool pprof</code>): ")
		for i, p := range r.Profiles {
			if i > 0 {
				b.WriteString(", ")
			}
			base := filepath.Base(p)
			fmt.Fprintf(&b, "<a href=\"%s\">%s</a>", e(base), e(base))
		}
		b.WriteString("</p>\n")
	}

	// Environment.
	env := r.Env
	b.WriteString("<h2>Environment</h2>\n<table id=\"env\">\n")
	row := func(k, v string) {
		fmt.Fprintf(&b, "<tr><th class=\"l\">%s</th><td class=\"l\">%s</td></tr>\n", k, e(v))
	}
	row("CPU", env.CPU)
	row("CPUs", fmt.Sprint(env.NumCPU))
	row("GOMAXPROCS", fmt.Sprint(env.GOMAXPROCS))
	row("Go", env.GoVersion)
	row("OS/arch", env.OS+"/"+env.Arch)
	row("Redis", env.RedisVersion)
	row("host", env.Hostname)
	row("load average at start", env.LoadAvg)
	row("time", env.Time)
	row("command", strings.Join(env.Args, " "))
	b.WriteString("</table>\n</body></html>\n")
	return b.String()
}

// series is one named line or bar group of a chart.
type series struct {
	name   string
	xs, ys []float64
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH                     = 960, 320
	marginL, marginR, marginT, marginB = 80, 190, 30, 45
)

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.4g", v)
}

func svgOpen(b *strings.Builder, id, title string) {
	fmt.Fprintf(b, "<svg id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n",
		id, chartW, chartH, chartW, chartH, html.EscapeString(title))
	fmt.Fprintf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#ddd\"/>\n", chartW, chartH)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", marginL, html.EscapeString(title))
}

func legend(b *strings.Builder, names []string) {
	for i, n := range names {
		y := marginT + 10 + 20*i
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n",
			chartW-marginR+15, y, palette[i%len(palette)], chartW-marginR+35, y+10, html.EscapeString(n))
	}
}

// lineChart draws series as lines with points; logX uses a log2 x axis.
func lineChart(id, title, xlab, ylab string, ss []series, logX bool) string {
	var b strings.Builder
	svgOpen(&b, id, title)
	pw, ph := float64(chartW-marginL-marginR), float64(chartH-marginT-marginB)
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for i := range s.xs {
			xmin, xmax = min(xmin, s.xs[i]), max(xmax, s.xs[i])
			ymax = max(ymax, s.ys[i])
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	ymax = niceMax(ymax)
	fx := func(x float64) float64 { return x }
	if logX && xmin > 0 {
		fx = math.Log2
	}
	lo, hi := fx(xmin), fx(xmax)
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	X := func(x float64) float64 { return float64(marginL) + (fx(x)-lo)/(hi-lo)*pw }
	Y := func(y float64) float64 { return float64(marginT) + ph - y/ymax*ph }
	for i := 0; i <= 5; i++ { // y grid
		v := ymax * float64(i) / 5
		fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
			marginL, float64(marginL)+pw, Y(v), Y(v), marginL-6, Y(v)+4, fmtNum(v))
	}
	ticks := map[float64]bool{}
	for _, s := range ss { // x ticks at the data's x values (at most ~20)
		step := max(1, len(s.xs)/20)
		for i := 0; i < len(s.xs); i += step {
			ticks[s.xs[i]] = true
		}
	}
	for x := range ticks {
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", X(x), float64(marginT)+ph+16, fmtNum(x))
	}
	fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n", float64(marginL)+pw/2, chartH-8, html.EscapeString(xlab))
	fmt.Fprintf(&b, "<text x=\"16\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">%s</text>\n", float64(marginT)+ph/2, float64(marginT)+ph/2, html.EscapeString(ylab))
	fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%.1f\" stroke=\"#444\"/><line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n",
		marginL, marginL, marginT, float64(marginT)+ph, marginL, float64(marginL)+pw, float64(marginT)+ph, float64(marginT)+ph)
	var names []string
	for si, s := range ss {
		col := palette[si%len(palette)]
		names = append(names, s.name)
		var pts []string
		for i := range s.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(s.xs[i]), Y(s.ys[i])))
		}
		fmt.Fprintf(&b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" points=\"%s\"/>\n", col, strings.Join(pts, " "))
		for i := range s.xs {
			fmt.Fprintf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s: %s = %s, %s</title></circle>\n",
				X(s.xs[i]), Y(s.ys[i]), col, html.EscapeString(s.name), html.EscapeString(xlab), fmtNum(s.xs[i]), fmtNum(s.ys[i]))
		}
	}
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}

// barChart draws grouped bars on a log10 y axis: one group per label,
// one bar per series.
func barChart(id, title string, groups []string, ss []series) string {
	var b strings.Builder
	svgOpen(&b, id, title)
	pw, ph := float64(chartW-marginL-marginR), float64(chartH-marginT-marginB)
	ymax := 1.0
	for _, s := range ss {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	top := math.Ceil(math.Log10(ymax))
	if top < 1 {
		top = 1
	}
	Y := func(y float64) float64 {
		l := 0.0
		if y > 1 {
			l = math.Log10(y)
		}
		return float64(marginT) + ph - l/top*ph
	}
	for p := 0.0; p <= top; p++ {
		v := math.Pow(10, p)
		fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
			marginL, float64(marginL)+pw, Y(v), Y(v), marginL-6, Y(v)+4, fmtNum(v))
	}
	gw := pw / float64(len(groups))
	bw := gw * 0.8 / float64(max(len(ss), 1))
	var names []string
	for si, s := range ss {
		names = append(names, s.name)
		col := palette[si%len(palette)]
		for gi, y := range s.ys {
			x := float64(marginL) + gw*float64(gi) + gw*0.1 + bw*float64(si)
			fmt.Fprintf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s %s: %.0f µs</title></rect>\n",
				x, Y(y), bw*0.9, float64(marginT)+ph-Y(y), col, html.EscapeString(s.name), groups[gi], y)
		}
	}
	for gi, g := range groups {
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n", float64(marginL)+gw*(float64(gi)+0.5), float64(marginT)+ph+16, g)
	}
	fmt.Fprintf(&b, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", marginL, float64(marginL)+pw, float64(marginT)+ph, float64(marginT)+ph)
	legend(&b, names)
	b.WriteString("</svg>\n")
	return b.String()
}
