package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/scratchrun/scratchrun/internal/oauthclient"
	"github.com/scratchrun/scratchrun/internal/oauthclient/oauthtest"
)

// syncBuffer is a stderr the proxy and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// browser stands for the user's browser: it follows the authorization
// URL, and the server's redirect, to the loopback callback. Without
// allowSignIn a call fails the test: the stored grant should have done.
type browser struct {
	t           *testing.T
	allowSignIn bool
	mu          sync.Mutex
	opened      []string
	callback    string // the redirect the last sign-in came back to
}

func (b *browser) open(u string) error {
	b.mu.Lock()
	b.opened = append(b.opened, u)
	b.mu.Unlock()
	if !b.allowSignIn {
		b.t.Errorf("a browser was opened (%s): the stored grant should have been enough", u)
		return errors.New("no browser in this test")
	}
	resp, err := http.Get(u)
	if err != nil {
		b.t.Errorf("following the sign-in: %v", err)
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.mu.Lock()
	b.callback = resp.Request.URL.String()
	b.mu.Unlock()
	if !strings.Contains(string(body), "close this tab") {
		b.t.Errorf("the callback page says %q", body)
	}
	return nil
}

// proxied is a desktop client's session through a Proxy to ts, the proxy
// signing in with store.
type proxied struct {
	cs     *mcp.ClientSession
	stderr *syncBuffer
	proxy  *Proxy
}

func connect(t *testing.T, ts *oauthtest.Server, store oauthclient.Store, b *browser) (*proxied, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	h, err := oauthclient.New(ctx, oauthclient.Config{
		Endpoint: ts.URL + "/mcp", Store: store, OpenBrowser: b.open, Stderr: stderr, SignInTimeout: time.Minute,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &Proxy{}
	remote := &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: p.HTTPClient(nil), OAuthHandler: h, MaxRetries: -1}
	local, desktop := mcp.NewInMemoryTransports()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx, local, remote) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Error("the proxy did not end within 30s of its context")
		}
	})
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(cctx, desktop, nil)
	if err != nil {
		return &proxied{stderr: stderr, proxy: p}, err
	}
	t.Cleanup(func() { cs.Close() })
	return &proxied{cs: cs, stderr: stderr, proxy: p}, nil
}

func (p *proxied) echo(t *testing.T, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("echo: %v %+v (stderr %q)", err, res, p.stderr.String())
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "echo: "+text {
		t.Errorf("echo said %q", got)
	}
}

// storedGrant is what an earlier run left in store for ts.
func storedGrant(t *testing.T, ts *oauthtest.Server, store oauthclient.Store) string {
	t.Helper()
	client, refresh := ts.SeedGrant()
	if err := store.Save(&oauthclient.Grant{Issuer: ts.URL, Resource: ts.URL + "/mcp", ClientID: client,
		TokenURL: ts.URL + "/token", AuthStyle: oauth2.AuthStyleInParams, RefreshToken: refresh}); err != nil {
		t.Fatal(err)
	}
	return client
}

func loadGrant(t *testing.T, ts *oauthtest.Server, store oauthclient.Store) *oauthclient.Grant {
	t.Helper()
	g, err := store.Load(ts.URL, ts.URL+"/mcp")
	if err != nil {
		t.Fatalf("the stored grant: %v", err)
	}
	return g
}

// With a grant from an earlier run the proxy needs no browser: the client
// lists the server's tools, exactly, and calls one; the refresh token the
// server rotated is the one stored now; requests after the handshake carry
// the negotiated MCP-Protocol-Version.
func TestProxyWithStoredGrant(t *testing.T) {
	ts := oauthtest.NewServer(t)
	store := oauthclient.FileStore{Dir: t.TempDir()}
	client := storedGrant(t, ts, store)
	p, err := connect(t, ts, store, &browser{t: t})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p.cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" || tools.Tools[0].Description != "says it back" {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	p.echo(t, "hello")
	if ts.Refreshes() != 1 {
		t.Errorf("%d refreshes; want 1 (the stored grant has no access token)", ts.Refreshes())
	}
	if live, g := ts.LiveRefresh(client), loadGrant(t, ts, store); len(live) != 1 || g.RefreshToken != live[0] {
		t.Errorf("stored refresh token %q; the server takes %q", g.RefreshToken, live)
	}
	want := p.cs.InitializeResult().ProtocolVersion
	if got := ts.Versions(); len(got) == 0 || slices.ContainsFunc(got, func(v string) bool { return v != want }) {
		t.Errorf("Mcp-Protocol-Version after the handshake: %q; want %q on every one", got, want)
	}
}

// When the server refuses an access token the client still thought good,
// the proxy refreshes once and retries: no browser, and the rotated token
// is stored.
func TestProxyRefreshesRefusedToken(t *testing.T) {
	ts := oauthtest.NewServer(t)
	store := oauthclient.FileStore{Dir: t.TempDir()}
	client := storedGrant(t, ts, store)
	p, err := connect(t, ts, store, &browser{t: t})
	if err != nil {
		t.Fatal(err)
	}
	p.echo(t, "before")
	ts.RevokeAccess()
	p.echo(t, "after")
	if ts.Refreshes() != 2 {
		t.Errorf("%d refreshes; want 2", ts.Refreshes())
	}
	if live, g := ts.LiveRefresh(client), loadGrant(t, ts, store); len(live) != 1 || g.RefreshToken != live[0] {
		t.Errorf("stored refresh token %q; the server takes %q", g.RefreshToken, live)
	}
}

// A stored grant the server no longer takes starts a sign-in: the URL is
// on stderr in the stable line, the client registers as a native app with
// a loopback redirect, the authorization asks S256 and names the
// resource, the new grant replaces the dead one, and the callback
// listener is gone afterwards.
func TestProxySignsInWhenGrantIsDead(t *testing.T) {
	ts := oauthtest.NewServer(t)
	store := oauthclient.FileStore{Dir: t.TempDir()}
	if err := store.Save(&oauthclient.Grant{Issuer: ts.URL, Resource: ts.URL + "/mcp", ClientID: "gone",
		TokenURL: ts.URL + "/token", RefreshToken: "revoked"}); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, allowSignIn: true}
	p, err := connect(t, ts, store, b)
	if err != nil {
		t.Fatal(err)
	}
	p.echo(t, "signed in")

	if len(b.opened) != 1 {
		t.Fatalf("browser opened %d times: %q", len(b.opened), b.opened)
	}
	if want := oauthclient.SignInLine + b.opened[0] + "\n"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", p.stderr.String(), want)
	}
	regs, authz := ts.Registrations(), ts.Authorizations()
	if len(regs) != 1 || regs[0].ApplicationType != "native" || regs[0].TokenEndpointAuthMethod != "none" ||
		!slices.Contains(regs[0].GrantTypes, "refresh_token") || len(regs[0].RedirectURIs) != 1 {
		t.Fatalf("registrations: %+v", regs)
	}
	redirect, err := url.Parse(regs[0].RedirectURIs[0])
	if err != nil || redirect.Scheme != "http" || redirect.Hostname() != "127.0.0.1" || redirect.Path != "/callback" {
		t.Errorf("redirect URI %q: want http://127.0.0.1:PORT/callback", regs[0].RedirectURIs[0])
	}
	if len(authz) != 1 || authz[0].Get("code_challenge_method") != "S256" || authz[0].Get("resource") != ts.URL+"/mcp" {
		t.Errorf("authorization requests: %v", authz)
	}
	g := loadGrant(t, ts, store)
	if g.ClientID == "gone" || g.RefreshToken == "revoked" || g.Issuer != ts.URL {
		t.Errorf("stored grant after the sign-in: %+v", g)
	}
	if live := ts.LiveRefresh(g.ClientID); len(live) != 1 || live[0] != g.RefreshToken {
		t.Errorf("stored refresh token %q; the server takes %q", g.RefreshToken, live)
	}
	if c, err := net.Dial("tcp", redirect.Host); err == nil {
		c.Close()
		t.Errorf("the callback listener %s is still open after the sign-in", redirect.Host)
	}
}

// A call that cannot reach the server (here: the sign-in was refused) is
// answered with the error, not left for the client to wait on for ever.
func TestProxyAnswersCallThatFails(t *testing.T) {
	ts := oauthtest.NewServer(t)
	ts.Deny = true
	_, err := connect(t, ts, oauthclient.FileStore{Dir: t.TempDir()}, &browser{t: t, allowSignIn: true})
	if err == nil || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("connect with a refused sign-in: %v; want the access_denied error", err)
	}
}
