package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Environment variables FromEnvironment reads.
const (
	EnvURL = "SCRATCHRUN_API_URL"
	EnvKey = "SCRATCHRUN_API_KEY"
)

// DefaultURL is where `scratchrun serve` listens by default.
const DefaultURL = "http://127.0.0.1:8722"

// maxResultBytes bounds a result document the client reads: stdout and
// stderr at their caps plus return files in base64, with room for JSON
// escaping.
const maxResultBytes = 256 << 20

// unknownRunTimeout stands for a run's timeout when neither the request nor
// a Runtimes answer has said it: long enough for any server's maximum,
// short enough that a silent server is let go.
const unknownRunTimeout = 30 * time.Minute

// Client calls one ScratchRun server (or the hosted API). It is safe for
// concurrent use.
type Client struct {
	base   string
	apiKey string
	http   *http.Client
	cfg    config

	mu sync.Mutex
	// info is the server's last answer to Runtimes, whose limits bound
	// how long a run may keep the client waiting.
	info *Info
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8722"), sending apiKey as a bearer token when it is not
// empty (a server in open mode takes none).
func New(baseURL, apiKey string, opts ...Option) *Client {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	hc := cfg.httpClient
	if hc == nil {
		hc = &http.Client{Transport: boundedTransport(cfg.connect)}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), apiKey: apiKey, http: hc, cfg: cfg}
}

// FromEnvironment returns a client of the server SCRATCHRUN_API_URL names
// (DefaultURL when it is unset) with the key in SCRATCHRUN_API_KEY. It
// fails for a URL that is not http(s).
func FromEnvironment(opts ...Option) (*Client, error) {
	base := strings.TrimSpace(os.Getenv(EnvURL))
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s=%q: not an http(s) URL", EnvURL, redactURL(base))
	}
	return New(base, strings.TrimSpace(os.Getenv(EnvKey)), opts...), nil
}

// URL is the server's base URL, any password in it hidden.
func (c *Client) URL() string { return redactURL(c.base) }

// Run runs req on the server (POST /v1/exec) and returns its result,
// whatever the program did; an error means there is no result: an
// *APIError (errors.As) for the server's answers, context errors, or
// ErrConnectionLost. Refusals are retried within the client's bounds
// (WithRetries), as is a lost connection when the call has an
// Idempotency-Key. Cancelling ctx closes the connection, which makes the
// server kill the run's sandbox (unless the call has an Idempotency-Key:
// then the run goes on, for a retry to collect).
func (c *Client) Run(ctx context.Context, req Request, opts ...CallOption) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("encode request: %w", err)
	}
	call := c.callFor(opts)
	var res Result
	err = c.retrying(ctx, call.key != "", func() error {
		return c.attempt(ctx, c.execBound(req), http.MethodPost, "/v1/exec", body, "application/json", call.key,
			func(resp *http.Response) error {
				data, err := readBody(resp)
				if err != nil {
					return err
				}
				res, err = decodeResult(data)
				if err != nil {
					return fmt.Errorf("the result is not the expected JSON: %w", err)
				}
				return nil
			})
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// Runtimes describes the server (GET /v1/runtimes): its runtimes, limits,
// isolation and admission. The client keeps the answer to bound its runs.
func (c *Client) Runtimes(ctx context.Context) (Info, error) {
	var info Info
	err := c.retrying(ctx, true, func() error {
		return c.attempt(ctx, c.cfg.margin, http.MethodGet, "/v1/runtimes", nil, "application/json", "",
			func(resp *http.Response) error {
				data, err := readBody(resp)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(data, &info); err != nil {
					return fmt.Errorf("the answer is not the expected JSON: %w", err)
				}
				return nil
			})
	})
	if err != nil {
		return Info{}, err
	}
	c.mu.Lock()
	c.info = &info
	c.mu.Unlock()
	return info, nil
}

// callFor applies a call's options, giving it a fresh key when the client
// makes them (WithAutoIdempotency).
func (c *Client) callFor(opts []CallOption) callConfig {
	var call callConfig
	for _, o := range opts {
		o(&call)
	}
	if call.key == "" && c.cfg.autoKey {
		call.key = newIdempotencyKey()
	}
	return call
}

// newIdempotencyKey is 128 random bits, in hex.
func newIdempotencyKey() string {
	var b [16]byte
	rand.Read(b[:])
	return "sr-go-" + hex.EncodeToString(b[:])
}

// execBound is how long a run of req may keep the client waiting: its
// timeout (the request's, else the server's default) and the server's
// queue wait, as the server last described them, plus the margin.
func (c *Client) execBound(req Request) time.Duration {
	c.mu.Lock()
	info := c.info
	c.mu.Unlock()
	timeout := unknownRunTimeout
	var queue time.Duration
	switch {
	case req.Limits.TimeoutMS > 0:
		timeout = time.Duration(req.Limits.TimeoutMS) * time.Millisecond
	case info != nil && info.DefaultTimeoutMS > 0:
		timeout = time.Duration(info.DefaultTimeoutMS) * time.Millisecond
	}
	if info != nil && info.Admission != nil {
		queue = time.Duration(info.Admission.QueueWaitMS) * time.Millisecond
	}
	return timeout + queue + c.cfg.margin
}

// attempt sends one request and hands a 2xx answer to read, all within
// bound. Other answers are an *APIError; a connection that fails (also
// while read reads) is a *lostError. Errors name the URL, never the key.
func (c *Client) attempt(ctx context.Context, bound time.Duration, method, path string, body []byte, accept, key string, read func(*http.Response) error) error {
	target := c.base + path
	shown := redactURL(target)
	actx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := c.send(actx, method, target, body, accept, key, read)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// The caller gave up: say so, not what the cut connection said.
		return fmt.Errorf("%s %s: %w", method, shown, ctx.Err())
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		// The caller still waits; the server is what went silent.
		return fmt.Errorf("%s %s: no answer within %s: %w", method, shown, bound.Round(time.Millisecond), context.DeadlineExceeded)
	}
	var ae *APIError
	var lost *lostError
	if errors.As(err, &ae) || errors.As(err, &lost) {
		return err
	}
	return fmt.Errorf("%s %s: %w", method, shown, err)
}

// send is attempt's request.
func (c *Client) send(ctx context.Context, method, target string, body []byte, accept, key string, read func(*http.Response) error) error {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return stripURLError(err)
	}
	hreq.Header.Set("Accept", accept)
	hreq.Header.Set("User-Agent", "scratchrun-go/"+Version())
	if body != nil {
		// A PUT is a session's file, sent as its bytes; every other body
		// is the API's JSON.
		ct := "application/json"
		if method == http.MethodPut {
			ct = "application/octet-stream"
		}
		hreq.Header.Set("Content-Type", ct)
	}
	if key != "" {
		hreq.Header.Set("Idempotency-Key", key)
	}
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return &lostError{method: method, url: redactURL(target), err: stripURLError(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(resp)
	}
	if err := read(resp); err != nil {
		var lost *lostError
		var ae *APIError
		if !errors.As(err, &lost) && !errors.As(err, &ae) && isTransport(err) {
			return &lostError{method: method, url: redactURL(target), err: err}
		}
		return err
	}
	return nil
}

// readBody reads a 2xx answer whole, within maxResultBytes.
func readBody(resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxResultBytes {
		return nil, fmt.Errorf("the answer is larger than %d bytes", maxResultBytes)
	}
	return data, nil
}

// isTransport reports whether err is the connection's (a read cut short),
// not the answer's content.
func isTransport(err error) bool {
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset")
}

// boundedTransport is net/http's default transport with dialling and the
// TLS handshake bounded by connect. It sets no ResponseHeaderTimeout: the
// answer of a run starts only when the run has ended (each call's own
// bound, execBound, covers that wait).
func boundedTransport(connect time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	return t
}

// stripURLError drops net/http's *url.Error wrapper, whose text repeats the
// URL unredacted; the caller names the redacted URL itself.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL hides any password in u (a key belongs in the header, but a user
// may paste one into a URL).
func redactURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return parsed.Redacted()
}
