package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// SignInLine is how the line on stderr that carries the authorization URL
// starts: "scratchrun mcp: sign in at URL". A test (or a person on a
// machine with no browser) takes the URL from it.
const SignInLine = "scratchrun mcp: sign in at "

// listenCallback opens the loopback listener of one sign-in: on 127.0.0.1
// (never "localhost", which may resolve elsewhere, RFC 8252 §8.3) at port,
// or at a port the OS picks when port is 0.
func listenCallback(port int) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(port)))
	if err != nil {
		return nil, "", fmt.Errorf("oauthclient: the sign-in's callback listener: %w", err)
	}
	return ln, "http://" + ln.Addr().String() + callbackPath, nil
}

// fetcher is the SDK's AuthorizationCodeFetcher for one sign-in: it serves
// the callback on ln, sends the user to the URL and waits, at most
// h.cfg.SignInTimeout, for the redirect.
func (h *Handler) fetcher(ln net.Listener, issuer string) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil {
			return nil, fmt.Errorf("oauthclient: the authorization URL: %w", err)
		}
		cb := newCallback(u.Query().Get("state"), issuer)
		srv := &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer func() {
			// Let the tab get its page before the listener goes.
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if srv.Shutdown(sctx) != nil {
				srv.Close()
			}
		}()

		fmt.Fprintf(h.cfg.Stderr, "%s%s\n", SignInLine, args.URL)
		if err := h.cfg.OpenBrowser(args.URL); err != nil {
			fmt.Fprintf(h.cfg.Stderr, "scratchrun mcp: %v; open the URL above in a browser\n", err)
		}
		wait, cancel := context.WithTimeout(ctx, h.cfg.SignInTimeout)
		defer cancel()
		select {
		case r := <-cb.done:
			return r.res, r.err
		case <-wait.Done():
			if errors.Is(wait.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
				return nil, fmt.Errorf("oauthclient: no sign-in within %s", h.cfg.SignInTimeout)
			}
			return nil, ctx.Err()
		}
	}
}
