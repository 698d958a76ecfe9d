package bench

import (
	"context"
	"fmt"

	"github.com/redlock-dev/redlock/internal/localmaster"
)

// SweepResult holds one result per value of the swept variable.
type SweepResult struct {
	Var    string       `json:"var"`
	Points []SweepPoint `json:"points"`
}

// SweepPoint is the measurement at one value of the swept variable: the
// target first, then the peers.
type SweepPoint struct {
	Value   int          `json:"value"`
	Phases  []Phase      `json:"phases"`
	Ceiling *CeilingInfo `json:"ceiling,omitempty"`
}

// runSweep runs the benchmark once per sweep value. A concurrency sweep
// shares one set of local masters; a masters sweep starts cfg.N=value
// local masters per point. The returned Result is the last point's, with
// Sweep holding all of them.
func runSweep(ctx context.Context, cfg Config) (Result, error) {
	sw := &SweepResult{Var: cfg.SweepVar}
	embedded := false
	if (cfg.SweepVar == SweepConcurrency || cfg.SweepVar == SweepRate) && len(cfg.Masters) == 0 && cfg.Target == TargetEngine {
		set, err := localmaster.Start(ctx, localmaster.Options{N: cfg.N, Embedded: cfg.Embedded, RequireReal: cfg.RequireReal, Notice: cfg.Notice})
		if err != nil {
			return Result{}, fmt.Errorf("bench: start local masters: %w", err)
		}
		defer set.Close()
		cfg.Masters = set.Addrs()
		cfg.FreshMasters = true
		embedded = set.Embedded()
	}
	var last Result
	for _, v := range cfg.SweepValues {
		c := cfg
		switch cfg.SweepVar {
		case SweepConcurrency:
			c.Concurrency = v
		case SweepMasters:
			c.N = v
		case SweepRate:
			c.Rate = float64(v)
		}
		r, err := runOnce(ctx, c)
		if err != nil {
			return last, err
		}
		r.Embedded = r.Embedded || embedded
		sw.Points = append(sw.Points, SweepPoint{Value: v, Phases: r.phases(), Ceiling: r.Ceiling})
		last = r
		if ctx.Err() != nil {
			break
		}
	}
	last.Sweep = sw
	last.Interrupted = ctx.Err() != nil
	return last, nil
}
