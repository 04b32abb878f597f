package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP specification says a request the client cancelled gets no
// response. go-sdk v1.8.0 cancels the handler's context on
// notifications/cancelled (which kills the sandbox) but then writes the
// handler's result anyway: its jsonrpc2 layer answers every call
// (processResult writes with the cancellation stripped), and no handler or
// middleware can stop that. Upstream this is
// https://github.com/modelcontextprotocol/go-sdk/issues/1235 (also #1259,
// with the fix proposed in pull request #1267, open when this was written);
// once a release drops those responses itself, this file can go. Until
// then the response is dropped on its way out: by a Connection wrapper for
// transports the caller connects (stdio, in-memory), and by an HTTP filter
// for Streamable HTTP, whose transport the SDK builds per session out of
// reach.

const methodCancelled = "notifications/cancelled"

// Transport wraps t so that the server sends no response for a request
// the client cancelled. Connect the server returned by New through it:
// server.Run(ctx, mcpserver.Transport(&mcp.StdioTransport{})).
func Transport(t mcp.Transport) mcp.Transport { return cancelAwareTransport{t} }

type cancelAwareTransport struct{ mcp.Transport }

// Connect implements mcp.Transport.
func (t cancelAwareTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cancelAwareConn{Connection: conn, inFlight: map[jsonrpc.ID]bool{}}, nil
}

// cancelAwareConn tracks the client's calls in flight (true once the
// client cancelled one) and drops the responses of cancelled ones. Only
// calls in flight are tracked, so a cancellation that crosses its response
// leaves nothing behind.
type cancelAwareConn struct {
	mcp.Connection
	mu       sync.Mutex
	inFlight map[jsonrpc.ID]bool
}

// Read implements mcp.Connection.
func (c *cancelAwareConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil {
		c.mu.Lock()
		if req.IsCall() {
			c.inFlight[req.ID] = false
		} else if id, ok := cancelledID(req); ok {
			if _, known := c.inFlight[id]; known {
				c.inFlight[id] = true
			}
		}
		c.mu.Unlock()
	}
	return msg, err
}

// Write implements mcp.Connection.
func (c *cancelAwareConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		cancelled := c.inFlight[resp.ID]
		delete(c.inFlight, resp.ID)
		c.mu.Unlock()
		if cancelled {
			return nil
		}
	}
	return c.Connection.Write(ctx, msg)
}

// cancelledID returns the request a notifications/cancelled names.
func cancelledID(req *jsonrpc.Request) (jsonrpc.ID, bool) {
	if req.Method != methodCancelled || req.IsCall() {
		return jsonrpc.ID{}, false
	}
	var params mcp.CancelledParams
	if json.Unmarshal(req.Params, &params) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(params.RequestID)
	if err != nil || !id.IsValid() {
		return jsonrpc.ID{}, false
	}
	return id, true
}

// maxScannedBody bounds the POST bodies cancelFilter reads to find calls
// and cancellations: the SDK's own limit, beyond which it refuses them.
const maxScannedBody = mcp.DefaultMaxRequestBodyBytes

// callKey names one call: MCP request IDs are unique per session.
type callKey struct {
	session string
	id      jsonrpc.ID
}

// cancelFilter is Transport for Streamable HTTP. It learns the calls each
// POST carries and the cancellations later POSTs of the same session send,
// and drops a cancelled call's response event from the stream of the POST
// that carried the call.
//
// It reads the stream one Write at a time, and so assumes what go-sdk
// v1.8.0 does (mcp's writeEvent, called by stream.deliverLocked): every
// server-sent event is built whole in a buffer ("event: message\nid:
// ...\ndata: <one JSON-RPC message>\n\n") and handed to the ResponseWriter
// in exactly one Write, then flushed; no Write carries part of an event or
// more than one. Were an event split across Writes, the filter would not
// recognise it and would let a cancelled call's response through; were
// events batched into one Write, it would judge them all by the first.
// TestSDKWritesOneEventPerWrite pins this against the SDK itself, so an
// upgrade that changes it fails loudly. No upstream issue promises it: it
// is the SDK's implementation, not its contract.
type cancelFilter struct {
	next http.Handler
	mu   sync.Mutex
	// calls holds the calls of POSTs being served; true once cancelled.
	calls map[callKey]bool
}

func newCancelFilter(next http.Handler) *cancelFilter {
	return &cancelFilter{next: next, calls: map[callKey]bool{}}
}

// ServeHTTP implements http.Handler.
func (f *cancelFilter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get("Mcp-Session-Id")
	if r.Method != http.MethodPost || session == "" || r.Body == nil {
		f.next.ServeHTTP(w, r)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxScannedBody+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(data), r.Body), r.Body}
	if err != nil || len(data) > maxScannedBody {
		f.next.ServeHTTP(w, r) // the SDK answers a body it cannot read
		return
	}
	var mine []callKey
	f.mu.Lock()
	for _, msg := range decodeMessages(data) {
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			continue
		}
		if req.IsCall() {
			k := callKey{session, req.ID}
			f.calls[k] = false
			mine = append(mine, k)
		} else if id, ok := cancelledID(req); ok {
			if _, known := f.calls[callKey{session, id}]; known {
				f.calls[callKey{session, id}] = true
			}
		}
	}
	f.mu.Unlock()
	if len(mine) == 0 {
		f.next.ServeHTTP(w, r)
		return
	}
	defer func() {
		f.mu.Lock()
		for _, k := range mine {
			delete(f.calls, k)
		}
		f.mu.Unlock()
	}()
	f.next.ServeHTTP(&filteredStream{ResponseWriter: w, f: f, session: session}, r)
}

// cancelled reports whether the client cancelled the call an event answers.
func (f *cancelFilter) cancelled(session string, event []byte) bool {
	data, ok := eventData(event)
	if !ok {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	resp, isResponse := msg.(*jsonrpc.Response)
	if err != nil || !isResponse {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[callKey{session, resp.ID}]
}

// eventData returns the data of a server-sent "message" event written in
// one piece ("event: message\nid: ...\ndata: {...}\n\n"), as the SDK writes.
func eventData(event []byte) ([]byte, bool) {
	if !bytes.HasSuffix(event, []byte("\n\n")) {
		return nil, false
	}
	for line := range bytes.SplitSeq(bytes.TrimSuffix(event, []byte("\n\n")), []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			return data, true
		}
	}
	return nil, false
}

// decodeMessages decodes a POST body: one JSON-RPC message or a batch.
func decodeMessages(data []byte) []jsonrpc.Message {
	var batch []json.RawMessage
	if json.Unmarshal(data, &batch) != nil {
		batch = []json.RawMessage{data}
	}
	var out []jsonrpc.Message
	for _, raw := range batch {
		if msg, err := jsonrpc.DecodeMessage(raw); err == nil {
			out = append(out, msg)
		}
	}
	return out
}

// filteredStream is the response of a POST that carried calls: events
// answering a cancelled call are swallowed.
type filteredStream struct {
	http.ResponseWriter
	f       *cancelFilter
	session string
}

// Write drops an event that answers a cancelled call.
func (s *filteredStream) Write(p []byte) (int, error) {
	if s.f.cancelled(s.session, p) {
		return len(p), nil
	}
	return s.ResponseWriter.Write(p)
}

// Flush keeps events streaming through the wrapper.
func (s *filteredStream) Flush() {
	if fl, ok := s.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *filteredStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// readCloser reads from a reader and closes the original body.
type readCloser struct {
	io.Reader
	io.Closer
}
