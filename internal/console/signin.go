package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/scratchrun/scratchrun/internal/store"
)

// signinFormBytes bounds a sign-in form: a token and a CSRF token.
const signinFormBytes = 4 << 10

// signinCookieAge is how long a sign-in form stays good.
const signinCookieAge = 3600

// signinData fills the sign-in page.
type signinData struct {
	CSRF  string
	Error string
}

var signinTemplate = template.Must(template.ParseFS(pages, "pages/signin.html"))

// index is /console/: the console, or the sign-in page for a browser
// without a session.
func (h *handlers) index(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.sessions.lookup(cookieValue(r, sessionCookie)); !ok {
		http.Redirect(w, r, basePath+"/signin", http.StatusSeeOther)
		return
	}
	servePage(w, "pages/index.html")
}

// signinPage is GET /console/signin: the form, with a fresh
// double-submitted CSRF token (in a cookie and in the form).
func (h *handlers) signinPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.sessions.lookup(cookieValue(r, sessionCookie)); ok {
		http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
		return
	}
	h.renderSignin(w, r, http.StatusOK, "")
}

func (h *handlers) renderSignin(w http.ResponseWriter, r *http.Request, status int, message string) {
	token := randomToken()
	http.SetCookie(w, newCookie(r, signinCookie, token, signinCookieAge))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := signinTemplate.Execute(w, signinData{CSRF: token, Error: message}); err != nil {
		h.log.Error("console: render the sign-in page", "err", err)
	}
}

// signin is POST /console/signin: the operator token for a session.
func (h *handlers) signin(w http.ResponseWriter, r *http.Request) {
	ip := clientIP(r)
	if wait, blocked := h.throttle.blocked(ip); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		h.renderSignin(w, r, http.StatusTooManyRequests, "Too many failed sign-ins from this address: try again in "+
			strconv.Itoa(int(wait.Seconds()+0.999))+" seconds.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, signinFormBytes)
	if err := r.ParseForm(); err != nil {
		h.renderSignin(w, r, http.StatusBadRequest, "The sign-in form could not be read: send it from this page.")
		return
	}
	want := cookieValue(r, signinCookie)
	got := r.PostForm.Get("csrf")
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		h.renderSignin(w, r, http.StatusForbidden, "The sign-in form expired or did not come from this page: sign in again.")
		return
	}
	token := r.PostForm.Get("token")
	if !h.tokenMatches(token) {
		h.throttle.failed(ip)
		h.log.Warn("console: sign-in refused", "remote", ip)
		msg := "That is not the operator token."
		if strings.HasPrefix(strings.TrimSpace(token), store.KeyPrefix) {
			msg = "API keys cannot sign in to the console: use the operator token (--console-token / SCRATCHRUN_CONSOLE_TOKEN)."
		}
		h.renderSignin(w, r, http.StatusUnauthorized, msg)
		return
	}
	// A new session id at every sign-in: one planted before cannot be
	// carried into a signed-in session.
	if old := cookieValue(r, sessionCookie); old != "" {
		h.sessions.end(old)
	}
	id, _ := h.sessions.create()
	http.SetCookie(w, newCookie(r, sessionCookie, id, 0))
	http.SetCookie(w, newCookie(r, signinCookie, "", -1))
	h.log.Info("console: signed in", "remote", ip)
	http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
}

// tokenMatches compares in constant time, over hashes so that the
// comparison takes as long whatever the length of what was sent.
func (h *handlers) tokenMatches(token string) bool {
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(h.cfg.Token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// signout is POST /console/api/signout.
func (h *handlers) signout(w http.ResponseWriter, r *http.Request) {
	id, _ := sessionFrom(r.Context())
	h.sessions.end(id)
	http.SetCookie(w, newCookie(r, sessionCookie, "", -1))
	h.log.Info("console: signed out", "remote", clientIP(r))
	writeJSON(w, http.StatusOK, map[string]bool{"signed_out": true})
}

// sessionInfo is GET /console/api/session: what the pages need.
type sessionInfo struct {
	CSRF string `json:"csrf"`
	// ServerURL is this server as the browser reached it: the snippets'
	// and examples' URL.
	ServerURL   string `json:"server_url"`
	IdleSeconds int    `json:"idle_seconds"`
	ExpiresAt   string `json:"expires_at"`
}

func (h *handlers) session(w http.ResponseWriter, r *http.Request) {
	_, s := sessionFrom(r.Context())
	writeJSON(w, http.StatusOK, sessionInfo{
		CSRF: s.csrf, ServerURL: serverURL(r), IdleSeconds: int(h.cfg.SessionIdle.Seconds()),
		ExpiresAt: s.created.Add(h.cfg.SessionMax).UTC().Format(time.RFC3339),
	})
}

// serverURL is the server as the browser reached it.
func serverURL(r *http.Request) string {
	scheme := "http"
	if secureRequest(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// clientIP is the address a request came from, without its port.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Sign-in throttling: each address may fail signinBurst times at once, and
// then once every signinRefill, so that guessing even a short token takes
// forever while an operator who mistypes is barely slowed.
const (
	signinBurst         = 10
	signinRefill        = 6 * time.Second
	maxThrottledClients = 4096
)

// signinThrottle counts failed sign-ins per client address.
type signinThrottle struct {
	now  func() time.Time
	mu   sync.Mutex
	byIP map[string]*rate.Limiter
}

func newSigninThrottle(now func() time.Time) *signinThrottle {
	return &signinThrottle{now: now, byIP: map[string]*rate.Limiter{}}
}

// blocked reports whether ip has used up its failures, and how long until
// it may try again.
func (t *signinThrottle) blocked(ip string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.byIP[ip]
	if !ok {
		return 0, false
	}
	tokens := l.TokensAt(t.now())
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) * float64(signinRefill)), true
}

// failed counts a failed sign-in of ip.
func (t *signinThrottle) failed(ip string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.byIP[ip]
	if !ok {
		if len(t.byIP) >= maxThrottledClients {
			// Forget the addresses that are back to a full allowance.
			for k, v := range t.byIP {
				if v.TokensAt(now) >= signinBurst {
					delete(t.byIP, k)
				}
			}
			// Still full (many addresses failing at once): forget one,
			// rather than grow without bound.
			for k := range t.byIP {
				if len(t.byIP) < maxThrottledClients {
					break
				}
				delete(t.byIP, k)
			}
		}
		l = rate.NewLimiter(rate.Every(signinRefill), signinBurst)
		t.byIP[ip] = l
	}
	l.AllowN(now, 1)
}
