package lockcmds

import "github.com/redlock-dev/redlock/proxy/internal/respserver"

// The server room's connection and reply slot, as the lock commands name
// them: a handler gets the connection, and returns its reply's slot.
type (
	client = respserver.Conn
	call   = respserver.Call
)
