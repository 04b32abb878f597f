package oauthclient

import (
	"fmt"
	"html"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// callbackPath is the redirect URI's path on the loopback listener.
const callbackPath = "/callback"

// callbackResult is what the browser's redirect brought: a code, or why
// there is none.
type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

// callback receives the authorization server's redirect for one sign-in.
// It hands on only a redirect that carries the state this sign-in sent (a
// request without it could be any page's: RFC 6749 §10.12) and, when the
// server names its issuer, the issuer this sign-in went to (RFC 9207: a
// mix-up of servers). The SDK checks both again; checking here too lets
// the browser tab say what went wrong.
type callback struct {
	state, issuer string
	once          sync.Once
	done          chan callbackResult
}

func newCallback(state, issuer string) *callback {
	return &callback{state: state, issuer: issuer, done: make(chan callbackResult, 1)}
}

// deliver hands on the first outcome; later redirects (a reload of the
// tab) change nothing.
func (c *callback) deliver(r callbackResult) (first bool) {
	c.once.Do(func() { c.done <- r; first = true })
	return first
}

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != callbackPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	if q.Get("state") != c.state {
		// Not delivered: the sign-in this process started goes on
		// waiting for its own redirect.
		page(w, http.StatusBadRequest, "Sign-in not accepted",
			"This response does not belong to the sign-in scratchrun started (its state does not match). Nothing was signed in.")
		return
	}
	if e := q.Get("error"); e != "" {
		msg := e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		c.deliver(callbackResult{err: fmt.Errorf("the authorization server refused the sign-in: %s", msg)})
		page(w, http.StatusOK, "Sign-in refused", "The server said: "+msg+". You can close this tab.")
		return
	}
	iss := q.Get("iss")
	if iss != "" && c.issuer != "" && iss != c.issuer {
		c.deliver(callbackResult{err: fmt.Errorf("the sign-in came back from issuer %q, not %q, which scratchrun went to", iss, c.issuer)})
		page(w, http.StatusBadRequest, "Sign-in not accepted",
			"The response names another authorization server than the one scratchrun asked. Nothing was signed in.")
		return
	}
	code := q.Get("code")
	if code == "" {
		c.deliver(callbackResult{err: fmt.Errorf("the authorization server's redirect carried no code")})
		page(w, http.StatusBadRequest, "Sign-in failed", "The response carried no authorization code.")
		return
	}
	if !c.deliver(callbackResult{res: &auth.AuthorizationResult{Code: code, State: c.state, Iss: iss}}) {
		page(w, http.StatusOK, "Already signed in", "This sign-in is already complete. You can close this tab.")
		return
	}
	page(w, http.StatusOK, "Signed in", "scratchrun is signed in to the server. You can close this tab.")
}

// page writes a small HTML page that no cache keeps and that sends no
// Referer onwards (the URL holds the code).
func page(w http.ResponseWriter, status int, title, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>ScratchRun: %s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(text))
}
