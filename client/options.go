package client

import (
	"net/http"
	"time"
)

// Defaults of the options.
const (
	// DefaultConnectTimeout bounds dialling the server and the TLS handshake.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMargin is what a call may take beyond the server's own limits
	// (a run's timeout and its queue wait) before the client gives up on
	// a server that went silent.
	DefaultMargin = 60 * time.Second
	// DefaultRetries and DefaultRetryWait bound the retries of one call:
	// how many, and how long they may wait in all.
	DefaultRetries   = 3
	DefaultRetryWait = 60 * time.Second
)

// config is what the options set.
type config struct {
	httpClient *http.Client
	connect    time.Duration
	margin     time.Duration
	retries    int
	retryWait  time.Duration
	autoKey    bool
}

func defaults() config {
	return config{connect: DefaultConnectTimeout, margin: DefaultMargin, retries: DefaultRetries, retryWait: DefaultRetryWait}
}

// Option configures a Client (New, FromEnvironment).
type Option func(*config)

// WithHTTPClient sends the requests through hc (its transport, proxies,
// TLS settings) instead of the client's own. Give it no Timeout: a run's
// answer comes only when the run ends, and the client bounds each call by
// the server's limits itself.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.httpClient = hc } }

// WithConnectTimeout bounds dialling and the TLS handshake of the client's
// own transport (not one given by WithHTTPClient).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.connect = d
		}
	}
}

// WithMargin sets what a call may take beyond the server's limits (see
// DefaultMargin).
func WithMargin(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.margin = d
		}
	}
}

// WithRetries bounds the retries of one call: at most max retries, waiting
// at most maxWait in all. A call is retried when the server refused it
// before any of it ran (429, or 503 naming a refusal's reason), after the
// server's Retry-After, except the key's maximum of sessions
// (CodeSessionLimit: waiting frees none, closing one does); and when the connection was lost, or a 503 gave no
// reason, only if the call carries an Idempotency-Key (then the server
// runs it at most once). A Retry-After beyond what is left of maxWait ends
// the retries: the error says when to come back.
func WithRetries(max int, maxWait time.Duration) Option {
	return func(c *config) { c.retries, c.retryWait = max, maxWait }
}

// WithoutRetries makes every call one request: the first error is returned.
func WithoutRetries() Option { return WithRetries(0, 0) }

// WithAutoIdempotency gives every exec call without its own key a fresh
// random Idempotency-Key, so that a call whose connection drops is retried
// safely: the server answers the retry with the first run's result
// (waiting for it if it still runs) and never runs the code twice.
func WithAutoIdempotency() Option { return func(c *config) { c.autoKey = true } }

// CallOption configures one call (Run, Stream).
type CallOption func(*callConfig)

// callConfig is what the call options set.
type callConfig struct {
	key string
}

// WithIdempotencyKey sends key as the call's Idempotency-Key (1 to 255
// visible ASCII characters): a repeat of the call with the same key and
// request, within the server's window (24 h), gets the first run's answer
// instead of running the code again. Use a new key per distinct call.
func WithIdempotencyKey(key string) CallOption { return func(c *callConfig) { c.key = key } }
