package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// initialize opens an MCP session at url with token, raw: the answer's
// status, Retry-After, session id and body.
func initialize(t *testing.T, url, token string) (int, string, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Mcp-Session-Id"), string(body)
}

// `mcp --http --mcp-sessions-per-key 1`: the token's second session is
// refused with 429, Retry-After and a JSON-RPC error naming the limit;
// closing the first (DELETE) lets the next in. Negative bounds are usage
// errors, for serve too.
func TestMCPHTTPSessionFlags(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	const token = "session-flags-test-token-0123456789"
	url, stop := startMCPHTTP(t, token, "--mcp-sessions-per-key", "1", "--mcp-session-idle", "1h")
	defer stop()
	status, _, id, body := initialize(t, url, token)
	if status != http.StatusOK || id == "" {
		t.Fatalf("first session: %d %q %s", status, id, body)
	}
	status, retry, _, body := initialize(t, url, token)
	var doc struct {
		Error struct {
			Data struct {
				Reason string `json:"reason"`
				Limit  int    `json:"limit"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &doc); status != http.StatusTooManyRequests || retry == "" ||
		doc.Error.Data.Reason != "mcp_sessions_per_caller" || doc.Error.Data.Limit != 1 {
		t.Fatalf("second session: %d (Retry-After %q) %s", status, retry, body)
	}
	del, _ := http.NewRequest(http.MethodDelete, url, nil)
	del.Header.Set("Authorization", "Bearer "+token)
	del.Header.Set("Mcp-Session-Id", id)
	if resp, err := http.DefaultClient.Do(del); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", statusOf(resp), err)
	} else {
		resp.Body.Close()
	}
	if status, _, _, body := initialize(t, url, token); status != http.StatusOK {
		t.Errorf("after the DELETE: %d %s", status, body)
	}

	for _, args := range [][]string{
		{"mcp", "--http", "127.0.0.1:0", "--mcp-sessions-per-key", "-1"},
		{"serve", "--addr", "127.0.0.1:0", "--db", t.TempDir() + "/keys.db", "--mcp-session-idle", "-1s"},
	} {
		if r := scratchrun(t, t.TempDir(), "", args...); r.code != exitUsage || !strings.Contains(r.stderr, "must not be negative") {
			t.Errorf("%v: exit %d %q, want a usage error", args, r.code, r.stderr)
		}
	}
}
