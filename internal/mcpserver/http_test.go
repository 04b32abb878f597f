package mcpserver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// Over Streamable HTTP on loopback, behind the SDK's bearer-token
// middleware: the token's user becomes the caller the Service sees, and a
// chart comes back as a PNG image block.
func TestHTTPHandlerPassesTheCallerAndServesImages(t *testing.T) {
	rec := newRecording(testEngine(t))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != "secret-token-for-user-42" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "user-42"}, nil
	}
	handler := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(HTTPHandler(rec, Options{}))
	srv := httptest.NewServer(handler) // listens on 127.0.0.1
	defer srv.Close()

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)

	// Without the token: refused before any MCP.
	_, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	if err == nil {
		t.Fatal("connected without a token")
	}

	httpClient := &http.Client{Transport: bearer{"secret-token-for-user-42", http.DefaultTransport}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: httpClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res := call(t, cs, map[string]any{
		"runtime":      "python3.11",
		"code":         "import matplotlib.pyplot as plt\nplt.bar(['a','b'], [3, 5])\nplt.savefig('/tmp/bars.png')",
		"return_files": []string{"/tmp/bars.png"},
	})
	if res.IsError || len(res.Content) != 2 {
		t.Fatalf("result %+v", res.Content)
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || !bytes.HasPrefix(img.Data, pngMagic) {
		t.Fatalf("second block %T is not a PNG image", res.Content[1])
	}
	rec.mu.Lock()
	callers := append([]string(nil), rec.callers...)
	rec.mu.Unlock()
	if len(callers) != 1 || callers[0] != "user-42" {
		t.Errorf("callers %q, want the token's user", callers)
	}
}
