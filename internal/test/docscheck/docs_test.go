// Package docscheck holds tests that keep the documentation consistent
// with itself: the headline figures of README.md must be figures that
// docs/benchmarks.md states, so that one cannot move without the other.
package docscheck

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// A figure is digits with separators, optionally a range ("62–63k").
const figure = `\d[\d.,]*(?:–\d[\d.,]*)?`

// headline is one kind of figure README.md states, and the word that must
// share a line with the same figure in docs/benchmarks.md.
type headline struct {
	name string
	re   *regexp.Regexp // submatch 1 is the figure
	word string
}

var headlines = []headline{
	{"throughput", regexp.MustCompile(`(` + figure + `k?)\s+(?:acquire\+release\s+)?cycles/s`), "cycles/s"},
	{"ratio to redsync", regexp.MustCompile(`(` + figure + `×)\s+(?:a\s+|the\s+)?(?:conventional\s+client\s+)?\(?(?:go-redsync/)?redsync`), "redsync"},
	{"fraction of the ceiling", regexp.MustCompile(`(\d\.\d+)\s+of\s+the\s+masters'\s+(?:own\s+)?ceiling`), "ceiling"},
}

// check returns one error per headline figure of readme that bench does
// not state on a line with its word, and one per kind of headline readme
// does not state at all (the README's claims must not vanish unnoticed
// either: change the patterns above when the README's wording changes).
func check(readme, bench string) []error {
	var errs []error
	lines := strings.Split(bench, "\n")
	for _, h := range headlines {
		ms := h.re.FindAllStringSubmatch(readme, -1)
		if len(ms) == 0 {
			errs = append(errs, fmt.Errorf("README states no %s figure (pattern %s)", h.name, h.re))
			continue
		}
		for _, m := range ms {
			if !stated(lines, m[1], h.word) {
				errs = append(errs, fmt.Errorf("README's %s figure %q is not on a docs/benchmarks.md line with %q", h.name, m[1], h.word))
			}
		}
	}
	return errs
}

// stated reports whether some line holds fig as a whole figure (not part
// of a longer number) and word.
func stated(lines []string, fig, word string) bool {
	for _, l := range lines {
		if !strings.Contains(l, word) {
			continue
		}
		for rest := l; ; {
			i := strings.Index(rest, fig)
			if i < 0 {
				break
			}
			before, _ := utf8.DecodeLastRuneInString(rest[:i])
			after, _ := utf8.DecodeRuneInString(rest[i+len(fig):])
			if !partOfNumber(before) && !partOfNumber(after) {
				return true
			}
			rest = rest[i+len(fig):]
		}
	}
	return false
}

func partOfNumber(r rune) bool {
	return unicode.IsDigit(r) || r == '.' || r == ',' || r == '–'
}

func TestReadmeFiguresInBenchmarks(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	bench, err := os.ReadFile("../../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range check(string(readme), string(bench)) {
		t.Error(err)
	}
}

// TestCheckCatchesDrift: the check itself reports a README figure that
// benchmarks.md does not state, a figure only found inside a longer
// number, and a README that lost a headline.
func TestCheckCatchesDrift(t *testing.T) {
	const bench = "| throughput | **62–63k cycles/s**, 0.60 of the masters' ceiling |\n| vs redsync | **7.3–8.6×** redsync's cycles/s |\n"
	const good = "it does 62–63k acquire+release cycles/s, 0.60 of the masters' own ceiling; it did 7.3–8.6× redsync's cycles."
	for _, tc := range []struct {
		name, readme string
		errs         int
	}{
		{"consistent", good, 0},
		{"old throughput", strings.Replace(good, "62–63k", "40k", 1), 1},
		{"old ratio", strings.Replace(good, "7.3–8.6×", "7–8×", 1), 1},
		{"part of a longer figure", strings.Replace(good, "7.3–8.6×", "3–8.6×", 1), 1},
		{"other ceiling", strings.Replace(good, "0.60", "0.66", 1), 1},
		{"headline gone", "a fast lock engine.", len(headlines)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := check(tc.readme, bench)
			if len(errs) != tc.errs {
				t.Errorf("check found %d problems, want %d: %v", len(errs), tc.errs, errs)
			}
		})
	}
}
