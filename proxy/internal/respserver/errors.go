package respserver

// Reply texts of the server's own commands (Redis wording where Redis has
// one); exported where the handler's commands answer the same.
const (
	msgNoAuth     = "NOAUTH Authentication required."
	msgWrongPass  = "WRONGPASS invalid username-password pair or user is disabled."
	msgNoPassword = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	// MsgNotInteger is Redis's reply to an argument that must be an integer.
	MsgNotInteger = "ERR value is not an integer or out of range"
	// MsgSyntax is Redis's reply to options it does not take.
	MsgSyntax     = "ERR syntax error"
	msgNoProto    = "NOPROTO unsupported protocol version"
	msgMaxClients = "ERR max number of clients reached"
	// MsgShuttingDown answers a command caught by Shutdown.
	MsgShuttingDown = "ERR proxy shutting down"
	// MsgExpired replaces a grant's reply that could not be sent within
	// the grant's validity: the connection's replies go out in request
	// order, and an earlier command was slower (ExpireReply).
	MsgExpired = "ERR redlock proxy: granted, but the lock's validity ended before this reply could be sent (an earlier command on this connection was slower); it is not held"
	// MsgMemory answers a request over Config.MaxClientMemory.
	MsgMemory = "ERR redlock proxy: client memory limit reached: requests and replies held for all clients together exceed --max-client-memory (raise it, or send fewer commands at once)"
)
