package proxy

import (
	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/proxy/internal/lockcmds"
)

// DefaultWakeChannel is the masters' channel over which proxies tell each
// other that a Redisson hold ended (Config.WakeChannel).
const DefaultWakeChannel = lockcmds.DefaultWakeChannel

// MasterScripts returns the scripts a [Server] sends to the masters with
// EVALSHA. Its own engine loads them on every connect; an engine given
// as [Config.Engine] should list them in its Conn.Scripts.
func MasterScripts() []*conn.Script { return lockcmds.MasterScripts() }

// LibraryScript describes one recognised client-library script.
type LibraryScript struct {
	Name string // library and operation
	SHA  string // SHA1 of the exact text
}

// LibraryScripts returns the scripts the proxy recognises by SHA1.
func LibraryScripts() []LibraryScript {
	out := make([]LibraryScript, len(lockcmds.LibTable))
	for i, ls := range lockcmds.LibTable {
		out[i] = LibraryScript{Name: ls.Name, SHA: ls.SHA}
	}
	return out
}
