//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCommandLines: every `redlock SUB …` command line in README.md and
// docs/ (code spans and code blocks) uses only flags SUB has — the flags a
// user copies are the flags that exist, on the subcommand they are
// written for (TestFirstDeploymentChecklist checked one page, and only
// that a flag was some subcommand's).
func TestDocsCommandLines(t *testing.T) {
	subs := map[string]map[string]bool{}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, sub := range []string{"proxy", "lock", "inspect", "holder", "bench"} {
		var out bytes.Buffer
		run([]string{sub, "-h"}, &out, &out)
		subs[sub] = map[string]bool{"help": true, "h": true}
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			subs[sub][m[1]] = true
		}
		if len(subs[sub]) < 4 {
			t.Fatalf("redlock %s -h: no flags read:\n%s", sub, out.String())
		}
	}
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	// A subcommand followed by a space (not redlock lock-guard); its flags,
	// -n as --ttl.
	line := regexp.MustCompile(`(?:^|[\s(` + "`" + `$])(?:go run \./cmd/redlock|redlock) (proxy|lock|inspect|holder|bench)(\s[^` + "`" + `\n]*|$|` + "`" + `)`)
	flag := regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)
	seen := 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range line.FindAllStringSubmatch(string(doc), -1) {
			args := m[2]
			if i := strings.Index(args, " -- "); i >= 0 {
				args = args[:i] // the command redlock lock runs
			}
			for _, fm := range flag.FindAllStringSubmatch(args, -1) {
				seen++
				if !subs[m[1]][fm[1]] {
					t.Errorf("%s: `redlock %s%s`: --%s is not a flag of redlock %s", filepath.Base(f), m[1], strings.TrimRight(m[2], " "), fm[1], m[1])
				}
			}
		}
	}
	t.Logf("%d flags in command lines", seen)
	if seen < 50 {
		t.Fatalf("only %d flags found in the docs' command lines: the pattern or the docs changed", seen)
	}
}
