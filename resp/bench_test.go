package resp_test

import (
	"strings"
	"testing"

	"github.com/redlock-dev/redlock/resp"
)

func benchmarkRead(b *testing.B, in string) {
	r := resp.NewReader(&cycleReader{data: []byte(in)})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadReply(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadReplyOK(b *testing.B) { benchmarkRead(b, "+OK\r\n") }

func BenchmarkReadReplyBulk(b *testing.B) {
	benchmarkRead(b, "$64\r\n"+strings.Repeat("v", 64)+"\r\n")
}

func BenchmarkReadReplyArray(b *testing.B) {
	in := string(resp.AppendCommandStrings(nil, "field1", "value1", "field2", "value2", "field3", "value3", "field4", "value4"))
	benchmarkRead(b, in)
}

func BenchmarkReadReplyArraySimple(b *testing.B) {
	in := "*8\r\n" + strings.Repeat("+element\r\n", 8)
	benchmarkRead(b, in)
}

func BenchmarkAppendCommand(b *testing.B) {
	args := [][]byte{[]byte("SET"), []byte("lock:resource"), []byte("0123456789abcdef"), []byte("NX"), []byte("PX"), []byte("30000")}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = resp.AppendCommand(buf[:0], args...)
	}
	b.SetBytes(int64(len(buf)))
}
