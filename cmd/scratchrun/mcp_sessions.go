package main

import (
	"time"

	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// mcpSessions bound the MCP sessions of Streamable HTTP, for serve's /mcp
// and `mcp --http` alike (0: mcpserver's defaults).
type mcpSessions struct {
	max, perKey int
	idle        time.Duration
}

func parseMCPSessions(v *settings.Values) mcpSessions {
	return mcpSessions{max: v.Int(settings.MCPMaxSessions), perKey: v.Int(settings.MCPSessionsPerKey), idle: v.Duration(settings.MCPSessionIdle)}
}

// apply sets the bounds in o.
func (s mcpSessions) apply(o mcpserver.Options) mcpserver.Options {
	o.MaxSessions, o.MaxSessionsPerCaller, o.SessionTimeout = s.max, s.perKey, s.idle
	return o
}
