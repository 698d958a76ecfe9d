package respserver

import "time"

// Limits that apply before a client has authenticated (when RequirePass
// is set): Redis's own for unauthenticated clients.
const (
	unauthMaxArgs    = 10
	unauthMaxBulkLen = 16 << 10
)

// freeClientBytes is what each connection may hold (request and reply
// bytes) without drawing on Config.MaxClientMemory, so that ordinary small
// commands are never refused because large ones used up the budget.
const freeClientBytes = 16 << 10

// writeTimeout is Config.WriteTimeout's default: a client that does not
// read for this long (up to WriteSlack longer) is closed.
const writeTimeout = 10 * time.Second

// WriteSlack is how long a write deadline is reused before it is pushed
// back (client.armWrite): a reply's write then costs no timer update.
const WriteSlack = time.Second
