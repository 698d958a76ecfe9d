package lockcmds

import "testing"

func TestQuorumTTL(t *testing.T) {
	cases := []struct {
		name string
		vals []int64
		q    int
		want int64
		ok   bool
	}{
		{"too few", []int64{100, 200}, 3, 0, false},
		{"exact quorum", []int64{300, 100, 200}, 3, 100, true},
		{"all five", []int64{500, 100, 400, 200, 300}, 3, 300, true},
		{"four of five", []int64{50, 40, 30, 20}, 3, 30, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := quorumTTL(tc.vals, tc.q)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("got %d %v, want %d %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
