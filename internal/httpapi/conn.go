package httpapi

import (
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of ConnLimits.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = time.Minute
	DefaultIdleTimeout   = 2 * time.Minute
	// maxDefaultConns bounds DefaultMaxConns: each open connection costs a
	// goroutine and buffers (tens of KiB), and one host's clients need far
	// fewer than a large descriptor limit allows.
	maxDefaultConns = 4096
	minDefaultConns = 16
)

// ConnLimits bound what one client connection can hold, in time and in
// number, so that clients that send slowly, or not at all, cannot exhaust
// the server's descriptors and keep others (even /healthz) from an answer.
// The zero value takes the defaults.
type ConnLimits struct {
	// MaxConns caps the connections open at once; beyond it, new ones wait
	// in the kernel's accept queue until one closes. 0 means DefaultMaxConns.
	MaxConns int
	// HeaderTimeout bounds reading a request's headers (default
	// DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, counted from the end of
	// its headers, on every route. It is lifted once the body has been read
	// to its end, so that it never cuts a run short (default
	// DefaultBodyTimeout).
	BodyTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no new request
	// this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
}

func (l ConnLimits) withDefaults() ConnLimits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns()
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// NewBoundedServer is the one construction of an HTTP server and listener
// for ScratchRun's network front ends (`scratchrun serve`, its metrics
// listener, `scratchrun mcp --http`): h behind the body deadline and early
// close of BoundBodies, header and idle timeouts, and ln capped at
// l.MaxConns connections. Serve the returned server on the returned
// listener.
func NewBoundedServer(ln net.Listener, h http.Handler, l ConnLimits, errorLog *log.Logger) (*http.Server, net.Listener) {
	l = l.withDefaults()
	srv := &http.Server{
		Handler:           BoundBodies(h, l.BodyTimeout),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          errorLog,
		// No ReadTimeout: net/http would keep its deadline on the
		// connection while the handler runs, and its background read would
		// then cancel a long run. BoundBodies lifts its own instead.
	}
	return srv, netutil.LimitListener(ln, l.MaxConns)
}

// BoundBodies gives every request's body a read deadline of timeout from
// now, lifted when the body has been read to its end, and ends the
// connection after an error answer (status 400 and up) given before that:
// the answer says "Connection: close" and the rest of the body is not read.
// net/http would otherwise read what is left of the body, to keep the
// connection, from a client that may never send it (with Content-Length:
// 200000 and one byte sent, a 401 was never written at all).
func BoundBodies(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// An error means the connection has no deadlines (not a net.Conn);
		// there is nothing to bound then.
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		body := &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		r.Body = body
		// Once the answer is an error, what is left of the body is of no
		// use: an expired deadline makes net/http give up reading it (it
		// does so after the handler, even on "Connection: close").
		stopReading := func() { _ = rc.SetReadDeadline(time.Now()) }
		next.ServeHTTP(&closeOnEarlyError{ResponseWriter: w, body: body, stopReading: stopReading}, r)
	})
}

// deadlineBody lifts the read deadline once the body has been read to its
// end.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	mu   sync.Mutex
	done bool
}

// Read implements io.Reader.
func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		if !b.done {
			b.done = true
			b.lift()
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *deadlineBody) finished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// closeOnEarlyError ends the connection after an error answer written
// before the request's body was read to its end.
type closeOnEarlyError struct {
	http.ResponseWriter
	body        *deadlineBody
	stopReading func()
	wroteHeader bool
}

// WriteHeader implements http.ResponseWriter.
func (w *closeOnEarlyError) WriteHeader(code int) {
	if !w.wroteHeader && code >= http.StatusBadRequest && !w.body.finished() {
		w.Header().Set("Connection", "close")
		w.stopReading()
	}
	w.wroteHeader = true
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *closeOnEarlyError) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(p)
}

// Flush keeps streaming (MCP's server-sent events) working through the wrapper.
func (w *closeOnEarlyError) Flush() {
	w.wroteHeader = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *closeOnEarlyError) Unwrap() http.ResponseWriter { return w.ResponseWriter }
