package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Proxy forwards between a local connection (the desktop client's) and a
// remote one (the server's).
type Proxy struct {
	// Log gets what cannot be answered to the client (a failed
	// notification); nil discards it.
	Log *slog.Logger

	version atomic.Pointer[string]
	mu      sync.Mutex
	// initCalls are the IDs of initialize calls still unanswered, whose
	// result names the protocol version.
	initCalls map[jsonrpc.ID]bool
}

// Version is the protocol version the server chose in the handshake, or "".
func (p *Proxy) Version() string {
	if v := p.version.Load(); v != nil {
		return *v
	}
	return ""
}

// Run connects both transports and forwards until the local side closes
// (nil: the client is done) or either side fails.
func (p *Proxy) Run(ctx context.Context, local, remote mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := remote.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the server: %w", err)
	}
	defer rc.Close()
	lc, err := local.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the client: %w", err)
	}
	defer lc.Close()

	var inflight sync.WaitGroup
	defer inflight.Wait()
	ended := make(chan error, 2)
	go func() {
		for {
			msg, err := lc.Read(ctx)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil // the client closed its end: its way to stop us
				}
				ended <- err
				return
			}
			p.noteCall(msg)
			// Each message in its own goroutine: a call's POST may wait
			// for its whole answer (or for a sign-in), and the messages
			// behind it (another call, a cancellation) must not.
			inflight.Go(func() { p.forward(ctx, msg, rc, lc) })
		}
	}()
	go func() {
		for {
			msg, err := rc.Read(ctx)
			if err != nil {
				ended <- fmt.Errorf("the server's connection: %w", err)
				return
			}
			p.noteResult(msg)
			if err := lc.Write(ctx, msg); err != nil {
				ended <- fmt.Errorf("writing to the client: %w", err)
				return
			}
		}
	}()
	err = <-ended
	cancel()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// forward writes msg to the server; a call it could not deliver is
// answered with the error, as the server's own refusal would be.
func (p *Proxy) forward(ctx context.Context, msg jsonrpc.Message, rc, lc mcp.Connection) {
	err := rc.Write(ctx, msg)
	if err == nil || ctx.Err() != nil {
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		if p.Log != nil {
			p.Log.Warn("mcp proxy: a message did not reach the server", "err", err)
		}
		return
	}
	p.forgetCall(req.ID)
	if werr := lc.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: wireError(err)}); werr != nil && p.Log != nil {
		p.Log.Warn("mcp proxy: answering a failed call", "err", werr)
	}
}

// codeRejected is the SDK's "rejected by transport" (jsonrpc2.ErrRejected):
// its transport wraps every per-call failure in it, so it says nothing of
// the failure itself.
const codeRejected = -32005

// wireError is err as a JSON-RPC error: the server's own when it sent one,
// else an internal error that says what failed (a refused sign-in, an
// unreachable server).
func wireError(err error) *jsonrpc.Error {
	if we := serverError(err); we != nil {
		return we
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "scratchrun mcp: " + err.Error()}
}

// serverError is the first JSON-RPC error in err's tree that is not the
// transport's wrapper.
func serverError(err error) *jsonrpc.Error {
	if we, ok := err.(*jsonrpc.Error); ok && we.Code != codeRejected {
		return we
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return serverError(inner)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			if we := serverError(inner); we != nil {
				return we
			}
		}
	}
	return nil
}

func (p *Proxy) noteCall(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() || req.Method != "initialize" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.initCalls == nil {
		p.initCalls = map[jsonrpc.ID]bool{}
	}
	p.initCalls[req.ID] = true
}

func (p *Proxy) forgetCall(id jsonrpc.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.initCalls, id)
}

// noteResult takes the protocol version from an initialize's result.
func (p *Proxy) noteResult(msg jsonrpc.Message) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	p.mu.Lock()
	isInit := p.initCalls[resp.ID]
	delete(p.initCalls, resp.ID)
	p.mu.Unlock()
	if !isInit || resp.Error != nil {
		return
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(resp.Result, &r) == nil && r.ProtocolVersion != "" {
		p.version.Store(&r.ProtocolVersion)
	}
}
