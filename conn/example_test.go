package conn_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/localmaster"
	"github.com/redlock-dev/redlock/resp"
)

// replyPrinter is a Callback; real callers use a pooled struct and must not
// block in Complete.
type replyPrinter chan string

func (p replyPrinter) Complete(tag uint64, r resp.Reply, err error) {
	if err != nil {
		p <- fmt.Sprintf("request %d: %v", tag, err)
		return
	}
	p <- fmt.Sprintf("request %d: %s", tag, r.Text())
}

func Example() {
	// A throwaway local master (redis-server, or an in-process stand-in).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	masters, err := localmaster.Start(ctx, localmaster.Options{N: 1, Notice: io.Discard})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer masters.Close()

	c, err := conn.Dial(ctx, masters.Addrs()[0], conn.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// Exec: one command, wait for its reply.
	if _, err := c.Exec(ctx, "SET", "greeting", "hello"); err != nil {
		fmt.Println(err)
		return
	}

	// Do: the hot path. Commands from concurrent callers share writes; the
	// callback runs on the Conn's reader goroutine, in FIFO order.
	out := make(replyPrinter, 2)
	c.Do(conn.Request{Cmd: resp.AppendCommandStrings(nil, "GET", "greeting"), Callback: out, Tag: 1})
	c.Do(conn.Request{
		Cmd:      resp.AppendCommandStrings(nil, "INCR", "visits"),
		Deadline: time.Now().Add(time.Second), // fails with ErrTimeout if no reply by then
		Callback: out,
		Tag:      2,
	})
	fmt.Println(<-out)
	fmt.Println(<-out)
	// Output:
	// request 1: hello
	// request 2: 1
}
