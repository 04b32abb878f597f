package authserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/scratchrun/scratchrun/internal/oauth"
)

// Config is what New needs. The lead's settings fill it.
type Config struct {
	// Issuer is the server's public origin, e.g.
	// https://scratchrun.example.com. It has no path, so that a client's
	// first probe, /.well-known/oauth-authorization-server, finds the
	// metadata. http is accepted only for a loopback host (tests).
	Issuer string
	// Resource is the one resource tokens are for (RFC 8707), the canonical
	// URL of /mcp. Default Issuer+"/mcp". A request naming any other
	// resource is refused with invalid_target.
	Resource string
	// Scope is the one scope granted. Default "scratchrun".
	Scope string
	// AccessTokenTTL is how long an access token is valid. Default 10 minutes.
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is how long a refresh token is valid unused; each use
	// rotates it. Default 30 days.
	RefreshTokenTTL time.Duration
	// Keys authenticates the API key pasted on the consent page and checks,
	// on every token and refresh, that the key is still active.
	Keys KeyAuthority
	// State keeps clients, requests, codes, refresh tokens and the signing
	// key, shared by every front end on the database.
	State Storage
	// Registration serves RFC 7591 dynamic registration at /oauth/register
	// (and names it in the metadata).
	Registration bool
	// MetadataClient fetches client ID metadata documents. Nil: a client
	// guarded against SSRF (https only; no private, loopback or link-local
	// address after DNS; no redirects; 5 s; 64 KiB). Tests give one that
	// trusts their TLS server.
	MetadataClient *http.Client
	// Logger receives the server's events. It never gets a token, code,
	// secret or API key. Nil: slog.Default().
	Logger *slog.Logger
}

// Bounds on what anyone on the network can make the server keep.
const (
	// maxClients bounds the clients dynamic registration may create.
	maxClients = 10000
	// maxBody bounds a registration, token or consent request body, and a
	// client ID metadata document.
	maxBody = 64 << 10
	// authRequestTTL is how long a person has from /authorize to the code
	// exchange.
	authRequestTTL = 10 * time.Minute
	// maxStateLen bounds a request's state and nonce, which it keeps.
	maxStateLen = 512
)

// maxPendingRequests bounds the authorization requests kept at once (each
// lives authRequestTTL). A variable for the test of the bound.
var maxPendingRequests = 10000

// Server is the built-in authorization server (New).
type Server struct {
	cfg      Config
	log      *slog.Logger
	provider *op.Provider
	storage  *opStorage
	clients  *clients
	verifier *verifier
}

// New checks cfg, loads the signing key from cfg.State (generating it on
// the first start) and builds the server.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, err := loadSigningKey(ctx, cfg.State)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.clients = newClients(cfg, s.consentURL)
	s.storage = &opStorage{cfg: cfg, key: key, clients: s.clients}
	opts := []op.Option{
		op.WithCustomAuthEndpoint(op.NewEndpoint(pathAuthorize[1:])),
		op.WithCustomTokenEndpoint(op.NewEndpoint(pathToken[1:])),
		op.WithCustomRevocationEndpoint(op.NewEndpoint(pathRevoke[1:])),
		op.WithCustomKeysEndpoint(op.NewEndpoint(pathKeys[1:])),
	}
	if strings.HasPrefix(cfg.Issuer, "http://") {
		opts = append(opts, op.WithAllowInsecure())
	}
	s.provider, err = op.NewProvider(&op.Config{
		// The codes op encrypts need no secret of their own (they are
		// looked up by hash, never decrypted), but every front end derives
		// the same one from the shared signing key anyway.
		CryptoKey:             sha256.Sum256([]byte("scratchrun oauth codes\x00" + key.pem)),
		CodeMethodS256:        true,
		GrantTypeRefreshToken: true,
		SupportedScopes:       []string{cfg.Scope, oidc.ScopeOfflineAccess},
	}, s.storage, op.StaticIssuer(cfg.Issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("oauth authorization server: %w", err)
	}
	s.verifier = newVerifier(cfg, s.storage)
	return s, nil
}

func (c *Config) fill() error {
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("oauth issuer %q: want an origin such as https://scratchrun.example.com, with no path", c.Issuer)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
	default:
		return fmt.Errorf("oauth issuer %q: must be https (http only on a loopback host)", c.Issuer)
	}
	c.Issuer = u.Scheme + "://" + u.Host
	if c.Resource == "" {
		c.Resource = c.Issuer + "/mcp"
	}
	if c.Scope == "" {
		c.Scope = "scratchrun"
	}
	if strings.ContainsAny(c.Scope, " \"\\") {
		return fmt.Errorf("oauth scope %q: one scope, no spaces or quotes", c.Scope)
	}
	if c.AccessTokenTTL <= 0 {
		c.AccessTokenTTL = 10 * time.Minute
	}
	if c.RefreshTokenTTL <= 0 {
		c.RefreshTokenTTL = 30 * 24 * time.Hour
	}
	if c.Keys == nil || c.State == nil {
		return errors.New("oauth authorization server: Keys and State are required")
	}
	if c.MetadataClient == nil {
		c.MetadataClient = guardedClient()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// isLoopbackHost reports whether host (no port) names this machine.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The server's paths, under its root.
const (
	pathASMetadata   = "/.well-known/oauth-authorization-server"
	pathOIDCMetadata = "/.well-known/openid-configuration"
	pathAuthorize    = "/oauth/authorize"
	pathToken        = "/oauth/token"
	pathRevoke       = "/oauth/revoke"
	pathKeys         = "/oauth/keys"
	pathRegister     = "/oauth/register"
	pathConsent      = "/oauth/consent"
)

// Routes returns the server's handlers by http.ServeMux pattern, to be
// mounted at the server's root. op's other endpoints (userinfo,
// end_session, introspection, device authorization) are not among them.
func (s *Server) Routes() map[string]http.Handler {
	routes := map[string]http.Handler{
		pathASMetadata:   http.HandlerFunc(s.metadata),
		pathOIDCMetadata: http.HandlerFunc(s.metadata),
		pathAuthorize:    http.HandlerFunc(s.authorize),
		pathToken:        http.HandlerFunc(s.token),
		pathRevoke:       s.provider,
		pathKeys:         s.provider,
		pathConsent:      http.HandlerFunc(s.consent),
	}
	if s.cfg.Registration {
		routes[pathRegister] = http.HandlerFunc(s.register)
	}
	return routes
}

// Verifier checks the access tokens this server issued.
func (s *Server) Verifier() oauth.Verifier { return s.verifier }

// consentURL is where op sends the person for the authorization request id.
func (s *Server) consentURL(id string) string {
	return s.cfg.Issuer + pathConsent + "?id=" + url.QueryEscape(id)
}

// AnyOriginPaths are the Routes a page of any origin may call (browser-based
// clients do, with CORS): the metadata, token, revocation, key set and
// registration endpoints, which carry no cookie. The authorization and
// consent pages are not among them.
func (s *Server) AnyOriginPaths() []string {
	paths := []string{pathASMetadata, pathOIDCMetadata, pathToken, pathRevoke, pathKeys}
	if s.cfg.Registration {
		paths = append(paths, pathRegister)
	}
	return paths
}
