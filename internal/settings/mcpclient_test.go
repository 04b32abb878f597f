package settings

import (
	"slices"
	"strings"
	"testing"
)

// mcp off Linux is a client: its settings and --help name none of the
// engine's, and every one it takes mcp takes too.
func TestMCPClientTakesNoEngineSetting(t *testing.T) {
	for _, s := range All {
		if !slices.Contains(s.Commands, MCPClient) {
			continue
		}
		if !slices.Contains(s.Commands, MCP) {
			t.Errorf("%s applies to mcp off Linux but not to mcp", s.Name)
		}
		if s != Debug && (slices.Contains(s.Commands, Exec) || slices.Contains(s.Commands, Worker)) {
			t.Errorf("%s is an engine's setting, yet applies to mcp off Linux", s.Name)
		}
	}
	help := EnvHelp(MCPClient)
	for _, want := range []string{"SCRATCHRUN_API_URL", "SCRATCHRUN_API_KEY", "SCRATCHRUN_OAUTH_STORE"} {
		if !strings.Contains(help, want) {
			t.Errorf("mcp off Linux: help lacks %s", want)
		}
	}
	for _, not := range []string{"SCRATCHRUN_ISOLATION", "SCRATCHRUN_POOL_FLOOR", "SCRATCHRUN_MAX_PIDS"} {
		if strings.Contains(help, not) {
			t.Errorf("mcp off Linux: help names the engine's %s", not)
		}
	}
}
