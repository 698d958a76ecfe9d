// Package check holds the test assertions several packages share: waiting
// for a condition, and checking that goroutines end.
package check

import (
	"bufio"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Eventually polls cond every millisecond until it holds, and fails t when
// timeout passes first, naming what it waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// NoLeak fails t unless the goroutine count drops to at most before+slack
// within 5 s (goroutines that were ending when the test returned get that
// long). before is runtime.NumGoroutine() taken before the code under
// test started; slack allows for goroutines the test does not own (a
// pool's idle workers, a library's background reader). The failure shows
// every goroutine's stack.
func NoLeak(t testing.TB, before, slack int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	now := runtime.NumGoroutine()
	for now > before+slack && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		now = runtime.NumGoroutine()
	}
	if now > before+slack {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after (slack %d)\n%s", before, now, slack, buf[:runtime.Stack(buf, true)])
	}
}

// Scrape GETs a Prometheus text exposition at url and returns every
// sample, keyed by name{labels} as printed (labels in the exposition's
// order). It fails t on a non-200 answer or a line that is not a sample.
func Scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("%s: not a sample line: %q", url, line)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// CommandCalls sums the calls of the named commands (lower case: "set",
// "evalsha") in the text of a master's INFO commandstats.
func CommandCalls(info string, cmds ...string) int {
	n := 0
	for _, c := range cmds {
		if _, rest, ok := strings.Cut(info, "cmdstat_"+c+":calls="); ok {
			k, _ := strconv.Atoi(rest[:max(strings.IndexByte(rest, ','), 0)])
			n += k
		}
	}
	return n
}
