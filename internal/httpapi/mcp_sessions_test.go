package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/store"
)

// The gate has its say in who opens an MCP session (the key's rate).
var _ mcpserver.SessionAdmitter = (*gate)(nil)

// keyedAnswers adds a key to an MCP client's requests and keeps the
// bodies and Retry-After of those refused with 429.
type keyedAnswers struct {
	key     string
	mu      sync.Mutex
	refused []refusedSession
}

type refusedSession struct {
	retryAfter string
	body       []byte
}

func (k *keyedAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	k.mu.Lock()
	k.refused = append(k.refused, refusedSession{resp.Header.Get("Retry-After"), body})
	k.mu.Unlock()
	return resp, nil
}

// Opening an MCP session spends a run of the key's rate: a key allowed 5
// runs a minute that opens 16 sessions at once (as many as a key may have
// open, so that only the rate refuses) gets 5 (and one more for each 12 s
// the burst took), the rest refused with 429, Retry-After and a
// JSON-RPC error naming the key's rate, each refusal recorded against the
// key; another key still opens one. Before, such a key opened 200 at once.
func TestMCPSessionsSpendTheKeysRate(t *testing.T) {
	ts := startServer(t, serverOptions{mcp: true, fake: scripted()})
	k, key := ts.key("five", 5, 4)
	_, other := ts.key("other", 5, 4)
	answers := &keyedAnswers{key: key}
	connect := func(rt http.RoundTripper) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "sessions-rate-test", Version: "1"}, nil)
		return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
			HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}, nil)
	}
	const burst = mcpserver.DefaultMaxSessionsPerCaller
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var opened []*mcp.ClientSession
	for range burst {
		wg.Go(func() {
			if cs, err := connect(answers); err == nil {
				mu.Lock()
				opened = append(opened, cs)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	for _, cs := range opened {
		defer cs.Close()
	}
	if most := 5 + int(took/(12*time.Second)); len(opened) < 5 || len(opened) > most {
		t.Fatalf("a 5/min key opened %d of %d sessions at once, want 5 to %d", len(opened), burst, most)
	}
	if len(answers.refused) != burst-len(opened) {
		t.Fatalf("%d refused with 429, want %d", len(answers.refused), burst-len(opened))
	}
	for _, a := range answers.refused {
		var doc struct {
			Error struct {
				Message string `json:"message"`
				Data    struct {
					Reason string `json:"reason"`
					Limit  int    `json:"limit"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(a.body, &doc); err != nil || doc.Error.Data.Reason != string(execapi.RefusedKeyRate) || doc.Error.Data.Limit != 5 || a.retryAfter == "" {
			t.Fatalf("refusal %q (Retry-After %q), want the key's rate of 5 named", a.body, a.retryAfter)
		}
	}
	counts, err := ts.keys.SummarizeRefusals(context.Background(), store.UsageFilter{KeyIDs: []string{k.ID}})
	if err != nil || len(counts) != 1 || counts[0].Reason != string(execapi.RefusedKeyRate) || counts[0].Count != int64(burst-len(opened)) {
		t.Errorf("refusals recorded: %+v, %v", counts, err)
	}
	cs, err := connect(bearerKey(other))
	if err != nil {
		t.Fatalf("another key: %v", err)
	}
	cs.Close()
}
