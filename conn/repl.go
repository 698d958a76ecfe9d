package conn

// The replication check (Config.OnReplicationID): every write batch starts
// with INFO replication after the clock check's TIME, and the server's
// master_replid is compared with the previous reading of the same server.
// A server takes a new replication id each time it is promoted, and its
// master's while it is a replica: a change between two readings means it
// changed role at least once in between. It is reported before the
// batch's replies are delivered, as a clock jump is.

import (
	"bytes"

	"github.com/redlock-dev/redlock/resp"
)

// ReplicationChange is what the replication check found: the server's
// replication id changed From one reading To the next (it was promoted,
// demoted, or both, in between).
type ReplicationChange struct {
	Addr     string
	From, To string // master_replid before and now
	Role     string // the server's role now: "master" or "slave"
	// Refused, when set, is the server's error reply to the handshake's
	// INFO replication (an ACL without +info): this session takes no
	// readings, and changes on it go unseen. From and To are then empty.
	Refused error
}

var replInfoCmd = resp.AppendCommandStrings(nil, "INFO", "replication")

// replWatch is a Conn's replication check state, touched by the reader
// goroutine only (the batches' INFO replies) and by the handshake while
// no session runs.
type replWatch struct {
	c     *Conn
	runID string // the server of id
	id    string // its replication id at the latest reading ("": none yet)
}

// Complete implements Callback for the batch's INFO replication. It runs
// on the reader goroutine, before the replies that follow.
func (w *replWatch) Complete(_ uint64, r resp.Reply, err error) {
	if err != nil || r.Type != resp.TypeBulkString {
		return // no reading (timed out, refused by an ACL, …)
	}
	w.c.mu.Lock()
	runID := w.c.info.RunID
	w.c.mu.Unlock()
	w.observe(runID, r.Str)
}

// observe takes one reading of INFO replication's text from the server
// with runID and reports a change of its replication id since the
// previous reading of the same server. A reading of another server (a
// restart: its own quarantine) or without an id starts afresh.
func (w *replWatch) observe(runID string, text []byte) {
	id, role := replField(text, "master_replid"), replField(text, "role")
	if id == "" {
		return
	}
	if runID != w.runID {
		w.runID, w.id = runID, id
		return
	}
	if w.id != "" && id != w.id {
		w.c.cfg.OnReplicationID(ReplicationChange{Addr: w.c.addr, From: w.id, To: id, Role: role})
	}
	w.id = id
}

// replField returns the value of field in INFO text ("" when absent).
func replField(text []byte, field string) string {
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		if k, v, ok := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":")); ok && string(k) == field {
			return string(v)
		}
	}
	return ""
}
