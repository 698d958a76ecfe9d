package respserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

// framed is what a parse of a stream yields: its commands, and how it
// ended.
type framed struct {
	cmds [][]string
	end  string
}

func endOf(err error) string {
	var pe *resp.ProtocolError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("protocol: %s (limit %v)", pe.Reason, pe.Limit)
	case err == io.EOF:
		return "EOF"
	case err == io.ErrUnexpectedEOF:
		return "unexpected EOF"
	}
	return "other: " + err.Error()
}

func strs(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

// framingLimits are the limits both parses apply (small, so that the
// fuzzer reaches them).
func framingLimits(rd *resp.CommandReader, grow func(int) bool) {
	rd.MaxArgs, rd.MaxBulkLen, rd.MaxCommandLen, rd.MaxInlineLen = 8, 300, 500, 400
	rd.Grow = grow
}

// streamParse parses rd to its end: the goroutine path's reader.
func streamParse(rd *resp.CommandReader, charged *int) framed {
	var f framed
	for {
		cmd, err := rd.ReadCommand()
		*charged -= cmd.Size
		if err != nil {
			f.end = endOf(err)
			return f
		}
		f.cmds = append(f.cmds, strs(cmd.Args))
	}
}

// loopParse parses stream as an event loop does (Framer.Parse on its
// scratch buffer of size bytes, a command whose end had not arrived
// checked by its FrameScan first), the stream arriving in reads of the
// sizes rng draws; a command larger than the scratch buffer moves to a
// streaming reader, as the loop moves its connection to the goroutine
// path. charged is what the reader's Grow holds.
func loopParse(stream []byte, size int, rng *rand.Rand, charged *int) framed {
	var out framed
	grow := func(n int) bool { *charged += n; return true }
	fr := NewFramer()
	framingLimits(fr.rd, grow)
	scratch := make([]byte, size)
	var in []byte
	var st FrameScan
	pos := 0
	for {
		data := append(scratch[:0], in...)
		n := min(1+rng.IntN(size), size-len(data), len(stream)-pos)
		data = append(data, stream[pos:pos+n]...)
		pos += n
		rest, sz, more, err := fr.Parse(data, len(in) > 0, &st, func(cmd resp.Command, _ int) bool {
			*charged -= cmd.Size
			out.cmds = append(out.cmds, strs(cmd.Args))
			return true
		})
		*charged -= sz
		if err != nil {
			out.end = endOf(err)
			return out
		}
		if !more {
			panic("each stopped without being told to")
		}
		part := data[rest:]
		if len(part) == size {
			rd := resp.NewCommandReader(io.MultiReader(bytes.NewReader(slices.Clone(part)), bytes.NewReader(stream[pos:])), ReadBufferSize)
			framingLimits(rd, grow)
			f := streamParse(rd, charged)
			out.cmds, out.end = append(out.cmds, f.cmds...), f.end
			return out
		}
		in = append(in[:0], part...)
		if n == 0 && pos == len(stream) { // the read that sees the end
			if len(in) == 0 {
				out.end = endOf(io.EOF)
			} else {
				out.end = endOf(io.ErrUnexpectedEOF)
			}
			return out
		}
	}
}

// FuzzLoopFraming checks the event loop's parsing against the goroutine
// path's: whatever the bytes and however they are split into reads, the
// loop yields the same commands and ends the same way (the same protocol
// error, or the end of the stream), and every byte its reader charged is
// given back or carried by a command.
func FuzzLoopFraming(f *testing.F) {
	for _, s := range []string{
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
		"*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$5\r\ntoken\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\nPING\r\n",
		"PING\r\nECHO \"a b\" 'c'\r\n\r\n*0\r\n*-1\r\nQUIT\n",
		"*2\r\n$4\r\nECHO\r\n$200\r\n" + string(bytes.Repeat([]byte("x"), 200)) + "\r\n",
		"*9\r\n", "*1\r\n$301\r\n", "*1\r\n$-5\r\n", "*1\r\n$3\r\nabcXY", "$3\r\nabc\r\n",
		"*1\r\n$2\r\nab", string(bytes.Repeat([]byte("a"), 500)) + "\n",
		"*99999999999999999999999\r\n", "\"unbalanced\r\n",
	} {
		f.Add([]byte(s), uint64(1), uint8(40))
	}
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64, size uint8) {
		var refCharged, loopCharged int
		ref := resp.NewCommandReader(bytes.NewReader(stream), ReadBufferSize)
		framingLimits(ref, func(n int) bool { refCharged += n; return true })
		want := streamParse(ref, &refCharged)
		got := loopParse(stream, 16+int(size), rand.New(rand.NewPCG(seed, 7)), &loopCharged)
		if !slices.EqualFunc(got.cmds, want.cmds, slices.Equal) || got.end != want.end {
			t.Fatalf("stream %q, scratch %d:\nloop:      %q, %s\ngoroutine: %q, %s", stream, 16+int(size), got.cmds, got.end, want.cmds, want.end)
		}
		if loopCharged != 0 || refCharged != 0 {
			t.Fatalf("stream %q: %d bytes left charged by the loop's parse (goroutine path: %d)", stream, loopCharged, refCharged)
		}
	})
}

// TestFrameScanTrickle: a command of 1000 arguments arriving 7 bytes per
// read is parsed once, when its end arrived — not again from its start
// for every read (a parse per read costs O(length²): a client trickling
// 16 KiB commands slowed every other client of its loop). Without the
// frame scan, the reader runs for every one of the ~1000 reads.
func TestFrameScanTrickle(t *testing.T) {
	cmd := []byte("*1000\r\n")
	for range 1000 {
		cmd = append(cmd, "$1\r\nx\r\n"...)
	}
	parses := 0
	fr := NewFramer()
	framingLimits(fr.rd, func(int) bool { parses++; return true })
	fr.rd.MaxArgs, fr.rd.MaxCommandLen = 1000, 1<<20
	var st FrameScan
	var in []byte
	got := 0
	for i := 0; i < len(cmd); i += 7 {
		data := append(slices.Clone(in), cmd[i:min(i+7, len(cmd))]...)
		rest, _, more, err := fr.Parse(data, len(in) > 0, &st, func(c resp.Command, _ int) bool {
			got = len(c.Args)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if more {
			in = data[rest:]
		} else {
			in = nil
		}
	}
	if got != 1000 || len(in) != 0 {
		t.Fatalf("parsed a command of %d arguments, %d bytes left", got, len(in))
	}
	// The reader's Grow runs a few times per parse (the buffer doubles):
	// one parse of the whole command asks it about a dozen times.
	if parses > 40 {
		t.Fatalf("the reader grew its buffer %d times: the command was parsed again for many reads", parses)
	}
	t.Logf("%d reads, %d Grow calls", (len(cmd)+6)/7, parses)
}
