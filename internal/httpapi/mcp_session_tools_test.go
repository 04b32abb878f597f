package httpapi

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// With sessions on, /mcp is served over the gate, which must carry what
// the session tools need of it (its Policy, to check a call before
// ExecInSession): before, the gate lacked it and a server with sessions
// on offered scratchrun_exec alone over MCP.
func TestMCPOverTheGateOffersTheSessionTools(t *testing.T) {
	ts := startServer(t, serverOptions{mcp: true, sessions: true, fake: scripted()})
	_, key := ts.key("agent", 60, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "session-tools-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: &keyedAnswers{key: key}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"scratchrun_exec", "scratchrun_session_close", "scratchrun_session_open", "scratchrun_session_run"}
	if !slices.Equal(names, want) {
		t.Errorf("tools/list over the gate with sessions on: %v, want %v", names, want)
	}
}
