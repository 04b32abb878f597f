package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/scratchrun/scratchrun/internal/store"
)

// opStorage is op's Storage over ours. Beyond keeping things, it fills
// gaps of op: PKCE S256 required, the RFC 8707 resource checked,
// offline_access implied for clients registered with refresh_token, codes
// and refresh tokens good once (a replay ends the grant), and every token
// tied to a key that must still be active.
type opStorage struct {
	cfg     Config
	key     signingKey
	clients *clients
}

var _ op.Storage = (*opStorage)(nil)

// s256Challenge is what an S256 code challenge looks like: the base64url
// of a SHA-256, unpadded (RFC 7636 section 4.2).
var s256Challenge = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// resourceKey carries the request's RFC 8707 resource values from the
// authorize handler to CreateAuthRequest: op's request types have no field
// for them (its decoder drops unknown parameters).
type resourceKey struct{}

func withResources(ctx context.Context, rs []string) context.Context {
	return context.WithValue(ctx, resourceKey{}, rs)
}

// checkResources returns the resource a request names, refusing any but
// the configured one. None names the configured one: clients must send it
// (MCP authorization), but older ones do not and there is only one.
func (s *opStorage) checkResources(rs []string) error {
	for _, r := range rs {
		if !oauthex.MatchesResource([]string{s.cfg.Resource}, r) {
			return oidc.ErrInvalidTarget().WithDescription("this server issues tokens only for the resource %s", s.cfg.Resource)
		}
	}
	return nil
}

func (s *opStorage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	// op accepts a plain challenge, or none from a client it thinks
	// confidential; OAuth 2.1 and MCP want S256 from everyone.
	if req.CodeChallenge == "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge is required (PKCE with S256)")
	}
	if req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge_method must be S256")
	}
	if !s256Challenge.MatchString(req.CodeChallenge) {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge must be an S256 challenge: 43 characters of base64url")
	}
	if len(req.State) > maxStateLen || len(req.Nonce) > maxStateLen {
		return nil, oidc.ErrInvalidRequest().WithDescription("state and nonce may have at most %d characters", maxStateLen)
	}
	// Anyone may start a request (any client's id will do), and each is a
	// row until it expires: their number is bounded.
	if n, err := s.cfg.State.CountOAuthAuthRequests(ctx); err != nil {
		return nil, oidc.ErrServerError().WithDescription("cannot count pending requests")
	} else if n >= maxPendingRequests {
		s.cfg.Logger.WarnContext(ctx, "oauth: authorization refused: the bound on pending requests is reached", "max", maxPendingRequests)
		return nil, (&oidc.Error{ErrorType: "temporarily_unavailable"}).WithDescription("this server has as many sign-ins pending as it keeps: try again in a few minutes")
	}
	// The iss of RFC 9207 is added to the query; a form_post or fragment
	// answer would go without it.
	if req.ResponseMode != "" && req.ResponseMode != oidc.ResponseModeQuery {
		return nil, oidc.ErrInvalidRequest().WithDescription("response_mode must be query")
	}
	rs, _ := ctx.Value(resourceKey{}).([]string)
	if err := s.checkResources(rs); err != nil {
		return nil, err
	}
	c, err := s.clients.get(ctx, req.ClientID)
	if err != nil {
		return nil, oidc.ErrInvalidClient().WithDescription("unknown client")
	}
	scopes := slices.DeleteFunc(slices.Clone(req.Scopes), func(sc string) bool {
		return sc != s.cfg.Scope && sc != oidc.ScopeOfflineAccess
	})
	if !slices.Contains(scopes, s.cfg.Scope) {
		scopes = append(scopes, s.cfg.Scope)
	}
	// op issues a refresh token only when offline_access was asked for;
	// MCP clients (the TypeScript SDK among them) do not ask, but register
	// the refresh_token grant when they want one.
	if slices.Contains(c.grantTypes, oidc.GrantTypeRefreshToken) && !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(scopes, oidc.ScopeOfflineAccess)
	}
	a := &authRequest{
		ID: "ar_" + randomToken(24), ClientID: req.ClientID, RedirectURI: req.RedirectURI,
		State: req.State, Nonce: req.Nonce, Scopes: scopes, ResponseMode: string(req.ResponseMode),
		Challenge: req.CodeChallenge, Resource: s.cfg.Resource, Created: time.Now(), CSRF: randomToken(24),
	}
	if err := s.putAuthRequest(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

func (s *opStorage) putAuthRequest(ctx context.Context, a *authRequest) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.cfg.State.PutOAuthAuthRequest(ctx, store.OAuthAuthRequest{ID: a.ID, Data: string(data), Expires: a.Created.Add(authRequestTTL)})
}

func decodeAuthRequest(r store.OAuthAuthRequest) (*authRequest, error) {
	a := new(authRequest)
	if err := json.Unmarshal([]byte(r.Data), a); err != nil {
		return nil, fmt.Errorf("authorization request %s: %w", r.ID, err)
	}
	return a, nil
}

func (s *opStorage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	return s.authRequest(ctx, id)
}

func (s *opStorage) authRequest(ctx context.Context, id string) (*authRequest, error) {
	r, err := s.cfg.State.OAuthAuthRequest(ctx, id)
	if err != nil {
		return nil, err
	}
	return decodeAuthRequest(r)
}

func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.cfg.State.TakeOAuthCode(ctx, hashToken(code))
	if errors.Is(err, store.ErrOAuthUsed) {
		// OAuth 2.1 section 4.1.3: a code used twice ends what it
		// granted. The grant's refresh tokens are the family named by
		// the request.
		if err := s.cfg.State.RevokeOAuthGrant(ctx, r.ID); err != nil {
			return nil, err
		}
		s.cfg.Logger.WarnContext(ctx, "oauth: an authorization code was replayed; its grant is revoked", "client_id", clientOf(r))
		return nil, errors.New("code already used")
	}
	if err != nil {
		return nil, err
	}
	return decodeAuthRequest(r)
}

// clientOf names the client of a stored request, for a log line.
func clientOf(r store.OAuthAuthRequest) string {
	a, err := decodeAuthRequest(r)
	if err != nil {
		return ""
	}
	return a.ClientID
}

func (s *opStorage) SaveAuthCode(ctx context.Context, id, code string) error {
	return s.cfg.State.SetOAuthCode(ctx, id, hashToken(code))
}

func (s *opStorage) DeleteAuthRequest(ctx context.Context, id string) error {
	return s.cfg.State.DeleteOAuthAuthRequest(ctx, id)
}

// activeKey refuses a token request for a key that is no longer active:
// revoking the key ends its tokens.
func (s *opStorage) activeKey(ctx context.Context, id string) error {
	k, err := s.cfg.Keys.KeyByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !k.Active()) {
		return oidc.ErrInvalidGrant().WithDescription("the API key this grant acts as is revoked")
	}
	return err
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	if err := s.activeKey(ctx, req.GetSubject()); err != nil {
		return "", time.Time{}, err
	}
	return accessTokenPrefix + randomToken(16), time.Now().Add(s.cfg.AccessTokenTTL), nil
}

// accessTokenPrefix starts the jti of every access token: an ID token op
// signs with the same key (it has no jti) is not one.
const accessTokenPrefix = "at_"

func (s *opStorage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, _ string) (string, string, time.Time, error) {
	id, exp, err := s.CreateAccessToken(ctx, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	// The token being renewed was taken (and so retired) by
	// TokenRequestByRefreshToken; this is its successor in the family.
	rr := &refreshRequest{Subject: req.GetSubject(), Scopes: req.GetScopes(), Audience: req.GetAudience()}
	switch r := req.(type) {
	case *authRequest:
		rr.Family, rr.ClientID, rr.AuthTime = r.ID, r.ClientID, r.AuthTime
	case *refreshRequest:
		rr.Family, rr.ClientID, rr.AuthTime = r.Family, r.ClientID, r.AuthTime
	default:
		return "", "", time.Time{}, fmt.Errorf("refresh token for a %T", req)
	}
	data, err := json.Marshal(rr)
	if err != nil {
		return "", "", time.Time{}, err
	}
	secret := refreshTokenPrefix + randomToken(32)
	err = s.cfg.State.AddOAuthRefresh(ctx, store.OAuthRefresh{
		Hash: hashToken(secret), Family: rr.Family, KeyID: rr.Subject, ClientID: rr.ClientID,
		Data: string(data), Expires: time.Now().Add(s.cfg.RefreshTokenTTL),
	})
	if err != nil {
		return "", "", time.Time{}, err
	}
	return id, secret, exp, nil
}

// refreshTokenPrefix marks ScratchRun's refresh tokens (for secret
// scanners and people), as KeyPrefix does its keys.
const refreshTokenPrefix = "srrt_"

func (s *opStorage) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	r, err := s.cfg.State.TakeOAuthRefresh(ctx, hashToken(token))
	if errors.Is(err, store.ErrOAuthUsed) {
		s.cfg.Logger.WarnContext(ctx, "oauth: a refresh token was reused; its grant is revoked")
		return nil, errors.New("refresh token already used; the grant is revoked")
	}
	if err != nil {
		return nil, err
	}
	if err := s.activeKey(ctx, r.KeyID); err != nil {
		if rerr := s.cfg.State.RevokeOAuthGrant(ctx, r.Family); rerr != nil {
			return nil, rerr
		}
		return nil, err
	}
	rr := new(refreshRequest)
	if err := json.Unmarshal([]byte(r.Data), rr); err != nil {
		return nil, fmt.Errorf("refresh token data: %w", err)
	}
	return rr, nil
}

func (s *opStorage) TerminateSession(context.Context, string, string) error { return nil }

// grantTokenID is what GetRefreshTokenInfo hands op as a refresh token's
// id, for RevokeToken: the grant, so that revoking a refresh token ends
// the grant (RFC 7009 section 2.1 allows it, and there is nothing else
// left to revoke: access tokens are JWTs that expire soon).
const grantTokenID = "grant:"

func (s *opStorage) RevokeToken(ctx context.Context, tokenOrID, userID, _ string) *oidc.Error {
	family, ok := strings.CutPrefix(tokenOrID, grantTokenID)
	if !ok || userID == "" {
		// An access token or an unknown token: RFC 7009 answers 200.
		return nil
	}
	if err := s.cfg.State.RevokeOAuthGrant(ctx, family); err != nil {
		return oidc.ErrServerError()
	}
	return nil
}

func (s *opStorage) GetRefreshTokenInfo(ctx context.Context, clientID, token string) (string, string, error) {
	r, err := s.cfg.State.OAuthRefresh(ctx, hashToken(token))
	if errors.Is(err, store.ErrOAuthNotFound) || (err == nil && r.ClientID != clientID) {
		return "", "", op.ErrInvalidRefreshToken
	}
	if err != nil {
		return "", "", err
	}
	return r.KeyID, grantTokenID + r.Family, nil
}

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) { return s.key, nil }

func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.ES256}, nil
}

func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.key}}, nil
}

func (s *opStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	return s.clients.get(ctx, id)
}

func (s *opStorage) AuthorizeClientIDSecret(context.Context, string, string) error {
	return errors.New("only public clients (token_endpoint_auth_method none)")
}

// SetUserinfoFromScopes gives the ID token op issues beside every access
// token its subject (op would leave it without one). That ID token is no
// access token: the Verifier refuses it (it has no "at_" jti).
func (s *opStorage) SetUserinfoFromScopes(_ context.Context, u *oidc.UserInfo, userID, _ string, _ []string) error {
	u.Subject = userID
	return nil
}

func (s *opStorage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errors.New("no userinfo")
}

func (s *opStorage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("no introspection")
}

// GetPrivateClaimsFromScopes puts the granted scope in the access token:
// op's JWT has no scope claim of its own.
func (s *opStorage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	granted := slices.DeleteFunc(slices.Clone(scopes), func(sc string) bool { return sc == oidc.ScopeOfflineAccess })
	return map[string]any{"scope": strings.Join(granted, " ")}, nil
}

func (s *opStorage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("no JWT client authentication")
}

func (s *opStorage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("no JWT profile grant")
}

func (s *opStorage) Health(context.Context) error { return nil }
