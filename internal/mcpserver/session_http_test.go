package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over Streamable HTTP behind bearer tokens, a code session belongs to the
// token's user (the API key), not to the MCP connection: the same key
// keeps it over a new connection, and another key is told it does not
// exist, as for an id never made (never "forbidden").
func TestSessionBoundToTheKeyOverHTTP(t *testing.T) {
	users := map[string]string{"token-of-key-a-0123456789": "key-a", "token-of-key-b-0123456789": "key-b"}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if u, ok := users[token]; ok {
			return &auth.TokenInfo{UserID: u}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	srv := httptest.NewServer(auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(
		HTTPHandler(newFakeSessions(true), Options{})))
	// A cleanup, not a defer: the clients' (registered later, run first)
	// must end their streams before the server's Close waits for them.
	t.Cleanup(srv.Close)
	dial := func(token string) *mcp.ClientSession {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "session-http-test", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	first := dial("token-of-key-a-0123456789")
	id := openSession(t, first, map[string]any{"runtime": "python3.13"})
	callTool(t, first, SessionRunToolName, map[string]any{"session_id": id, "code": "set v=kept"})
	first.Close()

	again := dial("token-of-key-a-0123456789")
	var sr sessionRunStructured
	decodeInto(t, callTool(t, again, SessionRunToolName, map[string]any{"session_id": id, "code": "get v"}), &sr)
	if sr.Stdout != "kept\n" {
		t.Errorf("the same key over a new connection got %q", sr.Stdout)
	}

	other := dial("token-of-key-b-0123456789")
	for _, tool := range []string{SessionRunToolName, SessionCloseToolName} {
		args := map[string]any{"session_id": id, "code": "get v"}
		if tool == SessionCloseToolName {
			delete(args, "code")
		}
		msg := errorText(t, callTool(t, other, tool, args))
		if !strings.HasPrefix(msg, "No such session") {
			t.Errorf("%s by another key: %s", tool, msg)
		}
	}
}
