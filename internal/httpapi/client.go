package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// maxResultBytes bounds a result document the client reads: stdout and stderr
// at their caps plus return files in base64, with room for JSON escaping.
const maxResultBytes = 256 << 20

// maxErrorBytes bounds an error document the client reads.
const maxErrorBytes = 1 << 20

// Client is an execapi.Service that runs requests on a remote ScratchRun
// server (or the hosted API) over HTTP. It is safe for concurrent use.
type Client struct {
	base   string
	apiKey string
	http   *http.Client
	bounds ClientBounds

	mu sync.Mutex
	// info is the server's last answer to Describe, whose limits bound
	// how long a run may keep the client waiting.
	info *execapi.Info
}

var _ execapi.Service = (*Client)(nil)

// Defaults of ClientBounds.
const (
	DefaultClientConnect = 10 * time.Second
	DefaultClientMargin  = 60 * time.Second
	// unknownRunTimeout stands for a run's timeout when neither the
	// request nor a Describe of the server has said it: long enough for
	// any server's maximum, short enough that a silent server is let go.
	unknownRunTimeout = 30 * time.Minute
)

// ClientBounds bound how long a Client waits for its server. The server's
// API answers a run only when it has ended, so no fixed whole-request
// timeout fits; each call is given what the server may take by its own
// limits, plus Margin. Zero fields take the defaults.
type ClientBounds struct {
	// Connect bounds dialling the server and the TLS handshake (default
	// DefaultClientConnect). It applies to the client's own HTTP client
	// (NewClient's httpClient nil); one the caller gives is its own.
	Connect time.Duration
	// Margin is what a call may take beyond the server's limits: all of
	// Describe's wait, and an Exec's beyond the run's timeout and the
	// server's queue wait (default DefaultClientMargin).
	Margin time.Duration
}

func (b ClientBounds) withDefaults() ClientBounds {
	if b.Connect <= 0 {
		b.Connect = DefaultClientConnect
	}
	if b.Margin <= 0 {
		b.Margin = DefaultClientMargin
	}
	return b
}

// NewClient returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8722"), sending apiKey as a bearer token when it is not
// empty, within the default ClientBounds. A nil httpClient means one of its
// own, whose connections are bounded (ClientBounds.Connect).
func NewClient(baseURL, apiKey string, httpClient *http.Client) *Client {
	return NewBoundedClient(baseURL, apiKey, httpClient, ClientBounds{})
}

// NewBoundedClient is NewClient within bounds.
func NewBoundedClient(baseURL, apiKey string, httpClient *http.Client, bounds ClientBounds) *Client {
	bounds = bounds.withDefaults()
	if httpClient == nil {
		httpClient = &http.Client{Transport: boundedTransport(bounds.Connect)}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), apiKey: apiKey, http: httpClient, bounds: bounds}
}

// boundedTransport is net/http's default transport with dialling and the
// TLS handshake bounded by connect. It sets no ResponseHeaderTimeout: the
// answer of a run starts only when the run has ended (the per-call bound,
// see Client.execBound, covers that wait).
func boundedTransport(connect time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	return t
}

// execBound is how long a run of req may keep the client waiting: its
// timeout (the request's, else the server's default) and the server's
// queue wait, as the server last described them, plus the margin.
func (c *Client) execBound(req execapi.Request) time.Duration {
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
	return timeout + queue + c.bounds.Margin
}

// Exec implements execapi.Executor with POST /v1/exec. The server's API does
// not stream, so events only hears execapi.EventSubmitted as the request
// goes out. Cancelling ctx closes the connection, which makes the server
// kill the run's sandbox.
func (c *Client) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return execapi.Result{}, fmt.Errorf("encode request: %w", err)
	}
	if events != nil {
		events(execapi.Event{Kind: execapi.EventSubmitted})
	}
	var res execapi.Result
	if err := c.do(ctx, c.execBound(req), http.MethodPost, "/v1/exec", body, &res); err != nil {
		return execapi.Result{}, err
	}
	if res.Files == nil {
		res.Files = map[string]string{}
	}
	if res.Outcome == "" {
		// A server older than outcomes (or the hosted API) sends none; its
		// exit code is the best there is.
		res.Outcome = execapi.OutcomeOf(res.ExitCode, res.Facts)
	}
	return res, nil
}

// Describe implements execapi.Service with GET /v1/runtimes.
func (c *Client) Describe(ctx context.Context) (execapi.Info, error) {
	var info execapi.Info
	if err := c.do(ctx, c.bounds.Margin, http.MethodGet, "/v1/runtimes", nil, &info); err != nil {
		return execapi.Info{}, err
	}
	c.mu.Lock()
	c.info = &info
	c.mu.Unlock()
	return info, nil
}

// do sends one request and decodes a 2xx answer into out, all within
// bound. Other answers become the server's *execapi.Refusal or
// *execapi.ValidationError as the server had it, when its error document
// says which, and an *APIError otherwise (a proxy's page, a 401). Errors
// name the URL, never the key.
func (c *Client) do(ctx context.Context, bound time.Duration, method, path string, body []byte, out any) error {
	target := c.base + path
	shown := redactURL(target)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := c.send(ctx, method, target, shown, body, out)
	if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller still waits; the server is what went silent.
		return fmt.Errorf("%s %s: no answer within %s: %w", method, shown, bound.Round(time.Millisecond), context.DeadlineExceeded)
	}
	return err
}

// send is do's one request.
func (c *Client) send(ctx context.Context, method, target, shown string, body []byte, out any) error {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, target, reader)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, shown, stripURLError(err))
	}
	hreq.Header.Set("Accept", "application/json")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, shown, stripURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readError(resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResultBytes+1))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, shown, stripURLError(err))
	}
	if len(data) > maxResultBytes {
		return fmt.Errorf("%s %s: answer is larger than %d bytes", method, shown, maxResultBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the expected JSON: %w", method, shown, err)
	}
	return nil
}

// readError turns a non-2xx answer into the error the server had: the
// *execapi.Refusal or *execapi.ValidationError its document carries (so that
// a remote Executor passes them on unchanged), else an *APIError, also when
// the body is not the API's error document (a proxy's HTML page, say).
func readError(resp *http.Response) error {
	e := &APIError{Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var doc ErrorDocument
	if json.Unmarshal(data, &doc) != nil || doc.Error.Code == "" && doc.Error.Message == "" {
		e.Code = codeForStatus(resp.StatusCode)
		e.Message = strings.TrimSpace(http.StatusText(resp.StatusCode) + ": " + truncate(strings.TrimSpace(string(data)), 200))
		return e
	}
	e.Code, e.Message, e.Field = doc.Error.Code, doc.Error.Message, doc.Error.Field
	if r := refusalFrom(e, doc.Error); r != nil {
		return r
	}
	if e.Code == execapi.CodeWorkerLost {
		// The server lost the call with its worker: the caller must learn
		// that the code may have run, as it would have from the engine.
		return &execapi.WorkerLostError{Why: "reported by the server " + e.Message}
	}
	return e
}

// refusalFrom rebuilds the server's refusal from its answer: the reason its
// document names, or, from a server that names none (one older than
// reasons), the one its 429's code stands for (a 503 it sent may have
// ended a run that had begun: that stays an *APIError). Retry-After is the
// header's. Nil when the answer is no refusal.
func refusalFrom(e *APIError, d ErrorDetail) *execapi.Refusal {
	reason := execapi.RefusalReason(d.Reason)
	if reason == "" && e.Status == http.StatusTooManyRequests {
		switch d.Code {
		case execapi.CodeAtCapacity:
			reason = execapi.RefusedAtCapacity
		case execapi.CodeRateLimited:
			reason = execapi.RefusedKeyRate
		case execapi.CodeConcurrencyLimit:
			reason = execapi.RefusedKeyConcurrency
		}
	}
	if reason == "" {
		return nil
	}
	r := &execapi.Refusal{Reason: reason, RetryAfter: e.RetryAfter, Limit: d.Limit, Field: d.Field}
	if d.Field != "" {
		r.Detail = strings.TrimPrefix(d.Message, d.Field+": ")
	}
	return r
}

// codeForStatus guesses the API's code when a body did not carry one.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return execapi.CodeInvalidRequest
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusRequestEntityTooLarge:
		return CodeBodyTooLarge
	case http.StatusTooManyRequests:
		return execapi.CodeAtCapacity
	case http.StatusServiceUnavailable:
		return execapi.CodeDraining
	case http.StatusNotFound:
		return CodeNotFound
	}
	return execapi.CodeInternal
}

// parseRetryAfter reads delay-seconds or an HTTP date; zero when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
