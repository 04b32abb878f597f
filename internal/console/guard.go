package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// contentSecurityPolicy allows only the console's own scripts, styles and
// connections (no inline script or style, no eval), images of its own and
// those the playground makes from returned files (blob:), and no framing,
// plugins, base rewriting or form posts elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sends the console's security headers on every answer.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		// Not no-referrer: under it a browser sends "Origin: null" with
		// the page's own form posts and fetches, which GuardOrigin must
		// refuse. same-origin keeps the Origin and tells other sites
		// nothing.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, assetsPath) {
			// Pages and answers hold keys and usage: never from a cache.
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// Cookie names. Over TLS they take the __Host- prefix, which makes the
// browser refuse them unless Secure, for the whole host and set by it (not
// by a sibling subdomain).
const (
	sessionCookie = "scratchrun_console"
	signinCookie  = "scratchrun_console_signin"
)

// secureRequest reports whether the browser reached the server over TLS:
// directly, or through a proxy that says so.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// newCookie is an HttpOnly, SameSite=Strict cookie for the console,
// Secure (and __Host-) over TLS; maxAge 0 makes it last the browser
// session, negative deletes it.
func newCookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: basePath, MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if secureRequest(r) {
		c.Name, c.Path, c.Secure = "__Host-"+name, "/", true
	}
	return c
}

// cookieValue reads a cookie set by newCookie.
func cookieValue(r *http.Request, name string) string {
	if secureRequest(r) {
		name = "__Host-" + name
	}
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}

type sessionKey struct{}

// sessionFrom returns the session (and its id) withSession found.
func sessionFrom(ctx context.Context) (id string, s session) {
	v, _ := ctx.Value(sessionKey{}).(sessionValue)
	return v.id, v.s
}

type sessionValue struct {
	id string
	s  session
}

// withSession answers 401 to a request without a live session.
func (h *handlers) withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := cookieValue(r, sessionCookie)
		s, ok := h.sessions.lookup(id)
		if !ok {
			writeError(w, http.StatusUnauthorized, codeSignedOut, "sign in to the console first (your session ended, or never began)")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sessionValue{id, s})))
	})
}

// csrfHeader carries the session's CSRF token on state-changing requests.
const csrfHeader = "X-CSRF-Token"

// requireCSRF refuses a state-changing request that does not carry its
// session's CSRF token, or whose body is not JSON (a form of another site
// can send neither).
func requireCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, s := sessionFrom(r.Context())
		got := r.Header.Get(csrfHeader)
		if got == "" {
			writeError(w, http.StatusForbidden, codeCSRF, "this request carries no CSRF token ("+csrfHeader+"): reload the console")
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			writeError(w, http.StatusForbidden, codeCSRF, "this request's CSRF token is not its session's: reload the console")
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, httpapi.CodeMediaType, "send JSON with Content-Type: application/json")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Error codes of the console's API, beside the API's own (httpapi's and
// execapi's, which it answers with too).
const (
	codeSignedOut = "signed_out"
	codeCSRF      = "csrf"
	codeThrottled = "too_many_signins"
	codeBadToken  = "wrong_token"
)

// writeError answers with the API's error document (httpapi.ErrorDocument).
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, httpapi.ErrorDocument{Error: httpapi.ErrorDetail{Code: code, Message: message}})
}

// writeFieldError answers 400 for a request field at fault, naming it.
func writeFieldError(w http.ResponseWriter, field, message string) {
	writeJSON(w, http.StatusBadRequest, httpapi.ErrorDocument{Error: httpapi.ErrorDetail{
		Code: execapi.CodeInvalidRequest, Message: field + ": " + message, Field: field}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"the answer could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// jsonTime is a time for the pages: RFC 3339 in UTC with milliseconds, or
// null for the zero time.
type jsonTime time.Time

// MarshalJSON implements json.Marshaler.
func (t jsonTime) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// UnmarshalJSON implements json.Unmarshaler (for clients in Go: tests).
func (t *jsonTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = jsonTime{}
		return nil
	}
	var v time.Time
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = jsonTime(v)
	return nil
}
