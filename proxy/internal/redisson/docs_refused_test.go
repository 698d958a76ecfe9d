package redisson

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestProxyDocRefusedTexts: docs/proxy.md's sentence on the Redisson texts
// the proxy refuses says how many there are and quotes the refusal; both
// are read from the code (it said 54 texts and three lock kinds while the
// table held 41 and the refusal named four).
func TestProxyDocRefusedTexts(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile(`\s+`).ReplaceAllString(string(raw), " ")
	m := regexp.MustCompile("\\*\\*Refused\\*\\*: (\\d+) texts.*?`<class.method> … is not supported: <why>. … (use [^`…]*?) …`").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/proxy.md: the sentence on refused Redisson texts (**Refused**: N texts … `… use … …`) is gone")
	}
	if n, _ := strconv.Atoi(m[1]); n != len(Refused) {
		t.Errorf("docs/proxy.md says %d refused texts; redisson_refused.tsv has %d", n, len(Refused))
	}
	for _, what := range Refused {
		if msg := RefusedMsg(what); !strings.Contains(msg, m[2]) {
			t.Errorf("docs/proxy.md quotes %q; the refusal of %s is %q", m[2], what, msg)
		}
	}
}
