package mcpserver

import (
	"net/http/httptest"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv/golden"
)

// Without sessions the MCP server offers what it offered before they
// existed, byte for byte: the initialize answer (its instructions say
// nothing persists), and tools/list with scratchrun_exec alone, its
// description, input and output schema unchanged. The sessions work adds
// tools only when sessions are on. (remote's TestRemoteToolsUnchangedWithoutSessions
// holds the remote mode to the same files.)
func TestToolsUnchangedWithoutSessions(t *testing.T) {
	srv := httptest.NewServer(HTTPHandler(fakeService(), Options{Version: "golden"}))
	defer srv.Close()
	initialize, tools := golden.MCPOffer(t, srv.URL)
	golden.JSON(t, "testdata/initialize_sessions_off.json", initialize)
	golden.JSON(t, "testdata/tools_list_sessions_off.json", tools)
}
