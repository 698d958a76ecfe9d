package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// TestRefusalOf: the refusals retrying cannot cure, in the words of
// Redis 7.0 (a script's refusal names its SHA1 and line: the command is
// read from the script), and the errors that are not refusals.
func TestRefusalOf(t *testing.T) {
	// redis-py's release, byte for byte: line 6 calls DEL, line 1 nothing.
	sha := conn.NewScript(scripts.Lib("redis-py-release")).SHA()
	for _, tt := range []struct {
		msg  string
		want string // refusal.String(), "" for none
	}{
		{"NOPERM this user has no permissions to run the 'getrange' command",
			"refused GETRANGE (NOPERM): the masters' ACL user needs +getrange — docs/operations.md#security"},
		{"NOPERM User redlock has no permissions to run the 'command|docs' command",
			"refused COMMAND|DOCS (NOPERM): the masters' ACL user needs +command|docs — docs/operations.md#security"},
		{"ERR The user executing the script can't run this command or subcommand script: " + sha + ", on @user_script:6.",
			"refused DEL (NOPERM): the masters' ACL user needs +del — docs/operations.md#security"},
		{"ERR The user executing the script can't run this command or subcommand script: " + sha + ", on @user_script:1.",
			"refused a command of a script (NOPERM): the masters' ACL user lacks a command the script calls (the masters' ACL LOG names it) — docs/operations.md#security"},
		{"ERR The user executing the script can't run this command or subcommand script: 899f474f11d3dd39224a90a226353082b96e1b6b, on @user_script:1.",
			"refused a command of a script (NOPERM): the masters' ACL user lacks a command the script calls (the masters' ACL LOG names it) — docs/operations.md#security"},
		{"NOPERM this user has no permissions to access one of the keys used as arguments",
			"refused a key (NOPERM): the masters' ACL user's key patterns (~…) must cover the lock keys and redlock:* — docs/operations.md#security"},
		{"ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: " + sha + ", on @user_script:2.",
			"refused a key (NOPERM): the masters' ACL user's key patterns (~…) must cover the lock keys and redlock:* — docs/operations.md#security"},
		{"ERR The user executing the script can't publish to the channel mentioned in the command script: " + sha + ", on @user_script:9.",
			"refused a channel (NOPERM): the masters' ACL user's channel patterns (&…) must cover the release and wake-up channels — docs/operations.md#security"},
		{"ERR unknown command 'delex', with args beginning with: 'k' ",
			"refused DELEX (unknown command): the master does not have it (an older server?)"},
		{"ERR Unknown Redis command called from script script: " + sha + ", on @user_script:6.",
			"refused DEL (unknown command): the master does not have it (an older server?)"},
		{"WRONGPASS invalid username-password pair or user is disabled.", "refused credentials"},
		{"NOAUTH Authentication required.", "refused credentials"},
		{"LOADING Redis is loading the dataset in memory", ""},
		{"BUSY Redis is busy running a script.", ""},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", ""},
		{"ERR Error running script (call to f_x): @user_script:1: user_script:1: Script attempted to access nonexistent global variable", ""},
	} {
		t.Run(tt.msg, func(t *testing.T) {
			err := fmt.Errorf("wrapped: %w", &resp.Error{Msg: tt.msg})
			r, ok := refusalOf(err)
			got := ""
			switch {
			case ok && r.code == "":
				got = "refused credentials"
			case ok:
				got = r.String()
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
	if _, ok := refusalOf(fmt.Errorf("%w: handshake AUTH: %w", conn.ErrDown, conn.ErrAuth)); !ok {
		t.Error("conn.ErrAuth is not a refusal")
	}
	if _, ok := refusalOf(conn.ErrTimeout); ok {
		t.Error("a timeout is a refusal")
	}
	if _, ok := refusalOf(errors.New("engine: unexpected reply")); ok {
		t.Error("an unexpected reply is a refusal")
	}
}
