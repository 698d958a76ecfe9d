package inspect

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Kind is one kind of anomaly of a lock key.
type Kind string

// The kinds of [Finding]; see the package documentation.
const (
	NoTTL    Kind = "no_ttl"   // exists on some master without a TTL: never expires
	Minority Kind = "minority" // held on at least one master, fewer than a quorum
	Mismatch Kind = "mismatch" // the masters holding it hold different values
)

// Report is the result of [Run].
type Report struct {
	// Masters has one entry per address given to Run, in that order.
	Masters []MasterReport `json:"masters"`
	// Quorum is N/2+1 for the N masters.
	Quorum int `json:"quorum"`
	// Match is the SCAN MATCH pattern used.
	Match string `json:"match"`
	// Keys counts the distinct keys looked up (on every master).
	Keys int `json:"keys"`
	// Excluded counts the distinct excluded keys met (the fencing counter,
	// [Options.Exclude]); they were not looked up.
	Excluded int `json:"excluded"`
	// Truncated is set when Run stopped at [Options.MaxKeys] with keys
	// left to look up.
	Truncated bool `json:"truncated"`
	// NotLocks lists, sorted, the keys holding a value other than a string
	// on some master: not locks, not classified. A key that is not valid
	// UTF-8 appears Go-quoted (strconv.Quote).
	NotLocks []string `json:"not_locks"`
	// Findings lists the anomalous keys, sorted by key; empty when every
	// key looked up is healthy.
	Findings []Finding `json:"findings"`
}

// MasterReport is what Run did on one master.
type MasterReport struct {
	Index int    `json:"index"`
	Addr  string `json:"addr"`
	// Scanned counts the keys SCAN returned (a key may be returned twice
	// while the master resizes its table).
	Scanned int `json:"scanned"`
	// Pages counts the SCAN calls answered.
	Pages int `json:"pages"`
	// Complete is set when the SCAN iteration reached its end. It is not
	// when the master failed or Run stopped at MaxKeys first.
	Complete bool `json:"complete"`
	// Error is why the master failed ("" if it did not): it could not be
	// reached, timed out, or refused a command or a key (an ACL user
	// without SCAN, GETRANGE or PTTL). Its answers after the failure, and
	// all its keys not yet scanned, are unknown.
	Error string `json:"error,omitempty"`
	// FullyRead is set when the master was read whole: its SCAN reached
	// its end, it answered every look-up, and Run did not stop at
	// MaxKeys. Only then does "no finding" speak for its keys.
	FullyRead bool `json:"fully_read"`
}

// Failed reports whether the master failed during Run.
func (m MasterReport) Failed() bool { return m.Error != "" }

// Complete reports whether every master was read whole
// ([MasterReport.FullyRead]): when it is not, an absence of findings
// says nothing about what was not read.
func (r *Report) Complete() bool {
	for _, m := range r.Masters {
		if !m.FullyRead {
			return false
		}
	}
	return true
}

// Incomplete says why r is not [Report.Complete] ("" when it is): the
// masters not read whole, those that failed alike together, and why; a
// stop at MaxKeys.
func (r *Report) Incomplete() string {
	var causes []string
	who := map[string][]string{}
	for _, m := range r.Masters {
		cause := ""
		switch {
		case m.Failed():
			cause = "failed: " + m.Error
		case !m.Complete && !r.Truncated:
			cause = "not scanned to the end"
		default:
			continue
		}
		if who[cause] == nil {
			causes = append(causes, cause)
		}
		who[cause] = append(who[cause], fmt.Sprintf("%d (%s)", m.Index, m.Addr))
	}
	var why []string
	for _, c := range causes {
		w := "master "
		if len(who[c]) > 1 {
			w = "masters "
		}
		why = append(why, w+strings.Join(who[c], ", ")+" "+c)
	}
	if r.Truncated {
		why = append(why, fmt.Sprintf("stopped after %d keys (MaxKeys)", r.Keys))
	}
	return strings.Join(why, "; ")
}

// Finding is one key with one or more anomalies.
type Finding struct {
	// Key is the key; if it is not valid UTF-8 (which JSON cannot carry),
	// Key is its Go-quoted form (strconv.Quote) and KeyQuoted is set.
	Key       string `json:"key"`
	KeyQuoted bool   `json:"key_quoted,omitempty"`
	// Kinds lists the key's anomalies, in the order NoTTL, Minority,
	// Mismatch.
	Kinds []Kind `json:"kinds"`
	// Held counts the masters holding the key.
	Held int `json:"held"`
	// Masters has the key's state on each master, in Report.Masters order.
	Masters []MasterState `json:"masters"`
}

// Has reports whether f has anomaly k.
func (f Finding) Has(k Kind) bool {
	for _, x := range f.Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// MasterState is one key's state on one master.
type MasterState struct {
	Master int `json:"master"`
	// Present is set when the master holds the key.
	Present bool `json:"present"`
	// Value is the key's value when Present, cut to [Options.MaxValueLen]
	// bytes; ValueLen is its full length. If the cut value is not valid
	// UTF-8, Value is its Go-quoted form (strconv.Quote) and Quoted is set.
	Value    string `json:"value,omitempty"`
	ValueLen int    `json:"value_len,omitempty"`
	Quoted   bool   `json:"quoted,omitempty"`
	// PTTL is the remaining time to live in milliseconds when Present (-1:
	// no TTL), -2 when the master does not hold the key, and 0 when the
	// state is unknown (Error).
	PTTL int64 `json:"pttl_ms"`
	// Error is why the state is unknown (the master failed, or answered
	// with an error), "" when known.
	Error string `json:"error,omitempty"`
}

// Healthy reports whether the inspection found nothing to worry about: no
// finding, no failed master and every key inspected.
func (r *Report) Healthy() bool {
	if len(r.Findings) > 0 || r.Truncated {
		return false
	}
	for _, m := range r.Masters {
		if m.Failed() {
			return false
		}
	}
	return true
}

// maxNotLocksText bounds the NotLocks keys WriteText names.
const maxNotLocksText = 10

// WriteText writes r as human-readable tables. Keys and values are
// printed Go-quoted so that control characters and binary tokens stay
// visible and cannot disturb a terminal.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)

	fmt.Fprintf(bw, "keys inspected: %d matching %q on %d masters (quorum %d)", r.Keys, r.Match, len(r.Masters), r.Quorum)
	if r.Excluded > 0 {
		fmt.Fprintf(bw, "; excluded: %d", r.Excluded)
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(tw, "MASTER\tADDR\tSCANNED\tPAGES\tSTATUS")
	for _, m := range r.Masters {
		status := "incomplete"
		switch {
		case m.Failed():
			status = "FAILED: " + m.Error
		case m.Complete:
			status = "complete"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\n", m.Index, m.Addr, m.Scanned, m.Pages, status)
	}
	tw.Flush()
	if r.Truncated {
		fmt.Fprintf(bw, "TRUNCATED: stopped after %d keys; later keys were not inspected\n", r.Keys)
	}
	if n := len(r.NotLocks); n > 0 {
		shown := r.NotLocks[:min(n, maxNotLocksText)]
		q := make([]string, len(shown))
		for i, k := range shown {
			q[i] = strconv.Quote(k)
		}
		more := ""
		if n > len(shown) {
			more = fmt.Sprintf(" and %d more", n-len(shown))
		}
		fmt.Fprintf(bw, "not strings (not locks, skipped): %s%s\n", strings.Join(q, " "), more)
	}

	if len(r.Findings) == 0 {
		if r.Complete() {
			fmt.Fprintln(bw, "\nno anomalies found")
		} else {
			fmt.Fprintln(bw, "\nINCOMPLETE: no anomalies among the keys read, but not every master was read whole (STATUS above)")
		}
		return bw.Flush()
	}
	fmt.Fprintf(bw, "\nkeys with anomalies: %d\n", len(r.Findings))
	for _, f := range r.Findings {
		kinds := make([]string, len(f.Kinds))
		for i, k := range f.Kinds {
			kinds[i] = string(k)
		}
		fmt.Fprintf(bw, "\n%s  %s  (held on %d/%d masters)\n", quote(f.Key, f.KeyQuoted), strings.Join(kinds, ","), f.Held, len(f.Masters))
		fmt.Fprintln(tw, "  MASTER\tPRESENT\tPTTL_MS\tVALUE")
		for _, s := range f.Masters {
			switch {
			case s.Error != "":
				fmt.Fprintf(tw, "  %d\t?\t?\t(%s)\n", s.Master, s.Error)
			case !s.Present:
				fmt.Fprintf(tw, "  %d\tno\t-\t\n", s.Master)
			default:
				v, raw := quote(s.Value, s.Quoted), s.Value
				if s.Quoted {
					raw, _ = strconv.Unquote(s.Value)
				}
				if s.ValueLen > len(raw) {
					v += fmt.Sprintf("... (%d bytes)", s.ValueLen)
				}
				fmt.Fprintf(tw, "  %d\tyes\t%d\t%s\n", s.Master, s.PTTL, v)
			}
		}
		tw.Flush()
	}
	return bw.Flush()
}

// jsonSafe returns s if it is valid UTF-8, else its Go-quoted form and true.
func jsonSafe(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, false
	}
	return strconv.Quote(s), true
}

// quote returns s Go-quoted for printing, unless it is quoted already.
func quote(s string, quoted bool) string {
	if quoted {
		return s
	}
	return strconv.Quote(s)
}
