package golden

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// MCPOffer is what the MCP server at url (Streamable HTTP) offers a client
// that connects: the result of initialize (capabilities, instructions) and
// of tools/list, each as the server wrote it. It speaks the protocol by
// hand, so that the test sees the server's bytes, not what a client
// library makes of them.
func MCPOffer(t testing.TB, url string) (initialize, tools json.RawMessage) {
	t.Helper()
	c := &rawMCP{t: t, url: url}
	initialize = c.rpc("initialize", 1, map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "golden", "version": "1"},
	})
	c.rpc("notifications/initialized", 0, map[string]any{})
	tools = c.rpc("tools/list", 2, map[string]any{})
	return initialize, tools
}

// rawMCP is one Streamable HTTP session.
type rawMCP struct {
	t       testing.TB
	url     string
	session string
}

// rpc posts one JSON-RPC message and returns the result of its answer as
// the server wrote it (nil for a notification, id 0, which gets none).
func (c *rawMCP) rpc(method string, id int, params any) json.RawMessage {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id != 0 {
		msg["id"] = id
	}
	body, _ := json.Marshal(msg)
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 {
		c.t.Fatalf("%s: %d %v %s", method, resp.StatusCode, err, data)
	}
	if id == 0 {
		return nil
	}
	// The answer is one JSON document, or the last event of a stream.
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var event []byte
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				event = []byte(d)
			}
		}
		data = event
	}
	var answer struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &answer); err != nil || answer.ID != id || answer.Result == nil {
		c.t.Fatalf("%s: answer %s (%v)", method, data, err)
	}
	return answer.Result
}
