package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/redlock-dev/redlock/conn"
)

// Env describes where a run happened, for the report.
type Env struct {
	CPU          string   `json:"cpu"`
	NumCPU       int      `json:"num_cpu"`
	GOMAXPROCS   int      `json:"gomaxprocs"`
	GoVersion    string   `json:"go_version"`
	OS           string   `json:"os"`
	Arch         string   `json:"arch"`
	Hostname     string   `json:"hostname"`
	RedisVersion string   `json:"redis_version,omitempty"`
	LoadAvg      string   `json:"load_avg,omitempty"` // /proc/loadavg at the start
	Time         string   `json:"time"`
	Args         []string `json:"args,omitempty"`
}

func captureEnv(args []string) Env {
	e := Env{
		CPU: cpuModel(), NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Time: time.Now().UTC().Format(time.RFC3339), Args: args,
	}
	e.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			e.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return e
}

// cpuModel returns the CPU model name from /proc/cpuinfo, or the
// architecture when it cannot be read.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// redisVersion asks the master at addr for its version ("" if unknown).
func redisVersion(ctx context.Context, addr string, cfg Config) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := conn.Dial(ctx, addr, cfg.masterConn())
	if err != nil {
		return ""
	}
	defer c.Close()
	if v := c.Info().Version; v != "" {
		return v
	}
	r, err := c.Exec(ctx, "INFO", "server")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(r.Text(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}
