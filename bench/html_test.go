package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-dev/redlock/internal/test/mastertest"
)

// renderHTML returns the report page of r; a template error panics (the
// test fails).
func renderHTML(r Result) string {
	var b strings.Builder
	if err := writeHTML(&b, r); err != nil {
		panic(err)
	}
	return b.String()
}

func TestWriteReport(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := filepath.Join(t.TempDir(), "report")
	r, err := Run(t.Context(), Config{FreshMasters: true, Masters: set.Addrs(), Duration: 1100 * time.Millisecond, Concurrency: 8,
		Compare: []string{PeerRedsync}, Ceiling: true, ReportDir: dir, Args: []string{"redlock", "bench", "--report", dir}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "result.json", "cpu.pprof"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.CyclesPerSec != r.CyclesPerSec || len(back.TopFlat) == 0 {
		t.Fatalf("result.json: %v, cycles %v vs %v, top %d", err, back.CyclesPerSec, r.CyclesPerSec, len(back.TopFlat))
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	engineCycles := fmt.Sprintf(`<td id="engine-cycles">%.0f</td>`, r.CyclesPerSec)
	engineCPU := fmt.Sprintf(`<td id="engine-cpu">%.1f</td>`, r.ClientCPUPerCycle)
	// The per-process figures: the masters' CPU (INFO cpu) and the
	// client's syscalls measured; the masters' syscalls unknown (not
	// started by the bench), no proxy.
	if r.MasterCPUPerCycle <= 0 || r.ClientSyscallsPerCycle <= 0 {
		t.Errorf("masters' CPU %.1fµs, client syscalls %.2f per cycle", r.MasterCPUPerCycle, r.ClientSyscallsPerCycle)
	}
	for _, want := range []string{fmt.Sprintf(`<td id="engine-mcpu">%.1f</td>`, r.MasterCPUPerCycle), fmt.Sprintf(`<td id="engine-sys">%.1f</td>`, r.ClientSyscallsPerCycle),
		`<td id="engine-msys">-</td>`, `<td id="engine-pcpu">-</td>`} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %s", want)
		}
	}
	for _, want := range []string{engineCycles, engineCPU, `id="redsync-cycles"`, `id="ceiling-cycles"`, `id="throughput-chart"`,
		`id="latency-chart"`, `id="top-flat"`, `id="env"`, r.Env.GoVersion, "<polyline", `<a href="cpu.pprof">cpu.pprof</a>`} {
		if !strings.Contains(html, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	for _, ext := range []string{"src=\"http", "href=\"http", "<script", "<link"} {
		if strings.Contains(html, ext) {
			t.Errorf("index.html is not self-contained: has %q", ext)
		}
	}
	if r.Env.RedisVersion == "" || !strings.Contains(html, r.Env.RedisVersion) {
		t.Errorf("redis version %q missing", r.Env.RedisVersion)
	}
	renderInChromium(t, dir, []string{engineCycles, "Throughput over time", "Latency percentiles", "Environment"})
}

func TestWriteReportSweep(t *testing.T) {
	dir := t.TempDir()
	r := Result{Phase: Phase{Target: TargetEngine, CyclesPerSec: 1234}, Workload: WorkloadCycle,
		Sweep: &SweepResult{Var: SweepMasters, Points: []SweepPoint{
			{Value: 3, Phases: []Phase{{Target: TargetEngine, CyclesPerSec: 3000, CycleP99: 800}}},
			{Value: 5, Phases: []Phase{{Target: TargetEngine, CyclesPerSec: 2000, CycleP99: 1200}}},
		}}}
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, want := range []string{`id="sweep-throughput-chart"`, `id="sweep-p99-chart"`, "Sweep over masters", "<td>5</td><td class=\"l\">engine</td><td>2000</td>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("sweep report lacks %q", want)
		}
	}
	if strings.Contains(string(page), "<polyline") == false {
		t.Error("no sweep curve")
	}
}

// reportFixture returns a result with every part of the report: a peer,
// the ceiling, per-second series, rounds, a sweep, a profile and notes.
func reportFixture(waited bool) Result {
	ph := func(target string, cycles float64) Phase {
		return Phase{Target: target, CyclesPerSec: cycles, AttemptsPerSec: 23456, AcquireP50: 234, AcquireP99: 1234,
			Waited: waited, WaitP50: 345, WaitP99: 4567, CycleP50: 456, CycleP99: 2345,
			Acquired: 123456, FailedAcquires: 12, Errors: 3, Missed: 7, ClientCPUPerCycle: 23.45,
			ClientSyscallsPerCycle: 0.42, MasterCPUPerCycle: 38.5, MasterSyscallsPerCycle: 3.1,
			Acquire:           Latency{Count: 100, P50: 234, P90: 500, P99: 1234, P999: 2000, Max: 3000, Mean: 260.5},
			Release:           Latency{Count: 100, P50: 134, P90: 300, P99: 834, P999: 1000, Max: 2000, Mean: 160.5},
			Cycle:             Latency{Count: 100, P50: 456, P90: 900, P99: 2345, P999: 4000, Max: 5000, Mean: 470.5},
			PerSecond:         []uint64{12000, 12500, 12300},
			RoundCyclesPerSec: []float64{cycles * 0.98, cycles * 1.02},
		}
	}
	return Result{Phase: ph(TargetEngine, 12345), Peers: []Phase{ph(PeerRedsync, 2345)},
		Masters: 5, MastersUp: 5, Concurrency: 64, Keys: 1000, TTLMillis: 10000, HoldMillis: 0.5, Workload: WorkloadCycle,
		Ceiling: &CeilingInfo{CyclesPerSec: 34567, SlowestPerSec: 30000, Window: ceilingWindow}, CeilingFraction: 12345.0 / 34567,
		Sweep: &SweepResult{Var: SweepConcurrency, Points: []SweepPoint{
			{Value: 16, Phases: []Phase{ph(TargetEngine, 11000)}}, {Value: 64, Phases: []Phase{ph(TargetEngine, 12345)}}}},
		Env: Env{CPU: "Some CPU", NumCPU: 2, GOMAXPROCS: 2, GoVersion: "go1.99", OS: "linux", Arch: "amd64", RedisVersion: "7.2.4",
			Hostname: "bench-host", Time: "2026-01-01T00:00:00Z", Args: []string{"redlock", "bench", "--masters", "10.0.0.1:6379"}},
		Profiles: []string{"/tmp/report/cpu.pprof"},
		TopFlat:  []FuncStat{{Name: "runtime.futex", Flat: 1.5, FlatPct: 12.3, Cum: 2.5, CumPct: 20.1}},
		TopCum:   []FuncStat{{Name: "main.main", Flat: 0.1, FlatPct: 1, Cum: 5, CumPct: 50}},
	}
}

// TestReportPage checks the page holds the key figures, a well-formed
// comparison table, and shows hostile strings as text.
func TestReportPage(t *testing.T) {
	const evil = `<script>alert(1)</script>`
	for _, waited := range []bool{false, true} {
		t.Run(fmt.Sprintf("waited=%v", waited), func(t *testing.T) {
			r := reportFixture(waited)
			r.Peers[0].FirstError = "dial tcp " + evil + ":6379: connection refused"
			r.Peers = append(r.Peers, Phase{Target: `"><img src=x onerror=alert(1)>`})
			r.Env.Args = append(r.Env.Args, evil+":6380")
			r.Env.Hostname = `host"><b>x</b>`
			r.Sweep.Var = evil
			r.Profiles = append(r.Profiles, "/tmp/report/javascript:alert(1).pprof")
			r.TopFlat[0].Name = "main.(*T).f<" + evil
			page := renderHTML(r)

			for _, want := range []string{
				`<td id="engine-cycles">12345</td>`, `<td id="redsync-cycles">2345</td>`, `<td>5.26x</td>`,
				`<td id="engine-cpu">23.4</td>`, `<th>cpu µs/cycle</th>`, `<th>engine÷row</th>`,
				`<td id="ceiling-cycles">34567</td><td>0.36x</td>`, "slowest master 30000/s",
				"engine ÷ redsync per round: 5.26x 5.26x", "masters 5/5 up",
				`<td class="l">engine</td><td class="l">cycle</td><td>100</td><td>456</td><td>900</td><td>2345</td><td>4000</td><td>5000</td><td>470.5</td>`,
				`<td>64</td><td class="l">engine</td><td>12345</td>`, `id="throughput-chart"`, `id="latency-chart"`,
				`id="sweep-throughput-chart"`, `id="sweep-p99-chart"`, "<polyline", `<td class="l">go1.99</td>`,
				`<a href="cpu.pprof">cpu.pprof</a>`, `<td>1.50</td><td>12.3%</td>`,
				"redsync first error: dial tcp &lt;script&gt;alert(1)&lt;/script&gt;:6379",
				"10.0.0.1:6379 &lt;script&gt;alert(1)&lt;/script&gt;:6380",
				`<p class="note">failed counts acquisitions refused because the key was held: contention`,
			} {
				if !strings.Contains(page, want) {
					t.Errorf("page lacks %q", want)
				}
			}
			if waited {
				for _, want := range []string{`<th>hand-offs/s</th>`, `<td id="engine-wait-p99">4567</td>`} {
					if !strings.Contains(page, want) {
						t.Errorf("page lacks %q", want)
					}
				}
			}
			for _, bad := range []string{"<script", "<img", "<b>x", `href="javascript:`, "onerror=alert(1)>"} {
				if strings.Contains(page, bad) {
					t.Errorf("page has unescaped %q", bad)
				}
			}

			// Every comparison row has one cell per header; the ceiling
			// row spans the rest.
			table := page[strings.Index(page, `<table id="comparison">`):]
			table = table[:strings.Index(table, "</table>")]
			heads := 0
			for _, line := range strings.Split(table, "\n") {
				switch {
				case strings.HasPrefix(line, "<tr><th"):
					heads = strings.Count(line, "<th")
				case strings.HasPrefix(line, `<tr><td class="l">ceiling`):
					var span int
					fmt.Sscanf(line[strings.Index(line, `colspan="`)+len(`colspan="`):], "%d", &span)
					if got := strings.Count(line, "<td") - 1 + span; got != heads {
						t.Errorf("ceiling row spans %d columns, header has %d: %s", got, heads, line)
					}
				case strings.HasPrefix(line, "<tr><td"):
					if got := strings.Count(line, "<td"); got != heads {
						t.Errorf("row has %d cells, header %d: %s", got, heads, line)
					}
				}
			}
			if heads == 0 {
				t.Fatalf("no comparison header:\n%s", table)
			}
		})
	}
}

// renderInChromium screenshots dir/index.html in headless Chromium and
// checks the image is not blank and the DOM holds the wanted texts. It
// skips without chromium unless REDLOCK_REQUIRE_PEERS=1.
func renderInChromium(t *testing.T, dir string, wants []string) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("REDLOCK_REQUIRE_PEERS") == "1" {
			t.Fatal("chromium not found (REDLOCK_REQUIRE_PEERS=1): apt-get install chromium")
		}
		t.Skip("chromium not found; install it (apt-get install chromium) to render the report")
	}
	abs, err := filepath.Abs(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + abs
	shot := filepath.Join(t.TempDir(), "out.png")
	common := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"}
	chrome := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		args = append(append(append([]string{}, common...), "--user-data-dir="+t.TempDir()), args...)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.String())
		}
		return stdout.Bytes()
	}
	chrome("--screenshot="+shot, "--window-size=1280,2000", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	colors := map[uint32]bool{}
	nonWhite := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[(r>>8)<<16|(g>>8)<<8|b>>8] = true
			if r < 0xf000 || g < 0xf000 || b < 0xf000 {
				nonWhite++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy() / 4
	t.Logf("screenshot %s: %dx%d, %d colours, %.1f%% non-white", shot, bounds.Dx(), bounds.Dy(), len(colors), 100*float64(nonWhite)/float64(total))
	if len(colors) < 8 || nonWhite < total/50 {
		t.Fatalf("screenshot looks blank: %d colours, %d/%d non-white pixels", len(colors), nonWhite, total)
	}
	if keep := os.Getenv("REDLOCK_KEEP_SCREENSHOT"); keep != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(keep, b, 0o644)
	}
	dom := string(chrome("--dump-dom", url))
	for _, want := range wants {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
}

// TestThroughputChartPerPhase: the throughput chart puts each phase on its
// own time axis from 0 — the phases ran one after another, and second k of
// each is drawn at the same x — with round ticks from 0 to the longest
// phase's end.
func TestThroughputChartPerPhase(t *testing.T) {
	r := Result{Phase: Phase{Target: TargetEngine, PerSecond: []uint64{10, 20, 30}},
		Peers: []Phase{{Target: PeerRedsync, PerSecond: []uint64{5, 5, 5, 5, 5}}, {Target: PeerFencing}}}
	c := newReportPage(r).Throughput
	if c == nil {
		t.Fatal("no throughput chart")
	}
	if c.XLabel != throughputXLabel || !strings.Contains(c.XLabel, "each phase from 0") {
		t.Errorf("x axis title %q", c.XLabel)
	}
	// Second k of a phase is at Left + k/5 of the plot (the longest phase has 5).
	at := func(k float64) px { return px(float64(frame.Left) + k/5*plotW) }
	var ticks []string
	for i, tk := range c.XTicks {
		ticks = append(ticks, tk.Label)
		if tk.X != at(float64(i)) {
			t.Errorf("tick %s at x %v, want %v", tk.Label, tk.X, at(float64(i)))
		}
	}
	if got := strings.Join(ticks, " "); got != "0 1 2 3 4 5" {
		t.Errorf("x ticks %q, want 0 to 5", got)
	}
	if len(c.Lines) != 2 || len(c.Lines[0].Dots) != 3 || len(c.Lines[1].Dots) != 5 {
		t.Fatalf("lines %+v: want the engine's 3 seconds and redsync's 5 (fencing has none)", c.Lines)
	}
	for li, l := range c.Lines {
		for k, d := range l.Dots {
			if d.X != at(float64(k+1)) {
				t.Errorf("line %d second %d at x %v, want %v", li, k+1, d.X, at(float64(k+1)))
			}
		}
	}
	if want := "redsync: " + throughputXLabel + " = 1, 5"; c.Lines[1].Dots[0].Title != want {
		t.Errorf("dot title %q, want %q", c.Lines[1].Dots[0].Title, want)
	}

	// A long phase: ticks every 5 seconds, from 0.
	r = Result{Phase: Phase{Target: TargetEngine, PerSecond: make([]uint64, 60)}}
	ticks = nil
	for _, tk := range newReportPage(r).Throughput.XTicks {
		ticks = append(ticks, tk.Label)
	}
	if got := strings.Join(ticks, " "); got != "0 5 10 15 20 25 30 35 40 45 50 55 60" {
		t.Errorf("x ticks of a 60 s phase: %q", got)
	}
}
