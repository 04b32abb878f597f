package oauthclient

import (
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"
)

// DefaultSignInTimeout bounds the wait for the browser's redirect: long
// enough to type a password and pass a second factor, short enough that a
// client left alone does not hold a port open for ever.
const DefaultSignInTimeout = 5 * time.Minute

// Config is a Handler's configuration; the command fills it from settings.
type Config struct {
	// Endpoint is the server's MCP endpoint (https://host/mcp): the
	// resource every token is asked for (RFC 8707), and the key of the
	// stored grant.
	Endpoint string
	// ClientMetadataURL is the https URL of a client ID metadata document
	// (SCRATCHRUN_OAUTH_CLIENT_METADATA_URL). When set, and the server
	// advertises client_id_metadata_document_supported, it is the client
	// ID; otherwise the client registers itself (RFC 7591) as a native
	// application. The document must list the redirect URI, which is why
	// it goes with a fixed CallbackPort.
	ClientMetadataURL string
	// CallbackPort is the loopback port of the redirect URI
	// http://127.0.0.1:PORT/callback (SCRATCHRUN_OAUTH_CALLBACK_PORT); 0
	// picks a free one per sign-in.
	CallbackPort int
	// Store keeps the grant between runs (NewStore); nil keeps nothing.
	Store Store
	// SignInTimeout bounds the wait for the browser (DefaultSignInTimeout
	// when 0).
	SignInTimeout time.Duration
	// HTTPClient makes the OAuth requests: metadata, registration, token
	// (defaultHTTPClient when nil).
	HTTPClient *http.Client
	// Stderr is where the sign-in line and warnings go (os.Stderr when
	// nil): never stdout, which is the MCP stream.
	Stderr io.Writer
	// OpenBrowser opens the authorization URL (the OS's opener when nil).
	OpenBrowser func(url string) error
	// ClientName and ClientVersion describe the client in its registration.
	ClientName, ClientVersion string
}

func (c Config) withDefaults() Config {
	if c.SignInTimeout <= 0 {
		c.SignInTimeout = DefaultSignInTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = defaultHTTPClient()
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.OpenBrowser == nil {
		c.OpenBrowser = func(url string) error { return OpenBrowser(runtime.GOOS, url) }
	}
	if c.ClientName == "" {
		c.ClientName = "ScratchRun (scratchrun mcp)"
	}
	if c.Store == nil {
		c.Store = noStore{}
	}
	return c
}

// defaultHTTPClient is a client with a 30s timeout whose transport dials
// for itself. That opts out of the SDK's dial-time guard against private
// addresses (oauthex's discovery transport refuses 10/8, 192.168/16,
// 100.64/10 ...), which protects a server that fetches URLs for others: here
// the user named the server, and a self-hosted one is often on a LAN or a
// tailnet, behind a name that resolves to exactly such an address. The
// SDK's other checks stay: metadata over HTTPS unless on loopback, no
// private IP literal in a metadata URL, issuers that match.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// noStore keeps nothing: every run signs in.
type noStore struct{}

func (noStore) Load(string, string) (*Grant, error) { return nil, ErrNoGrant }
func (noStore) Save(*Grant) error                   { return nil }
func (noStore) Forget(string) error                 { return nil }
