package authserver

import (
	"crypto/subtle"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/scratchrun/scratchrun/internal/store"
)

// The consent page, which op leaves to its user: the person sees which
// client asks and where it will send them back, and proves they may use
// this server by pasting one of its API keys; the tokens then act as that
// key.

var consentTemplate = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect {{.ClientName}} to ScratchRun</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 3rem auto; padding: 0 1rem">
<h1>Connect <span id="client_name">{{.ClientName}}</span> to ScratchRun</h1>
<p>An application wants to run code on this ScratchRun server as one of its API keys.
When you allow it, you will be sent back to <strong id="redirect_host">{{.RedirectHost}}</strong>.</p>
{{if .Localhost}}<p id="localhost_warning" style="border-left: 4px solid #c60; padding-left: .5rem">
This application runs on your own computer (it sends you back to {{.RedirectHost}}). Allow it only if you
started it yourself just now: any program on this computer can claim any name.</p>{{end}}
<p style="color: #555">Client ID: <code id="client_id">{{.ClientID}}</code></p>
{{if .Error}}<p id="error" role="alert" style="color: #b00">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="id" value="{{.ID}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<p><label for="api_key">ScratchRun API key</label><br>
<input id="api_key" name="api_key" type="password" autocomplete="off" size="50" autofocus></p>
<p><button id="allow" type="submit" name="action" value="allow">Allow</button>
<button id="deny" type="submit" name="action" value="deny">Deny</button></p>
</form>
<p style="color: #555">The application's tokens act as the key you paste, with its limits. Revoking the key ends them.</p>
</body></html>
`))

type consentView struct {
	ID, CSRF, Action, ClientID, ClientName, RedirectHost, Error string
	Localhost                                                   bool
}

func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.consentForm(w, r, r.URL.Query().Get("id"), "", http.StatusOK)
	case http.MethodPost:
		s.consentPost(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.errorPage(w, http.StatusMethodNotAllowed, "invalid_request", "use GET or POST")
	}
}

func (s *Server) consentForm(w http.ResponseWriter, r *http.Request, id, problem string, status int) {
	a, c, ok := s.consentRequest(w, r, id)
	if !ok {
		return
	}
	host := ""
	if u, err := url.Parse(a.RedirectURI); err == nil {
		host = u.Host
	}
	name := c.name
	if name == "" {
		name = "An unnamed application"
	}
	pageHeaders(w)
	w.WriteHeader(status)
	consentTemplate.Execute(w, consentView{
		ID: a.ID, CSRF: a.CSRF, Action: pathConsent, ClientID: c.id, ClientName: name,
		RedirectHost: host, Localhost: isLoopbackRedirect(a.RedirectURI), Error: problem,
	})
}

// consentRequest loads the pending authorization request id and its
// client, or answers an error page.
func (s *Server) consentRequest(w http.ResponseWriter, r *http.Request, id string) (*authRequest, *client, bool) {
	a, err := s.storage.authRequest(r.Context(), id)
	if err != nil || a.IsDone {
		if err != nil && !errors.Is(err, store.ErrOAuthNotFound) {
			s.log.ErrorContext(r.Context(), "oauth: load authorization request", "err", err)
		}
		s.errorPage(w, http.StatusBadRequest, "invalid_request", "this authorization request is unknown, finished or expired: start again from the application")
		return nil, nil, false
	}
	if !s.sameBrowser(r, a) {
		s.errorPage(w, http.StatusForbidden, "access_denied",
			"this authorization request was started in another browser: start again from the application, in this browser")
		return nil, nil, false
	}
	c, err := s.clients.get(r.Context(), a.ClientID)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "invalid_client", "the client of this request cannot be found")
		return nil, nil, false
	}
	return a, c, true
}

func isLoopbackRedirect(uri string) bool {
	u, err := url.Parse(uri)
	return err == nil && isLoopbackHost(u.Hostname())
}

// crossSite reports whether a POST came from another site's page: the
// CSRF token is the defence, and this refuses such a POST before even
// looking at it (browsers send Sec-Fetch-Site and Origin; a client with
// neither is not a browser, and has the token or not).
func (s *Server) crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != s.cfg.Issuer {
		return true
	}
	return false
}

func (s *Server) consentPost(w http.ResponseWriter, r *http.Request) {
	if s.crossSite(r) {
		s.errorPage(w, http.StatusForbidden, "access_denied", "the consent form was posted from another site")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, http.StatusBadRequest, "invalid_request", "the form cannot be parsed")
		return
	}
	id := r.PostForm.Get("id")
	a, c, ok := s.consentRequest(w, r, id)
	if !ok {
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(a.CSRF)) != 1 {
		s.errorPage(w, http.StatusForbidden, "access_denied", "the consent form's token is wrong: reload the page from the application")
		return
	}
	if r.PostForm.Get("action") == "deny" {
		s.storage.DeleteAuthRequest(r.Context(), a.ID)
		s.log.InfoContext(r.Context(), "oauth: consent denied", "client_id", c.id)
		http.Redirect(w, r, denied(a, s.cfg.Issuer), http.StatusFound)
		return
	}
	k, err := s.cfg.Keys.Authenticate(r.Context(), strings.TrimSpace(r.PostForm.Get("api_key")))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.ErrorContext(r.Context(), "oauth: authenticate key", "err", err)
		}
		// No word on whether such a key exists, was revoked or is malformed.
		s.consentForm(w, r, id, "That is not an active API key of this server.", http.StatusUnauthorized)
		return
	}
	a.Subject, a.AuthTime, a.IsDone = k.ID, time.Now(), true
	if err := s.storage.putAuthRequest(r.Context(), a); err != nil {
		s.log.ErrorContext(r.Context(), "oauth: save consent", "err", err)
		s.errorPage(w, http.StatusInternalServerError, "server_error", "cannot save your consent")
		return
	}
	s.log.InfoContext(r.Context(), "oauth: consent given", "client_id", c.id, "key_id", k.ID)
	// The code goes to the client's redirect from this answer, to this
	// browser only. (op's own callback endpoint would hand it to whoever
	// asks first with the request's id, which a third party who started
	// the request knows: it is not mounted.)
	ctx := op.ContextWithIssuer(r.Context(), s.cfg.Issuer)
	op.AuthResponse(a, s.provider, &issWriter{ResponseWriter: w, s: s}, r.WithContext(ctx))
}

// denied is the redirect that tells the client the person said no.
func denied(a *authRequest, iss string) string {
	u, err := url.Parse(a.RedirectURI)
	if err != nil {
		return a.RedirectURI
	}
	q := u.Query()
	q.Set("error", "access_denied")
	q.Set("error_description", "the person denied the request")
	if a.State != "" {
		q.Set("state", a.State)
	}
	q.Set("iss", iss)
	u.RawQuery = q.Encode()
	return u.String()
}
