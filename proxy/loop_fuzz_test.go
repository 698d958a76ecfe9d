package proxy

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

// loopParse parses stream as an event loop does (framer.each on its
// scratch buffer of size bytes), the stream arriving in reads of the
// sizes rng draws; a command larger than the scratch buffer moves to a
// streaming reader, as the loop moves its connection to the goroutine
// path. charged is what the reader's Grow holds.
func loopParse(stream []byte, size int, rng *rand.Rand, charged *int) framed {
	var out framed
	grow := func(n int) bool { *charged += n; return true }
	fr := newFramer()
	framingLimits(fr.rd, grow)
	scratch := make([]byte, size)
	var in []byte
	pos := 0
	for {
		data := append(scratch[:0], in...)
		n := min(1+rng.IntN(size), size-len(data), len(stream)-pos)
		data = append(data, stream[pos:pos+n]...)
		pos += n
		rest, sz, more, err := fr.each(data, func(cmd resp.Command, _ int) bool {
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
			rd := resp.NewCommandReader(io.MultiReader(bytes.NewReader(slices.Clone(part)), bytes.NewReader(stream[pos:])), readBufferSize)
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
		ref := resp.NewCommandReader(bytes.NewReader(stream), readBufferSize)
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
