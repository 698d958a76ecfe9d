package bench

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTableHeaders checks, in every layout of the comparison table, that
// each figure sits right-aligned under its own header (the client CPU
// under "cpu µs/cycle" in the wide one) and that the default layout of a
// run without waits fits 80 columns with its notes.
func TestTableHeaders(t *testing.T) {
	for _, tc := range []struct {
		name         string
		wide, waited bool
		wantHead     string
	}{
		{"default", false, false, "cyc p99"},
		{"default waited", false, true, "wait p99"},
		{"wide", true, false, "cpu µs/cycle"},
		{"wide waited", true, true, "cpu µs/cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := reportFixture(tc.waited)
			var b strings.Builder
			write := r.WriteTable
			if tc.wide {
				write = r.WriteWideTable
			}
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			cols := r.columns(tc.wide)
			lines := strings.Split(out, "\n")
			head := -1
			for i, l := range lines {
				if strings.HasPrefix(strings.TrimLeft(l, " "), "target  ") {
					head = i
					break
				}
			}
			if head < 0 {
				t.Fatalf("no header line:\n%s", out)
			}
			// The right edge (in runes) of each header in the header line.
			var edges []int
			rest, off := lines[head], 0
			for _, c := range cols {
				if c.Head == "" {
					t.Fatalf("column without a header in %s", tc.name)
				}
				i := strings.Index(rest, c.Head)
				if i < 0 {
					t.Fatalf("header line lacks %q: %q", c.Head, lines[head])
				}
				off += utf8.RuneCountInString(rest[:i+len(c.Head)])
				edges = append(edges, off)
				rest = rest[i+len(c.Head):]
			}
			if !strings.Contains(lines[head], tc.wantHead) {
				t.Errorf("header lacks %q: %q", tc.wantHead, lines[head])
			}
			for i, p := range r.phases() {
				row := lines[head+1+i]
				if utf8.RuneCountInString(row) > edges[len(edges)-1] {
					t.Errorf("row %q is wider than its header %q", row, lines[head])
				}
				for j, c := range cols {
					cell := c.cell(p)
					runes := []rune(row)
					start := edges[j] - utf8.RuneCountInString(cell)
					if start < 0 || edges[j] > len(runes) || string(runes[start:edges[j]]) != cell {
						t.Errorf("%s: %s = %q is not under its header %q:\n%s\n%s", p.Target, c.Head, cell, c.Head, lines[head], row)
					}
				}
			}
			if tc.wide {
				// The per-process figures close the row: the client's CPU
				// and syscalls, the masters', the proxy's ("-": not measured).
				want := fmt.Sprintf(" %.1f %.1f %.1f %.1f -", r.ClientCPUPerCycle, r.ClientSyscallsPerCycle, r.MasterCPUPerCycle, r.MasterSyscallsPerCycle)
				if row := strings.Join(strings.Fields(lines[head+1]), " "); !strings.HasSuffix(row, want) {
					t.Errorf("engine row does not end with its per-process figures %q: %q", want, row)
				}
			}
			// The legend says what failed and errors count.
			if legend := strings.Join(strings.Fields(out), " "); !strings.Contains(legend, "("+CountsNote+")") {
				t.Errorf("table lacks the failed/errors legend %q:\n%s", CountsNote, out)
			}
			if !tc.wide && !tc.waited {
				// The comparison table and its notes; the sweep table
				// after them has a 40-character bar chart.
				main, _, _ := strings.Cut(out, "\nsweep over")
				for _, l := range strings.Split(main, "\n") {
					if n := utf8.RuneCountInString(l); n > 80 {
						t.Errorf("default table line is %d columns wide: %q", n, l)
					}
				}
			}
		})
	}
}

// TestCeilingRowCPU: in the wide table the ceiling row carries the
// pumps' and the masters' CPU per pair under the client's and the
// masters' CPU columns.
func TestCeilingRowCPU(t *testing.T) {
	r := reportFixture(false)
	r.Ceiling = &CeilingInfo{CyclesPerSec: 55320, SlowestPerSec: 52230, Window: ceilingWindow, ClientCPUPerPair: 6.45, MasterCPUPerPair: 29.04}
	r.CeilingFraction = r.CyclesPerSec / r.Ceiling.CyclesPerSec
	var b strings.Builder
	if err := r.WriteWideTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var head, row string
	for _, l := range lines {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "target":
			head = l
		case len(f) > 0 && f[0] == "ceiling" && row == "":
			row = l
		}
	}
	if f := strings.Fields(row); len(f) != 5 || f[3] != "6.5" || f[4] != "29.0" {
		t.Fatalf("ceiling row %q: want its cycles, ratio, then 6.5 and 29.0", row)
	}
	// Each figure ends where its column's header ends (in runes: the
	// headers hold µ and ÷).
	runesTo := func(s string, i int) int { return utf8.RuneCountInString(s[:i]) }
	for _, c := range []struct{ head, val string }{{"cpu µs/cycle", "6.5"}, {"masters µs/cycle", "29.0"}} {
		h := runesTo(head, strings.Index(head, c.head)+len(c.head))
		v := runesTo(row, strings.Index(row, " "+c.val+" ")+1+len(c.val))
		if h != v {
			t.Errorf("%s ends at rune %d, its header %q at %d:\n%s\n%s", c.val, v, c.head, h, head, row)
		}
	}
}
