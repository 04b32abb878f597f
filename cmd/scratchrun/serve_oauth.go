//go:build linux

package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/settings"
)

// oauthSetup is OAuth for /mcp as serve's settings describe it (--oauth
// and the settings after it): serve_oauth_wire.go builds it once the
// server's address is known.
type oauthSetup struct {
	mode      string // off, builtin or external
	publicURL string // "" until the listener is bound: then http://ADDR, on loopback only
	scope     string
	// external
	issuer, rules          string
	clientID, clientSecret string
	// builtin
	accessTTL, refreshTTL time.Duration
	registration          bool
}

// on reports whether /mcp takes OAuth tokens.
func (o oauthSetup) on() bool { return o.mode != "off" }

// parseOAuth reads the OAuth settings and refuses a combination that
// could not work, naming the setting.
func parseOAuth(v *settings.Values) (oauthSetup, error) {
	o := oauthSetup{
		mode: v.String(settings.OAuthMode), publicURL: strings.TrimSuffix(v.String(settings.PublicURL), "/"),
		scope: v.String(settings.OAuthScope), issuer: v.String(settings.OAuthIssuer), rules: v.String(settings.OAuthKeys),
		clientID: v.String(settings.OAuthClientID), clientSecret: v.String(settings.OAuthClientSecret),
		accessTTL: v.Duration(settings.OAuthAccessTTL), refreshTTL: v.Duration(settings.OAuthRefreshTTL),
		registration: v.Bool(settings.OAuthRegistration),
	}
	external := []*settings.Setting{settings.OAuthIssuer, settings.OAuthKeys, settings.OAuthClientID, settings.OAuthClientSecret}
	builtin := []*settings.Setting{settings.OAuthAccessTTL, settings.OAuthRefreshTTL, settings.OAuthRegistration}
	if err := onlyWith(v, o.mode != "external", "--oauth external", external); err != nil {
		return o, err
	}
	if err := onlyWith(v, o.mode != "builtin", "--oauth builtin", builtin); err != nil {
		return o, err
	}
	if err := onlyWith(v, !o.on(), "--oauth builtin or external", []*settings.Setting{settings.OAuthScope}); err != nil {
		return o, err
	}
	if o.publicURL != "" {
		if err := checkPublicURL(o.publicURL); err != nil {
			return o, err
		}
	}
	if strings.ContainsAny(o.scope, " \t\"\\") {
		return o, fmt.Errorf("--oauth-scope %q: one scope, without spaces or quotes", o.scope)
	}
	if o.mode == "external" {
		switch {
		case o.issuer == "":
			return o, fmt.Errorf("--oauth external needs --oauth-issuer (SCRATCHRUN_OAUTH_ISSUER): the authorization server tokens come from")
		case o.rules == "":
			return o, fmt.Errorf("--oauth external needs --oauth-keys (SCRATCHRUN_OAUTH_KEYS): which ScratchRun key a token acts as, e.g. sub:alice=alice-key")
		case (o.clientID == "") != (o.clientSecret == ""):
			return o, fmt.Errorf("SCRATCHRUN_OAUTH_CLIENT_ID and SCRATCHRUN_OAUTH_CLIENT_SECRET go together (introspection signs in with both)")
		}
	}
	return o, nil
}

// onlyWith refuses any of these settings given when off holds.
func onlyWith(v *settings.Values, off bool, needs string, these []*settings.Setting) error {
	if !off {
		return nil
	}
	for _, s := range these {
		if v.IsSet(s) {
			return fmt.Errorf("%s only applies with %s", settingName(s), needs)
		}
	}
	return nil
}

func settingName(s *settings.Setting) string {
	if s.Flag != "" {
		return "--" + s.Flag
	}
	return s.Env
}

// checkPublicURL takes an origin: https, or http on a loopback host (OAuth
// 2.1 allows plain HTTP only there), with no path, query or fragment.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("--public-url %q: want https://HOST[:PORT]", raw)
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--public-url %q: want an origin only (https://HOST[:PORT]), no path, query or user", raw)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("--public-url %q: OAuth needs https beyond loopback (a TLS proxy in front of serve, named here)", raw)
	}
	return nil
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// resolvePublicURL fills in the public URL from the bound listener when
// none was given, which only a loopback listener may do: beyond it the
// address clients use is the operator's to name.
func (o *oauthSetup) resolvePublicURL(ln net.Listener) error {
	if o.publicURL != "" || !o.on() {
		return nil
	}
	if !listenerIsLoopback(ln) {
		return fmt.Errorf("--oauth %s on %s needs --public-url (SCRATCHRUN_PUBLIC_URL): the https:// origin clients reach this server at", o.mode, ln.Addr())
	}
	o.publicURL = "http://" + ln.Addr().String()
	return nil
}
