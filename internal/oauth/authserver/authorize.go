package authserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// authorize checks, before op does, what must never be answered by a
// redirect: the client and its redirect URI. op refuses those too, but as
// a bare text line; here they get an error page naming the OAuth error.
// It also fills the gaps op has at this step: an absent scope means this
// server's one (op refuses an empty scope, and MCP clients send none
// unless told), and the RFC 8707 resource values reach CreateAuthRequest.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		s.errorPage(w, http.StatusMethodNotAllowed, "invalid_request", "use GET or POST")
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	}
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, http.StatusBadRequest, "invalid_request", "the request cannot be parsed")
		return
	}
	clientID, redirect := r.Form.Get("client_id"), r.Form.Get("redirect_uri")
	if clientID == "" {
		s.errorPage(w, http.StatusBadRequest, "invalid_request", "client_id is missing")
		return
	}
	c, err := s.clients.get(r.Context(), clientID)
	if err != nil {
		var doc *errMetadataDocument
		switch {
		case errors.As(err, &doc):
			s.errorPage(w, http.StatusBadRequest, "invalid_client", "the client's "+doc.Error())
		case errors.Is(err, errUnknownClient):
			s.errorPage(w, http.StatusBadRequest, "invalid_client", "no client has this client_id (register it first)")
		default:
			s.log.ErrorContext(r.Context(), "oauth: look up client", "err", err)
			s.errorPage(w, http.StatusInternalServerError, "server_error", "cannot look the client up")
		}
		return
	}
	if redirect == "" {
		s.errorPage(w, http.StatusBadRequest, "invalid_request", "redirect_uri is missing")
		return
	}
	if !c.hasRedirect(redirect) {
		s.errorPage(w, http.StatusBadRequest, "invalid_request", "redirect_uri is not one the client registered (they must match exactly)")
		return
	}
	if strings.TrimSpace(r.Form.Get("scope")) == "" {
		r.Form.Set("scope", s.cfg.Scope)
	}
	r = r.WithContext(withResources(r.Context(), r.Form["resource"]))
	s.withIss(s.provider).ServeHTTP(&browserBinder{ResponseWriter: w, s: s, r: r}, r)
}

// token checks what op does not before op answers: the grant types this
// server has (op would also try others it supports), and the RFC 8707
// resource, which op does not read.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		s.provider.ServeHTTP(w, r) // op's CORS answers the preflight
		return
	}
	if r.Method != http.MethodPost {
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	if r.URL.RawQuery != "" {
		// op reads the token request from the query too; a code, verifier
		// or refresh token in a URL ends up in logs.
		writeJSONError(w, http.StatusBadRequest, "invalid_request", "the token request goes in the POST body, not the query string")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid_request", "the request body cannot be parsed")
		return
	}
	switch gt := r.PostForm.Get("grant_type"); gt {
	case string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken):
	case "":
		writeJSONError(w, http.StatusBadRequest, "invalid_request", "grant_type is missing")
		return
	default:
		writeJSONError(w, http.StatusBadRequest, "unsupported_grant_type", "this server has authorization_code and refresh_token only")
		return
	}
	if err := s.storage.checkResources(r.Form["resource"]); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid_target", err.(*oidc.Error).Description)
		return
	}
	// Held back to add a description to an error op gives none (describe).
	rec := &heldResponse{header: w.Header(), status: http.StatusOK}
	s.provider.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.status >= 400 {
		body = describe(body, r.PostForm.Get("grant_type"))
		w.Header().Del("Content-Length")
	}
	w.WriteHeader(rec.status)
	w.Write(body)
}

// heldResponse keeps a (small: a token answer) response until it is done.
type heldResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (h *heldResponse) Header() http.Header { return h.header }
func (h *heldResponse) WriteHeader(status int) {
	if !h.wrote {
		h.status, h.wrote = status, true
	}
}
func (h *heldResponse) Write(b []byte) (int, error) {
	h.wrote = true
	if h.body.Len()+len(b) > maxBody {
		return 0, errors.New("token answer too large")
	}
	return h.body.Write(b)
}

// describe adds an error_description to an error op answered without one
// (it has none for a refresh token it could not find, whatever the cause):
// every refusal says why.
func describe(body []byte, grant string) []byte {
	var e map[string]any
	if json.Unmarshal(body, &e) != nil || e["error"] == nil || e["error_description"] != nil {
		return body
	}
	desc := "the request was refused"
	switch {
	case e["error"] == "invalid_grant" && grant == string(oidc.GrantTypeRefreshToken):
		desc = "the refresh token is unknown, expired, already used or revoked (a reused refresh token ends its grant)"
	case e["error"] == "invalid_grant":
		desc = "the code is unknown, expired or already used, or does not match the verifier, client or redirect_uri"
	case e["error"] == "invalid_client":
		desc = "unknown client"
	case e["error"] == "unauthorized_client":
		desc = "the client is not registered for this grant type"
	}
	e["error_description"] = desc
	out, err := json.Marshal(e)
	if err != nil {
		return body
	}
	return out
}

// withIss adds RFC 9207's iss to every redirect h sends to a client
// (success or error), so that a client talking to several servers can
// tell whose answer it got; op does not. A redirect to this server's own
// consent page is left alone.
func (s *Server) withIss(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&issWriter{ResponseWriter: w, s: s}, r)
	})
}

type issWriter struct {
	http.ResponseWriter
	s *Server
}

func (w *issWriter) WriteHeader(status int) {
	if status == http.StatusFound || status == http.StatusSeeOther {
		if loc := w.Header().Get("Location"); loc != "" && !strings.HasPrefix(loc, w.s.cfg.Issuer+pathConsent+"?") {
			w.Header().Set("Location", addIss(loc, w.s.cfg.Issuer))
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *issWriter) Write(b []byte) (int, error) { return w.ResponseWriter.Write(b) }

// addIss adds iss to the query of the redirect loc.
func addIss(loc, iss string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	q := u.Query()
	q.Set("iss", iss)
	u.RawQuery = q.Encode()
	return u.String()
}

var errorTemplate = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization refused</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 36rem; margin: 3rem auto; padding: 0 1rem">
<h1>Authorization refused</h1>
<p>The application that sent you here made a request this ScratchRun server cannot accept, so you were not sent back to it.</p>
<p><code id="error">{{.Code}}</code>: <span id="error_description">{{.Desc}}</span></p>
</body></html>
`))

// errorPage answers a refused authorization with a page for the person,
// never a redirect: the client or its redirect URI is not to be trusted.
func (s *Server) errorPage(w http.ResponseWriter, status int, code, desc string) {
	pageHeaders(w)
	w.WriteHeader(status)
	errorTemplate.Execute(w, struct{ Code, Desc string }{code, desc})
}

// pageHeaders are the headers of the server's HTML pages: never cached,
// never framed (clickjacking the consent form), no referrer beyond this
// origin (the URL holds the request's id). Not "no-referrer": with it a
// browser sends the consent form's POST with "Origin: null", which the
// server's origin guard refuses as it must.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
}
