//go:build unix

package main

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/redlock-dev/redlock/engine"
)

// TestFirstDeploymentChecklist reads docs/first-deployment.md, the
// checklist a user follows as written: every flag it names in code is a
// flag of a redlock subcommand (`redlock X -h`), every Config.Field an
// engine.Config field, every redlock_* series one the metrics package
// exports. No test read the page before (found by the docs-as-tested
// review of issue #46).
func TestFirstDeploymentChecklist(t *testing.T) {
	doc, err := os.ReadFile("../../docs/first-deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for _, sub := range []string{"proxy", "lock", "inspect", "holder", "bench"} {
		var out, errb bytes.Buffer
		run([]string{sub, "-h"}, &out, &errb)
		for _, m := range flagLine.FindAllStringSubmatch(out.String()+errb.String(), -1) {
			flags[m[1]] = true
		}
	}
	if !flags["max-ttl"] || !flags["match"] {
		t.Fatalf("subcommands' flags not read: %v", flags)
	}
	redisServer := map[string]bool{"save": true, "appendonly": true} // the masters' own
	span := regexp.MustCompile("`([^`]+)`")
	flag := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	field := regexp.MustCompile(`Config\.([A-Z][A-Za-z]*)`)
	series := regexp.MustCompile(`\bredlock_([a-z_]+)`)
	cfg := reflect.TypeOf(engine.Config{})
	metricsSrc, err := os.ReadFile("../../metrics/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, s := range span.FindAllStringSubmatch(string(doc), -1) {
		for _, m := range flag.FindAllStringSubmatch(s[1], -1) {
			seen++
			if !flags[m[1]] && !redisServer[m[1]] {
				t.Errorf("docs/first-deployment.md: --%s (in `%s`) is no redlock subcommand's flag", m[1], s[1])
			}
		}
		for _, m := range field.FindAllStringSubmatch(s[1], -1) {
			if _, ok := cfg.FieldByName(m[1]); !ok {
				t.Errorf("docs/first-deployment.md: Config.%s is no engine.Config field", m[1])
			}
		}
		for _, m := range series.FindAllStringSubmatch(s[1], -1) {
			// Named as a CounterOpts' Name, or a Desc's Namespace+"_name".
			if !bytes.Contains(metricsSrc, []byte(`Name: "`+m[1]+`"`)) && !bytes.Contains(metricsSrc, []byte(`Namespace+"_`+m[1]+`"`)) {
				t.Errorf("docs/first-deployment.md: redlock_%s is no series of the metrics package", m[1])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d flags found in the page's code: the page or the pattern changed", seen)
	}
}
