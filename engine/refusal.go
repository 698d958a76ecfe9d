package engine

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/redlock-dev/redlock/conn"
	"github.com/redlock-dev/redlock/internal/scripts"
	"github.com/redlock-dev/redlock/resp"
)

// A master's refusal that retrying cannot cure ([ErrMisconfigured]): what
// the server says, in its own words as Redis 7.0 to 7.4 write them.
var (
	// "NOPERM this user has no permissions to run the 'zadd' command"
	// (7.2+ in a script: "... ACL failure in script: ...", the same words).
	refusedCommandRE = regexp.MustCompile(`permissions to run the '([^']+)' command`)
	// "ERR unknown command 'delex', with args beginning with: ..."
	unknownCommandRE = regexp.MustCompile(`^ERR unknown command '([^']+)'`)
	// A script's error names the script and the line, not the command:
	// "... script: <sha1>, on @user_script:6."
	scriptLineRE = regexp.MustCompile(`script: ([0-9a-f]{40}), on @user_script:(\d+)`)
)

// refusal is a master's refusal of an operation that retrying cannot
// cure.
type refusal struct {
	code string // "NOPERM", "unknown command"; "" for refused credentials (conn.ErrAuth)
	// what was refused: a command ("ZADD"), "a key", "a channel", or ""
	// when the server did not say (a command of a script not of this
	// module).
	what string
}

// refusalOf reports whether err, one master's failure in an operation,
// is a refusal retrying cannot cure: the ACL user lacks a command, key or
// channel (NOPERM, or a script's "can't run this command" / "can't
// access" / "can't publish"), the server lacks a command, or it refused
// the credentials.
func refusalOf(err error) (refusal, bool) {
	if errors.Is(err, conn.ErrAuth) {
		return refusal{}, true
	}
	var re *resp.Error
	if !errors.As(err, &re) {
		return refusal{}, false
	}
	msg := re.Msg
	inScript := func() string {
		m := scriptLineRE.FindStringSubmatch(msg)
		if m == nil {
			return ""
		}
		line, _ := strconv.Atoi(m[2])
		return scripts.CommandAt(m[1], line)
	}
	switch {
	case strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS"):
		return refusal{}, true
	case strings.Contains(msg, "one of the keys") || strings.Contains(msg, "can't access at least one of the keys"):
		return refusal{code: "NOPERM", what: "a key"}, true
	case strings.Contains(msg, "one of the channels") || strings.Contains(msg, "can't publish to the channel"):
		return refusal{code: "NOPERM", what: "a channel"}, true
	}
	if m := refusedCommandRE.FindStringSubmatch(msg); m != nil {
		return refusal{code: "NOPERM", what: strings.ToUpper(m[1])}, true
	}
	if strings.Contains(msg, "can't run this command or subcommand") {
		return refusal{code: "NOPERM", what: inScript()}, true
	}
	if m := unknownCommandRE.FindStringSubmatch(msg); m != nil {
		return refusal{code: "unknown command", what: strings.ToUpper(m[1])}, true
	}
	if strings.Contains(msg, "Unknown Redis command called from script") {
		return refusal{code: "unknown command", what: inScript()}, true
	}
	return refusal{}, false
}

// securityDoc is where the masters' ACL line is documented.
const securityDoc = "docs/operations.md#security"

// String says what was refused and how to mend it, as a master's cause:
// "refused ZADD (NOPERM): the masters' ACL user needs +zadd —
// docs/operations.md#security".
func (r refusal) String() string {
	what := r.what
	if what == "" {
		what = "a command of a script"
	}
	s := "refused " + what + " (" + r.code + "): "
	switch {
	case r.code == "unknown command":
		return s + "the master does not have it (an older server?)"
	case r.what == "a key":
		return s + "the masters' ACL user's key patterns (~…) must cover the lock keys and redlock:* — " + securityDoc
	case r.what == "a channel":
		return s + "the masters' ACL user's channel patterns (&…) must cover the release and wake-up channels — " + securityDoc
	case r.what == "":
		return s + "the masters' ACL user lacks a command the script calls (the masters' ACL LOG names it) — " + securityDoc
	}
	// One of several commands of a script's line ("GET or PEXPIRE"): the
	// documented line grants each.
	return s + "the masters' ACL user needs +" + strings.ReplaceAll(strings.ToLower(r.what), " or ", " +") + " — " + securityDoc
}
