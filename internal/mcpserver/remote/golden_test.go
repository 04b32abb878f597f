package remote

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/golden"
)

// In remote mode over a server without sessions, the MCP server offers
// exactly what the local one does (package mcpserver's golden files): the
// server's description, fetched over HTTP, changes no byte of the tool. The
// server runs a scripted service: no sandbox.
func TestRemoteToolsUnchangedWithoutSessions(t *testing.T) {
	svc := execapitest.New("python3.13", "python3.11", "node20", "bash")
	keys, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	_, secret, err := keys.CreateKey(context.Background(), store.NewKey{Name: "golden", RatePerMin: 60, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.New(httpapi.Config{Service: svc, Policy: svc.Policy(), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	serverURL := testenv.ServeLoopback(t, srv.Serve)

	mcp := httptest.NewServer(mcpserver.HTTPHandler(New(serverURL, secret), mcpserver.Options{Version: "golden", Redact: []string{secret}}))
	defer mcp.Close()
	initialize, tools := golden.MCPOffer(t, mcp.URL)
	golden.JSON(t, filepath.Join("..", "testdata", "initialize_sessions_off.json"), initialize)
	golden.JSON(t, filepath.Join("..", "testdata", "tools_list_sessions_off.json"), tools)
}
