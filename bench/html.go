package bench

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	var page bytes.Buffer
	if err := writeHTML(&page, r); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	return nil
}

//go:embed report.html.tmpl
var reportText string

// reportTemplate draws the page from a [reportPage]. html/template escapes
// every value for where it lands (element text, attribute, URL), so a
// target, a master's address in an error or the command line, or a
// function name shows as text and cannot add markup; no value is passed
// as template.HTML.
var reportTemplate = template.Must(template.New("report.html.tmpl").Parse(reportText))

// writeHTML writes the report page of r to w.
func writeHTML(w io.Writer, r Result) error {
	return reportTemplate.Execute(w, newReportPage(r))
}

// reportPage is what report.html.tmpl draws: the result, and the rows,
// notes and chart geometry derived from it.
type reportPage struct {
	Result
	MastersNote string
	// Columns and Rows are the comparison table: the wide text layout
	// (see [Result.columns]), one row per target.
	Columns     []column
	Rows        [][]tableCell
	CeilingSpan int    // columns after the ceiling row's ratio
	CeilingNote string // what the ceiling measured
	Notes       []string
	Throughput  *svgChart // nil when the run was shorter than a second
	Latency     svgChart
	LatencyRows []latencyRow
	SweepCharts []svgChart
	TopTables   []topTable
	ProfileNote string // what the CPU profile covers
	Links       []profileLink
	EnvRows     []envRow
}

type tableCell struct {
	Text, ID string
	Left     bool
}

type latencyRow struct {
	Target, Op string
	Latency
}

type topTable struct {
	ID, Title string
	Funcs     []FuncStat
}

type profileLink struct {
	Href, Name string
}

type envRow struct {
	Key, Value string
}

// newReportPage derives the page's tables, notes and charts from r.
func newReportPage(r Result) reportPage {
	pg := reportPage{Result: r, MastersNote: r.mastersNote(), Columns: r.columns(true)}

	// Comparison table and its notes.
	for _, p := range r.phases() {
		var row []tableCell
		for _, c := range pg.Columns {
			cell := tableCell{Text: c.cell(p), Left: c.Left}
			if c.ID != "" {
				cell.ID = p.Target + "-" + c.ID
			}
			row = append(row, cell)
		}
		pg.Rows = append(pg.Rows, row)
	}
	if r.Ceiling != nil {
		pg.CeilingSpan, pg.CeilingNote = len(pg.Columns)-3, r.Ceiling.note()
	}
	pg.Notes = append(pg.Notes, "latencies in µs; "+cpuNote, CountsNote)
	if len(r.Peers) > 0 || r.Ceiling != nil {
		pg.Notes = append(pg.Notes, r.ratioNote())
	}
	for _, p := range r.Peers {
		if n := r.roundNote(p); n != "" {
			pg.Notes = append(pg.Notes, n)
		}
	}
	if r.Ceiling != nil && r.Ceiling.Errors > 0 {
		pg.Notes = append(pg.Notes, fmt.Sprintf("ceiling errors: %d", r.Ceiling.Errors))
	}
	for _, p := range r.phases() {
		if p.FirstError != "" {
			pg.Notes = append(pg.Notes, p.Target+" first error: "+p.FirstError)
		}
	}

	// Throughput over time. The phases ran one after another, so each is
	// drawn on its own time axis, from its measured window's opening at 0
	// (the rounds of one phase end to end), overlaid: second k of every
	// phase at the same x, its cycles of second (k-1, k] plotted at k.
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
	if len(ts) > 0 {
		c := lineChart("throughput-chart", "completed cycles per second", throughputXLabel, "cycles/s", ts, xTime)
		pg.Throughput = &c
	}

	// Latency percentiles.
	var bs []series
	for _, p := range r.phases() {
		c := p.Cycle
		bs = append(bs, series{name: p.Target + " cycle", ys: []float64{c.P50, c.P90, c.P99, c.P999, c.Max}})
		if p.Acquire.Count > 0 && r.Workload != WorkloadAcquire {
			a := p.Acquire
			bs = append(bs, series{name: p.Target + " acquire", ys: []float64{a.P50, a.P90, a.P99, a.P999, a.Max}})
		}
		pg.LatencyRows = append(pg.LatencyRows,
			latencyRow{p.Target, "acquire", p.Acquire}, latencyRow{p.Target, "release", p.Release}, latencyRow{p.Target, "cycle", p.Cycle})
	}
	pg.Latency = barChart("latency-chart", "latency (µs, log scale)", []string{"p50", "p90", "p99", "p99.9", "max"}, bs)

	// Sweep: one curve per target.
	if sw := r.Sweep; sw != nil && len(sw.Points) > 0 {
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
		scale := xData
		if sw.Var == SweepConcurrency {
			scale = xLog2
		}
		title, xName := "cycles/s against "+sw.Var, sw.Var
		if sw.Var == SweepRate { // the overload curve
			title, xName = "goodput (cycles/s) against offered load", "offered ops/s"
		}
		pg.SweepCharts = []svgChart{
			lineChart("sweep-throughput-chart", title, xName, "cycles/s", thr, scale),
			lineChart("sweep-p99-chart", "cycle p99 against "+xName, xName, "p99 µs", p99, scale),
		}
	}

	// Profile.
	if len(r.TopFlat) > 0 {
		pg.TopTables = []topTable{{"top-flat", "by flat time", r.TopFlat}, {"top-cum", "by cumulative time", r.TopCum}}
		pg.ProfileNote = r.profileNote()
	}
	for _, p := range r.Profiles {
		// The profiles sit next to index.html: link the base name as a
		// relative path (url.URL escapes it and keeps a colon from being
		// read as a scheme).
		base := filepath.Base(p)
		pg.Links = append(pg.Links, profileLink{Href: (&url.URL{Path: base}).String(), Name: base})
	}

	env := r.Env
	pg.EnvRows = []envRow{
		{"CPU", env.CPU},
		{"CPUs", strconv.Itoa(env.NumCPU)},
		{"GOMAXPROCS", strconv.Itoa(env.GOMAXPROCS)},
		{"Go", env.GoVersion},
		{"OS/arch", env.OS + "/" + env.Arch},
		{"Redis", env.RedisVersion},
		{"host", env.Hostname},
		{"load average at start", env.LoadAvg},
		{"time", env.Time},
		{"command", strings.Join(env.Args, " ")},
	}
	return pg
}

// series is one named line or bar group of a chart.
type series struct {
	name   string
	xs, ys []float64
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// Chart geometry, in SVG user units.
const (
	chartW, chartH                     = 960, 320
	marginL, marginR, marginT, marginB = 80, 190, 30, 45
	plotW, plotH                       = chartW - marginL - marginR, chartH - marginT - marginB
)

// px is an SVG coordinate; it prints with one decimal.
type px float64

func (v px) String() string { return strconv.FormatFloat(float64(v), 'f', 1, 64) }

// svgFrame is the fixed geometry every chart shares.
type svgFrame struct {
	W, H, Left, Top, LabelX, LegendX, LegendTextX int
	Right, Bottom, MidX, MidY, XLabelY, TickY     px
}

var frame = svgFrame{
	W: chartW, H: chartH, Left: marginL, Top: marginT,
	LabelX: marginL - 6, LegendX: chartW - marginR + 15, LegendTextX: chartW - marginR + 35,
	Right: marginL + plotW, Bottom: marginT + plotH, MidX: marginL + plotW/2.0, MidY: marginT + plotH/2.0,
	XLabelY: chartH - 8, TickY: marginT + plotH + 16,
}

// svgChart is a chart computed by [lineChart] or [barChart], drawn by the
// "chart" template of report.html.tmpl.
type svgChart struct {
	svgFrame
	ID, Title      string
	XLabel, YLabel string // axis titles, or ""
	YAxis          bool   // draw the vertical axis
	TickSize       int    // font size of the labels under the plot
	Grid           []svgGrid
	XTicks         []svgText
	Lines          []svgLine
	Bars           []svgBar
	Legend         []svgLegend
}

// svgGrid is a horizontal grid line with its value at the left.
type svgGrid struct {
	Y, TextY px
	Label    string
}

type svgText struct {
	X     px
	Label string
}

type svgLine struct {
	Color, Points string
	Dots          []svgDot
}

type svgDot struct {
	X, Y  px
	Title string
}

type svgBar struct {
	X, Y, W, H px
	Color      string
	Title      string
}

type svgLegend struct {
	Y, TextY    int
	Color, Name string
}

func newChart(id, title string, ss []series) svgChart {
	c := svgChart{svgFrame: frame, ID: id, Title: title}
	for i, s := range ss {
		y := marginT + 10 + 20*i
		c.Legend = append(c.Legend, svgLegend{Y: y, TextY: y + 10, Color: color(i), Name: s.name})
	}
	return c
}

func color(i int) string { return palette[i%len(palette)] }

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

// throughputXLabel is the x axis title of the throughput chart.
const throughputXLabel = "second of each phase's measured window (each phase from 0)"

// xScale is how lineChart lays out its x axis.
type xScale int

const (
	xData xScale = iota // linear from the smallest x to the largest; ticks at the data's x
	xLog2               // log2 from the smallest x to the largest; ticks at the data's x
	xTime               // linear from 0 to the largest x; ticks at round numbers
)

// lineChart draws series as lines with points, on an x axis laid out by
// scale.
func lineChart(id, title, xlab, ylab string, ss []series, scale xScale) svgChart {
	c := newChart(id, title, ss)
	c.XLabel, c.YLabel, c.YAxis, c.TickSize = xlab, ylab, true, 11
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
	if scale == xTime {
		xmin = 0
	}
	ymax = niceMax(ymax)
	fx := func(x float64) float64 { return x }
	if scale == xLog2 && xmin > 0 {
		fx = math.Log2
	}
	lo, hi := fx(xmin), fx(xmax)
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	X := func(x float64) px { return px(marginL + (fx(x)-lo)/(hi-lo)*plotW) }
	Y := func(y float64) px { return px(marginT + plotH - y/ymax*plotH) }
	for i := 0; i <= 5; i++ {
		v := ymax * float64(i) / 5
		c.Grid = append(c.Grid, svgGrid{Y: Y(v), TextY: Y(v) + 4, Label: fmtNum(v)})
	}
	ticks := map[float64]bool{}
	if scale == xTime { // 0 and every 1, 2, 5, 10, ... up to the end (at most ~20)
		step := max(1, niceMax(xmax/20))
		for x := 0.0; x <= xmax; x += step {
			ticks[x] = true
		}
	} else {
		for _, s := range ss { // x ticks at the data's x values (at most ~20)
			step := max(1, len(s.xs)/20)
			for i := 0; i < len(s.xs); i += step {
				ticks[s.xs[i]] = true
			}
		}
	}
	for _, x := range slices.Sorted(maps.Keys(ticks)) {
		c.XTicks = append(c.XTicks, svgText{X: X(x), Label: fmtNum(x)})
	}
	for si, s := range ss {
		l := svgLine{Color: color(si)}
		var pts []string
		for i := range s.xs {
			x, y := X(s.xs[i]), Y(s.ys[i])
			pts = append(pts, x.String()+","+y.String())
			l.Dots = append(l.Dots, svgDot{X: x, Y: y, Title: fmt.Sprintf("%s: %s = %s, %s", s.name, xlab, fmtNum(s.xs[i]), fmtNum(s.ys[i]))})
		}
		l.Points = strings.Join(pts, " ")
		c.Lines = append(c.Lines, l)
	}
	return c
}

// barChart draws grouped bars on a log10 y axis: one group per label,
// one bar per series.
func barChart(id, title string, groups []string, ss []series) svgChart {
	c := newChart(id, title, ss)
	c.TickSize = 12
	ymax := 1.0
	for _, s := range ss {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	top := max(1, math.Ceil(math.Log10(ymax)))
	Y := func(y float64) px {
		l := 0.0
		if y > 1 {
			l = math.Log10(y)
		}
		return px(marginT + plotH - l/top*plotH)
	}
	for p := 0.0; p <= top; p++ {
		v := math.Pow(10, p)
		c.Grid = append(c.Grid, svgGrid{Y: Y(v), TextY: Y(v) + 4, Label: fmtNum(v)})
	}
	gw := float64(plotW) / float64(len(groups))
	bw := gw * 0.8 / float64(max(len(ss), 1))
	for si, s := range ss {
		for gi, y := range s.ys {
			c.Bars = append(c.Bars, svgBar{
				X: px(marginL + gw*float64(gi) + gw*0.1 + bw*float64(si)), Y: Y(y),
				W: px(bw * 0.9), H: frame.Bottom - Y(y), Color: color(si),
				Title: fmt.Sprintf("%s %s: %.0f µs", s.name, groups[gi], y),
			})
		}
	}
	for gi, g := range groups {
		c.XTicks = append(c.XTicks, svgText{X: px(marginL + gw*(float64(gi)+0.5)), Label: g})
	}
	return c
}
