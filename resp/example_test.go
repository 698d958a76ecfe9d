package resp_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/redlock-dev/redlock/resp"
)

func ExampleAppendCommandStrings() {
	buf := resp.AppendCommandStrings(nil, "SET", "lock", "token", "NX", "PX", "30000")
	fmt.Printf("%q\n", buf)
	// Output:
	// "*6\r\n$3\r\nSET\r\n$4\r\nlock\r\n$5\r\ntoken\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n"
}

func ExampleReader_ReadReply() {
	stream := "+OK\r\n" +
		":42\r\n" +
		"$-1\r\n" +
		"-NOSCRIPT No matching script. Please use EVAL.\r\n" +
		"*2\r\n$5\r\nhello\r\n,3.5\r\n"
	r := resp.NewReader(strings.NewReader(stream))
	for {
		rep, err := r.ReadReply()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println("connection broken:", err)
			return
		}
		var serr *resp.Error
		if errors.As(rep.Err(), &serr) {
			fmt.Printf("server error %s: %s\n", serr.Prefix(), serr.Msg)
			continue
		}
		fmt.Printf("%s: %v\n", rep.Type, rep)
	}
	// Output:
	// simple-string: "OK"
	// integer: (integer) 42
	// null: (nil)
	// server error NOSCRIPT: NOSCRIPT No matching script. Please use EVAL.
	// array: ["hello" "3.5"]
}

func ExampleReply_HasErrorPrefix() {
	r := resp.NewReader(strings.NewReader("-NOSCRIPT No matching script.\r\n"))
	rep, _ := r.ReadReply()
	if rep.HasErrorPrefix("NOSCRIPT") {
		fmt.Println("script not cached: send EVAL")
	}
	// Output:
	// script not cached: send EVAL
}
