package mcpserver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// writeLog records every Write the SDK makes to the ResponseWriter of an
// event stream, as cancelFilter sees them.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
}

func (l *writeLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&loggedStream{ResponseWriter: w, log: l}, r)
	})
}

func (l *writeLog) all() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.writes...)
}

type loggedStream struct {
	http.ResponseWriter
	log *writeLog
}

func (s *loggedStream) Write(p []byte) (int, error) {
	if strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream") {
		s.log.mu.Lock()
		s.log.writes = append(s.log.writes, bytes.Clone(p))
		s.log.mu.Unlock()
	}
	return s.ResponseWriter.Write(p)
}

func (s *loggedStream) Flush() {
	if fl, ok := s.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (s *loggedStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// cancelFilter (cancel.go) finds the response it must drop by reading one
// whole server-sent event from each Write the SDK makes. This pins that
// behaviour of go-sdk's Streamable HTTP transport itself, with no filter of
// ours in the way: on the streams of POSTs that carry calls (initialize's
// response; a tool call's progress notifications, then its response),
// every Write is exactly one complete "message" event carrying one
// JSON-RPC message.
// Should an SDK upgrade split or batch events, this fails, and cancelFilter
// must be rewritten to parse the stream instead.
func TestSDKWritesOneEventPerWrite(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "events", Version: "1"},
		&mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	tool := &mcp.Tool{Name: "steps", InputSchema: map[string]any{"type": "object"}}
	server.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := range 3 {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3, Message: "step",
			})
			if err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	log := &writeLog{}
	srv := httptest.NewServer(log.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	defer srv.Close()

	progress := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "events-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress <- struct{}{} },
	})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "steps"}
	params.SetProgressToken("p")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-progress
	}
	writes := log.all()
	var responses, notifications int
	for _, w := range writes {
		if bytes.HasPrefix(w, []byte(":")) && bytes.Count(w, []byte("\n")) == 2 && bytes.HasSuffix(w, []byte("\n\n")) {
			continue // a comment (": ok", opening the GET stream), which no filter reads
		}
		data, ok := eventData(w)
		if !ok || bytes.Count(w, []byte("\n\n")) != 1 || bytes.Count(w, []byte("data: ")) != 1 || !bytes.HasPrefix(w, []byte("event: message\n")) {
			t.Fatalf("a Write to the event stream is not exactly one whole message event: %q", w)
		}
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		switch msg.(type) {
		case *jsonrpc.Response:
			responses++
		case *jsonrpc.Request:
			notifications++
		}
	}
	// initialize and tools/call answered (and whatever else the client
	// asked on its own), three progress notifications.
	if responses < 2 || notifications != 3 {
		t.Errorf("saw %d responses and %d notifications in %d writes, want at least 2 and 3", responses, notifications, len(writes))
	}
}
