package respserver

import (
	"log/slog"
	"sync"
	"time"
)

// A log budget: what clients cause must not flood the log (any client,
// authenticated or not, can spend it).
const (
	LogWindow = 10 * time.Second
	LogBurst  = 20
)

// LogBudget lets at most LogBurst lines through per LogWindow; the first
// line of the next window says how many were left out. The zero value is
// ready to use.
type LogBudget struct {
	mu         sync.Mutex
	start      time.Time
	lines      int
	suppressed int
}

// Warn logs msg with attrs at warning level, unless the window's budget
// is spent.
func (b *LogBudget) Warn(log *slog.Logger, msg string, attrs []any) {
	b.mu.Lock()
	now := time.Now()
	if now.Sub(b.start) >= LogWindow {
		b.start, b.lines = now, 0
	}
	if b.lines >= LogBurst {
		b.suppressed++
		b.mu.Unlock()
		return
	}
	b.lines++
	if b.suppressed > 0 {
		attrs = append(attrs, "suppressed_before", b.suppressed)
		b.suppressed = 0
	}
	b.mu.Unlock()
	log.Warn(msg, attrs...)
}
