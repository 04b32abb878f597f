package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/scratchrun/scratchrun/internal/mcpserver"
)

// mcpSessionFlags bound the MCP sessions of Streamable HTTP, for serve's
// /mcp and `mcp --http` alike.
type mcpSessionFlags struct {
	max, perKey int
	idle        time.Duration
}

func addMCPSessionFlags(fs *flag.FlagSet) *mcpSessionFlags {
	f := &mcpSessionFlags{}
	fs.IntVar(&f.max, "mcp-max-sessions", 0, fmt.Sprintf("MCP sessions open at once; one more gets 503 (default %d)", mcpserver.DefaultMaxSessions))
	fs.IntVar(&f.perKey, "mcp-sessions-per-key", 0, fmt.Sprintf("MCP sessions one API key (or token) may have open at once; one more gets 429 (default %d)", mcpserver.DefaultMaxSessionsPerCaller))
	fs.DurationVar(&f.idle, "mcp-session-idle", 0, fmt.Sprintf("close an MCP session after this long without a request (default %s)", mcpserver.DefaultSessionTimeout))
	return f
}

// check refuses negative bounds (zero takes the default).
func (f *mcpSessionFlags) check() error {
	if f.max < 0 || f.perKey < 0 || f.idle < 0 {
		return errors.New("--mcp-max-sessions, --mcp-sessions-per-key and --mcp-session-idle must not be negative")
	}
	return nil
}

// apply sets the bounds in o.
func (f *mcpSessionFlags) apply(o mcpserver.Options) mcpserver.Options {
	o.MaxSessions, o.MaxSessionsPerCaller, o.SessionTimeout = f.max, f.perKey, f.idle
	return o
}
