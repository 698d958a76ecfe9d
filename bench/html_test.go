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

	"github.com/redlock-dev/redlock/internal/localmaster/mastertest"
)

func TestWriteReport(t *testing.T) {
	set := mastertest.Start(t, 3)
	dir := filepath.Join(t.TempDir(), "report")
	r, err := Run(t.Context(), Config{Masters: set.Addrs(), Duration: 1100 * time.Millisecond, Concurrency: 8,
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
	for _, want := range []string{engineCycles, `id="redsync-cycles"`, `id="ceiling-cycles"`, `id="throughput-chart"`,
		`id="latency-chart"`, `id="top-flat"`, `id="env"`, r.Env.GoVersion, "<polyline"} {
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
