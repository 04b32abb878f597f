package authserver

import (
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// authRequest is an authorization request as kept in Storage (as JSON),
// from /authorize to the exchange of its code; it is op's AuthRequest.
type authRequest struct {
	ID           string    `json:"id"`
	ClientID     string    `json:"client_id"`
	RedirectURI  string    `json:"redirect_uri"`
	State        string    `json:"state,omitempty"`
	Nonce        string    `json:"nonce,omitempty"`
	Scopes       []string  `json:"scopes"`
	ResponseMode string    `json:"response_mode,omitempty"`
	Challenge    string    `json:"code_challenge"`
	Resource     string    `json:"resource"`
	Created      time.Time `json:"created"`
	// CSRF is the consent form's token: a POST without it is not from the
	// page this server showed for this request.
	CSRF string `json:"csrf"`
	// Subject is the ScratchRun key ID the person proved, once Done.
	Subject  string    `json:"subject,omitempty"`
	AuthTime time.Time `json:"auth_time,omitzero"`
	IsDone   bool      `json:"done,omitempty"`
}

func (a *authRequest) GetID() string         { return a.ID }
func (a *authRequest) GetACR() string        { return "" }
func (a *authRequest) GetAMR() []string      { return nil }
func (a *authRequest) GetAudience() []string { return []string{a.Resource} }
func (a *authRequest) GetAuthTime() time.Time {
	return a.AuthTime
}
func (a *authRequest) GetClientID() string { return a.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.Challenge, Method: oidc.CodeChallengeMethodS256}
}
func (a *authRequest) GetNonce() string                   { return a.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a *authRequest) GetResponseMode() oidc.ResponseMode {
	return oidc.ResponseMode(a.ResponseMode)
}
func (a *authRequest) GetScopes() []string { return a.Scopes }
func (a *authRequest) GetState() string    { return a.State }
func (a *authRequest) GetSubject() string  { return a.Subject }
func (a *authRequest) Done() bool          { return a.IsDone }

// refreshRequest is what a refresh token renews, kept (as JSON) beside the
// token's hash; it is op's RefreshTokenRequest.
type refreshRequest struct {
	Family   string    `json:"family"`
	Subject  string    `json:"subject"`
	ClientID string    `json:"client_id"`
	Scopes   []string  `json:"scopes"`
	Audience []string  `json:"audience"`
	AuthTime time.Time `json:"auth_time"`
}

func (r *refreshRequest) GetAMR() []string            { return nil }
func (r *refreshRequest) GetAudience() []string       { return r.Audience }
func (r *refreshRequest) GetAuthTime() time.Time      { return r.AuthTime }
func (r *refreshRequest) GetClientID() string         { return r.ClientID }
func (r *refreshRequest) GetScopes() []string         { return r.Scopes }
func (r *refreshRequest) GetSubject() string          { return r.Subject }
func (r *refreshRequest) SetCurrentScopes(s []string) { r.Scopes = s }
