package engine

import (
	"strings"
	"testing"
	"time"
)

// Quarantined masters whose quarantine ends in different seconds (started
// within a second of each other) read as one cause, naming the latest
// end (TestReadmeExampleQuarantine failed when the masters' starts
// straddled a second).
func TestQuarantineOneCause(t *testing.T) {
	end := time.Now().Add(time.Minute).Truncate(time.Second)
	qe := &QuorumError{Op: "acquire", Total: 3, Quorum: 2, Answered: 3, Quarantined: 3, sentinel: ErrNotAcquired, unavailable: true}
	for i, d := range []time.Duration{0, time.Second, 0} {
		qe.Masters = append(qe.Masters, &MasterError{Master: i, Addr: "127.0.0.1:1" + string(rune('0'+i)), Err: &QuarantineError{Until: end.Add(d)}})
	}
	msg := qe.Error()
	if n := strings.Count(msg, "in restart quarantine until"); n != 1 {
		t.Fatalf("%d quarantine causes, want 1:\n%s", n, msg)
	}
	if !strings.Contains(msg, end.Add(time.Second).UTC().Format(time.RFC3339)) || !strings.Contains(msg, "master 0 (127.0.0.1:10), master 1 (127.0.0.1:11), master 2 (127.0.0.1:12)") {
		t.Fatalf("want the three masters and the latest end:\n%s", msg)
	}
}
