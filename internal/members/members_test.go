package members

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		list     []string
		addrs    []string
		clusters [][]string
		bad      bool
	}{
		{name: "standalone", list: []string{"h:1", "h:2"}, addrs: []string{"h:1", "h:2"}},
		{name: "mixed", list: []string{"h:1", "cluster:c:1+c:2", "h:2", "cluster:d:1"},
			addrs: []string{"h:1", "h:2"}, clusters: [][]string{{"c:1", "c:2"}, {"d:1"}}},
		{name: "no seeds", list: []string{"cluster:"}, bad: true},
		{name: "empty seed", list: []string{"cluster:c:1++c:2"}, bad: true},
		{name: "trailing plus", list: []string{"h:1", "cluster:c:1+"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, clusters, err := Parse(tc.list)
			if tc.bad {
				if err == nil {
					t.Fatalf("Parse(%q) = %q, %v; want an error", tc.list, addrs, clusters)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var seeds [][]string
			for _, m := range clusters {
				seeds = append(seeds, m.Seeds)
			}
			if !slices.Equal(addrs, tc.addrs) || !slices.EqualFunc(seeds, tc.clusters, slices.Equal) {
				t.Errorf("Parse(%q) = %q, %q; want %q, %q", tc.list, addrs, seeds, tc.addrs, tc.clusters)
			}
			if got := Nodes(addrs, clusters); len(got) != len(tc.addrs)+len(slices.Concat(tc.clusters...)) {
				t.Errorf("Nodes = %q", got)
			}
			if HasCluster(tc.list) != (len(tc.clusters) > 0) {
				t.Errorf("HasCluster(%q) = %v", tc.list, HasCluster(tc.list))
			}
		})
	}
}
