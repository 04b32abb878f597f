package hydra

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
)

// app is Hydra's login and consent app (its urls.login and urls.consent):
// it accepts every login, as the request's login_hint or the instance's
// Subject, and every consent, granting the requested scopes and, as the
// token's audience, the RFC 8707 resource of the authorization request.
type app struct {
	h   *Instance
	srv *httptest.Server
	url string
}

func startApp(t testing.TB, h *Instance) *app {
	a := &app{h: h}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", a.login)
	mux.HandleFunc("GET /consent", a.consent)
	mux.HandleFunc("GET /error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "hydra error: "+r.URL.Query().Get("error")+": "+r.URL.Query().Get("error_description"), http.StatusBadRequest)
	})
	a.srv = httptest.NewServer(mux)
	a.url = a.srv.URL
	t.Cleanup(a.srv.Close)
	return a
}

// loginRequest and consentRequest are what the app reads of Hydra's
// login and consent requests.
type loginRequest struct {
	RequestURL  string `json:"request_url"`
	OIDCContext struct {
		LoginHint string `json:"login_hint"`
	} `json:"oidc_context"`
}

type consentRequest struct {
	RequestURL        string   `json:"request_url"`
	RequestedScope    []string `json:"requested_scope"`
	RequestedAudience []string `json:"requested_access_token_audience"`
}

type redirect struct {
	RedirectTo string `json:"redirect_to"`
}

func (a *app) login(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("login_challenge")
	q := "?login_challenge=" + url.QueryEscape(challenge)
	var lr loginRequest
	if err := a.h.adminDo(r.Context(), http.MethodGet, "/admin/oauth2/auth/requests/login"+q, nil, &lr); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	subject := lr.OIDCContext.LoginHint
	if subject == "" {
		subject = a.h.opts.Subject
	}
	a.accept(r.Context(), w, "/admin/oauth2/auth/requests/login/accept"+q, map[string]any{"subject": subject, "remember": false})
}

func (a *app) consent(w http.ResponseWriter, r *http.Request) {
	challenge := r.URL.Query().Get("consent_challenge")
	q := "?consent_challenge=" + url.QueryEscape(challenge)
	var cr consentRequest
	if err := a.h.adminDo(r.Context(), http.MethodGet, "/admin/oauth2/auth/requests/consent"+q, nil, &cr); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	audience := slices.Clone(cr.RequestedAudience)
	if u, err := url.Parse(cr.RequestURL); err == nil {
		for _, res := range u.Query()["resource"] {
			if !slices.Contains(audience, res) {
				audience = append(audience, res)
			}
		}
	}
	a.accept(r.Context(), w, "/admin/oauth2/auth/requests/consent/accept"+q, map[string]any{
		"grant_scope": cr.RequestedScope, "grant_access_token_audience": audience, "remember": false,
	})
}

// accept PUTs an acceptance and sends the browser where Hydra says.
func (a *app) accept(ctx context.Context, w http.ResponseWriter, path string, body any) {
	var rd redirect
	if err := a.h.adminDo(ctx, http.MethodPut, path, body, &rd); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Location", rd.RedirectTo)
	w.WriteHeader(http.StatusFound)
}
