package bench

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	rpprof "runtime/pprof"
	"slices"
	"time"

	"github.com/google/pprof/profile"

	"github.com/redlock-dev/redlock/internal/pprofsrv"
)

// topN is the number of functions listed by [TopFunctions] in results.
const topN = 10

// FuncStat is one function's share of a CPU profile.
type FuncStat struct {
	Name    string  `json:"name"`
	Flat    float64 `json:"flat_s"` // seconds on CPU in the function itself
	FlatPct float64 `json:"flat_pct"`
	Cum     float64 `json:"cum_s"` // seconds on CPU in it or its callees
	CumPct  float64 `json:"cum_pct"`
}

// Top is a profile's hottest functions by flat and by cumulative time.
type Top struct {
	Total float64    `json:"total_s"`
	Flat  []FuncStat `json:"flat"`
	Cum   []FuncStat `json:"cum"`
}

// TopFunctions reads a CPU profile written by runtime/pprof and returns
// its n hottest functions by flat and by cumulative time, like
// `go tool pprof -top`: flat sums each sample's value on the function of
// the innermost frame; cum counts every function of a sample's stack
// once (recursion does not count twice). Inlined functions count as
// themselves.
func TopFunctions(path string, n int) (*Top, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("bench: parse profile %s: %w", path, err)
	}
	return topOf(p, n)
}

func topOf(p *profile.Profile, n int) (*Top, error) {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	if vi < 0 {
		vi = len(p.SampleType) - 1
	}
	if vi < 0 {
		return nil, errors.New("bench: profile has no sample types")
	}
	scale := 1.0
	if p.SampleType[vi].Unit == "nanoseconds" {
		scale = 1e-9
	}
	flat := map[string]int64{}
	cum := map[string]int64{}
	var total int64
	seen := map[string]bool{}
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		clear(seen)
		for li, loc := range s.Location {
			for j, line := range loc.Line { // Line[0] is the innermost (inlined) frame
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if li == 0 && j == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	t := &Top{Total: float64(total) * scale}
	list := func(m map[string]int64) []FuncStat {
		out := make([]FuncStat, 0, len(m))
		for name := range m {
			out = append(out, FuncStat{Name: name})
			out[len(out)-1].Flat = float64(flat[name]) * scale
			out[len(out)-1].Cum = float64(cum[name]) * scale
			if total > 0 {
				out[len(out)-1].FlatPct = 100 * float64(flat[name]) / float64(total)
				out[len(out)-1].CumPct = 100 * float64(cum[name]) / float64(total)
			}
		}
		return out
	}
	t.Flat = list(flat)
	slices.SortFunc(t.Flat, func(a, b FuncStat) int { return cmp.Or(cmp.Compare(b.Flat, a.Flat), cmp.Compare(a.Name, b.Name)) })
	t.Cum = list(cum)
	slices.SortFunc(t.Cum, func(a, b FuncStat) int { return cmp.Or(cmp.Compare(b.Cum, a.Cum), cmp.Compare(a.Name, b.Name)) })
	t.Flat = t.Flat[:min(n, len(t.Flat))]
	t.Cum = t.Cum[:min(n, len(t.Cum))]
	return t, nil
}

// profiler owns the profiles and the pprof server of one Run.
type profiler struct {
	cfg   Config
	cpu   *cpuProfile // nil without Config.CPUProfile
	pprof *pprofsrv.Server
}

// cpuProfile is the CPU profile of the target's measured windows only:
// runtime/pprof profiles the process from resume to pause, once per
// window (every round, every sweep point), and finish merges the parts
// into one file. Warm-ups, peers, the ceiling and start-up are left out,
// so the top functions are the target's. Only Run's goroutine calls it
// (runPhase, then profiler.stop): no lock.
type cpuProfile struct {
	f      *os.File // created by startProfiles: a bad path fails before the run
	notice io.Writer
	buf    bytes.Buffer // the running part
	on     bool
	parts  []*profile.Profile
	err    error // of a part that could not be read back, for finish
}

// resume starts profiling a measured window of the target (c may be nil:
// no profile asked for). If another CPU profile is running (a request to
// --pprof-addr's /debug/pprof/profile), the window is left out, with a
// notice.
func (c *cpuProfile) resume() {
	if c == nil || c.on {
		return
	}
	c.buf.Reset()
	if err := rpprof.StartCPUProfile(&c.buf); err != nil {
		fmt.Fprintf(c.notice, "bench: cpu profile: a measured window is left out: %v\n", err)
		return
	}
	c.on = true
}

// pause ends the window's profile and keeps it for finish.
func (c *cpuProfile) pause() {
	if c == nil || !c.on {
		return
	}
	rpprof.StopCPUProfile()
	c.on = false
	p, err := profile.Parse(&c.buf)
	if err != nil {
		c.err = errors.Join(c.err, fmt.Errorf("bench: cpu profile: %w", err))
		return
	}
	c.parts = append(c.parts, p)
}

// finish writes the merged windows to the file and closes it. It reports
// false when no window was profiled (the run ended before its first): the
// empty file is then removed.
func (c *cpuProfile) finish() (bool, error) {
	c.pause()
	err := c.err
	if len(c.parts) == 0 {
		return false, errors.Join(err, c.f.Close(), os.Remove(c.f.Name()))
	}
	merged, merr := profile.Merge(c.parts)
	if merr == nil {
		merr = merged.Write(c.f)
	}
	if merr != nil {
		merr = fmt.Errorf("bench: cpu profile: %w", merr)
	}
	return true, errors.Join(err, merr, c.f.Close())
}

// startProfiles prepares the CPU profile (see cpuProfile), starts the
// pprof server, and turns on mutex and block sampling, as cfg asks.
func startProfiles(cfg Config) (*profiler, error) {
	p := &profiler{cfg: cfg}
	for _, f := range []string{cfg.CPUProfile, cfg.MemProfile, cfg.MutexProfile, cfg.BlockProfile} {
		if f != "" {
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				return nil, fmt.Errorf("bench: %w", err)
			}
		}
	}
	if cfg.ReportDir != "" {
		if err := os.MkdirAll(cfg.ReportDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	if cfg.PprofAddr != "" {
		srv, err := pprofsrv.Start(cfg.PprofAddr)
		if err != nil {
			return nil, fmt.Errorf("bench: pprof server: %w", err)
		}
		p.pprof = srv
		fmt.Fprintf(cfg.Notice, "redlock: pprof at http://%s/debug/pprof/\n", srv.Addr())
	}
	if cfg.MutexProfile != "" {
		runtime.SetMutexProfileFraction(5)
	}
	if cfg.BlockProfile != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("bench: cpu profile: %w", err)
		}
		p.cpu = &cpuProfile{f: f, notice: cfg.Notice}
	}
	return p, nil
}

// stop writes the remaining profiles, stops the server, and reads back the
// CPU profile's top functions. It returns the files written (copied into
// the report directory when one is set).
func (p *profiler) stop() (files []string, top *Top, err error) {
	var errs []error
	if p.cpu != nil {
		written, err := p.cpu.finish()
		errs = append(errs, err)
		if written && err == nil {
			files = append(files, p.cfg.CPUProfile)
			t, terr := TopFunctions(p.cfg.CPUProfile, topN)
			errs = append(errs, terr)
			top = t
		}
	}
	write := func(path, name string) {
		if path == "" {
			return
		}
		f, err := os.Create(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("bench: %s profile: %w", name, err))
			return
		}
		if name == "heap" {
			runtime.GC()
		}
		errs = append(errs, rpprof.Lookup(name).WriteTo(f, 0), f.Close())
		files = append(files, path)
	}
	write(p.cfg.MemProfile, "heap")
	write(p.cfg.MutexProfile, "mutex")
	write(p.cfg.BlockProfile, "block")
	if p.cfg.MutexProfile != "" {
		runtime.SetMutexProfileFraction(0)
	}
	if p.cfg.BlockProfile != "" {
		runtime.SetBlockProfileRate(0)
	}
	if p.pprof != nil {
		p.pprof.Close()
	}
	if dir := p.cfg.ReportDir; dir != "" {
		for i, f := range files {
			dst := filepath.Join(dir, filepath.Base(f))
			if abs(f) == abs(dst) {
				continue
			}
			b, rerr := os.ReadFile(f)
			if rerr == nil {
				rerr = os.WriteFile(dst, b, 0o644)
			}
			errs = append(errs, rerr)
			files[i] = dst
		}
	}
	return files, top, errors.Join(errs...)
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
