//go:build unix

package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// placeholder is what a flag's argument name may look like in help: one
// word such as file, host:port,... or var=v1,v2,... .
var placeholder = regexp.MustCompile(`^[a-z][a-z0-9:,.=/_-]*$`)

// TestHelpFitsAndNamesArguments runs the top-level usage and every
// command's -h: every line fits 80 columns (a tab counts to the next
// multiple of 8), no back quote is left over, and every flag's argument
// name as rendered ("  -name arg") is one word that looks like a
// placeholder (not the "value" of a flag that names none).
func TestHelpFitsAndNamesArguments(t *testing.T) {
	for _, args := range [][]string{nil, {"-h"}, {"bench", "-h"}, {"proxy", "-h"}, {"lock", "-h"}, {"inspect", "-h"}} {
		t.Run(strings.Join(append([]string{"redlock"}, args...), " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if (code != 0 && len(args) > 0) || out == "" {
				t.Fatalf("exit %d, output %q", code, out)
			}
			for _, l := range strings.Split(out, "\n") {
				if n := columns(l); n > 80 {
					t.Errorf("%d columns: %q", n, l)
				}
			}
			if strings.Contains(out, "`") {
				t.Errorf("a back quote is left in the help:\n%s", out)
			}
			if len(args) < 2 {
				return
			}
			_, flags, ok := strings.Cut(out, "\nFlags:\n")
			if !ok {
				t.Fatalf("no Flags section:\n%s", out)
			}
			n := 0
			for _, l := range strings.Split(flags, "\n") {
				if !strings.HasPrefix(l, "  -") {
					continue
				}
				n++
				f := strings.Fields(l)
				switch {
				case len(f) > 2:
					t.Errorf("%s: argument name %q has spaces", f[0], strings.Join(f[1:], " "))
				case len(f) == 2 && (!placeholder.MatchString(f[1]) || f[1] == "value"):
					t.Errorf("%s: argument name %q is not a placeholder", f[0], f[1])
				}
			}
			if n < 5 {
				t.Errorf("%d flags in the help:\n%s", n, out)
			}
		})
	}
}

// columns is the width of line l on a terminal with tab stops every 8.
func columns(l string) int {
	n := 0
	for _, r := range l {
		if r == '\t' {
			n += 8 - n%8
			continue
		}
		n++
	}
	return n
}

// TestWrapWords: help's usage lines break at spaces within the width; a
// longer word stays whole.
func TestWrapWords(t *testing.T) {
	for _, tt := range []struct {
		in    string
		width int
		want  []string
	}{
		{"", 10, nil},
		{"a bb ccc dddd", 6, []string{"a bb", "ccc", "dddd"}},
		{"a  bb\tccc", 80, []string{"a bb ccc"}},
		{"see http://example.com/a/very/long/path ok", 10, []string{"see", "http://example.com/a/very/long/path", "ok"}},
		{"µµµ µµ", 6, []string{"µµµ µµ"}},
	} {
		got := wrapWords(tt.in, tt.width)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("wrapWords(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
		}
	}
}
