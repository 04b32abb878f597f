package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// CodeForbidden is the error code of a request refused for where it comes
// from (a foreign Origin, or a Host a loopback server does not answer to).
const CodeForbidden = "forbidden"

// GuardOrigin refuses, with 403, requests that a web page the operator
// visits could make: a server that runs code for whoever reaches it must not
// run it for a page's script, which reaches loopback too.
//
//   - When the server is bound to loopback (bound, the listener's address),
//     Host must name a loopback address (localhost, *.localhost,
//     127.0.0.0/8, ::1) or the host of listenAddr, the address the operator
//     gave: a DNS-rebinding page reaches 127.0.0.1 under its own name.
//   - Bound beyond loopback, Host is not checked (behind a real hostname, a
//     proxy, or several names, only the operator knows the right ones); keys
//     guard those servers, and listening there without keys needs
//     --allow-no-auth.
//   - Everywhere, Origin must be absent (non-browser clients send none) or
//     the server's own (same host and port as Host), and a browser's
//     Sec-Fetch-Site must not say cross-site: a page cannot read or drive
//     the API from another origin.
//
// It is applied to every route, /mcp included, and to `scratchrun mcp
// --http` (whose SDK checks Host but not Origin, which MCP requires).
func GuardOrigin(next http.Handler, bound net.Addr, listenAddr string) http.Handler {
	return guardOrigin(next, originPolicy{bound: bound, listenAddr: listenAddr}, func() {})
}

// originPolicy is what guardOrigin accepts beyond GuardOrigin's rules.
type originPolicy struct {
	bound      net.Addr
	listenAddr string
	// publicURL is the origin clients reach the server at (serve
	// --public-url, e.g. a TLS proxy's): its host is accepted as Host and
	// it is accepted as Origin, since behind a proxy neither is the
	// listener's.
	publicURL string
	// anyOrigin are paths that take requests from any origin: OAuth's
	// metadata, token and registration endpoints, which browser-based
	// clients call cross-origin (they send CORS headers) and which carry
	// no cookie or other ambient authority for a page to borrow.
	anyOrigin map[string]bool
}

// guardOrigin is GuardOrigin under policy, calling refused for each refusal.
func guardOrigin(next http.Handler, policy originPolicy, refused func()) http.Handler {
	g := originGuard{loopback: isLoopbackAddr(policy.bound), anyOrigin: policy.anyOrigin}
	g.listenHost, _ = splitHost(policy.listenAddr)
	if u, err := url.Parse(policy.publicURL); err == nil && u.Host != "" {
		g.publicHost, _ = splitHost(u.Host)
		g.publicOrigin = normalOrigin(u)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := g.problem(r); msg != "" {
			refused()
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusForbidden, CodeForbidden, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originGuard is an originPolicy ready to check requests.
type originGuard struct {
	loopback                 bool
	listenHost               string
	publicHost, publicOrigin string
	anyOrigin                map[string]bool
}

// normalOrigin is u's scheme://host:port, the port always written.
func normalOrigin(u *url.URL) string {
	host, port := splitHost(u.Host)
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(host, port)
}

// problem says why r must be refused, or "".
func (g originGuard) problem(r *http.Request) string {
	host, hostPort := splitHost(r.Host)
	named := host == g.publicHost && g.publicHost != ""
	if g.loopback && !isLoopbackName(host) && (g.listenHost == "" || host != g.listenHost) && !named {
		return fmt.Sprintf("Host %q is not a loopback name: this server listens on loopback and answers only to "+
			"localhost, 127.0.0.1 or [::1] (a page that renamed 127.0.0.1 to reach it is refused)", r.Host)
	}
	if g.anyOrigin[r.URL.Path] {
		return ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" {
		return "cross-site request refused: a web page on another site may not use this server"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Sprintf("Origin %q refused: only this server's own origin may send requests from a browser", origin)
	}
	if g.publicOrigin != "" && normalOrigin(u) == g.publicOrigin {
		return ""
	}
	originHost, originPort := splitHost(u.Host)
	if originPort == "" {
		originPort = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	// Without a port in Host, the client used the default of a scheme this
	// server cannot see (TLS may end at a proxy): either default matches.
	samePort := originPort == hostPort || hostPort == "" && (originPort == "80" || originPort == "443")
	if originHost != host || !samePort {
		return fmt.Sprintf("Origin %q refused: it is not this server's origin (%s), and cross-origin requests are not allowed", origin, r.Host)
	}
	return ""
}

// splitHost splits "Example.COM:8722" into "example.com" and "8722" (and
// "[::1]" into "::1" and "").
func splitHost(hostport string) (host, port string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.ToLower(strings.Trim(host, "[]")), port
}

// isLoopbackAddr reports whether a listener's address is a loopback IP (not
// the unspecified address, which is every interface).
func isLoopbackAddr(a net.Addr) bool {
	if a == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// isLoopbackName reports whether a Host names this machine's loopback: a
// loopback IP, localhost, or a name under .localhost (which RFC 6761 keeps
// on loopback and browsers resolve themselves).
func isLoopbackName(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
