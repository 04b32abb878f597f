package authserver

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// An authorization request is bound to the browser that started it: the
// answer to /authorize that sends the browser to the consent page also sets
// a cookie holding the request's secret (its CSRF token), and the consent
// page, shown or posted, needs that cookie. A consent link someone else
// started, sent to a person to approve, then shows nothing to approve.

// consentCookie names the cookie of request id. The __Host- prefix (Secure,
// host-only, path /) when the server is served over https.
func (s *Server) consentCookie(id string) string {
	name := "sr_consent_" + id
	if strings.HasPrefix(s.cfg.Issuer, "https://") {
		name = "__Host-" + name
	}
	return name
}

// sameBrowser reports whether r comes from the browser that started a.
func (s *Server) sameBrowser(r *http.Request, a *authRequest) bool {
	c, err := r.Cookie(s.consentCookie(a.ID))
	return err == nil && a.CSRF != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.CSRF)) == 1
}

// browserBinder sets the consent cookie on op's redirect to the consent
// page, the one answer of /authorize that starts a consent.
type browserBinder struct {
	http.ResponseWriter
	s *Server
	r *http.Request
}

func (b *browserBinder) WriteHeader(status int) {
	if status == http.StatusFound || status == http.StatusSeeOther {
		if loc, ok := strings.CutPrefix(b.Header().Get("Location"), b.s.cfg.Issuer+pathConsent+"?"); ok {
			if q, err := url.ParseQuery(loc); err == nil {
				if a, err := b.s.storage.authRequest(b.r.Context(), q.Get("id")); err == nil {
					http.SetCookie(b.ResponseWriter, &http.Cookie{
						Name: b.s.consentCookie(a.ID), Value: a.CSRF, Path: "/", MaxAge: int(authRequestTTL.Seconds()),
						HttpOnly: true, Secure: strings.HasPrefix(b.s.cfg.Issuer, "https://"), SameSite: http.SameSiteLaxMode,
					})
				}
			}
		}
	}
	b.ResponseWriter.WriteHeader(status)
}

func (b *browserBinder) Write(p []byte) (int, error) { return b.ResponseWriter.Write(p) }
