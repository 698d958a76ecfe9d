package proxy

import (
	"errors"

	"github.com/redlock-dev/redlock/proxy/internal/respserver"
)

// ErrServerClosed is returned by [Server.Serve] after [Server.Shutdown] or
// [Server.Close].
var ErrServerClosed = respserver.ErrServerClosed

// ErrBadConfig is matched by the errors of [New] for invalid settings.
var ErrBadConfig = errors.New("proxy: invalid config")
