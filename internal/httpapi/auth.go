package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/oauth"
	"github.com/scratchrun/scratchrun/internal/store"
)

type keyContextKey struct{}

// errUnauthorized is returned when a run's caller is not an active key.
var errUnauthorized = errors.New("a valid API key is required (Authorization: Bearer sr_live_...)")

// keyFrom returns the key that authenticated the request, nil when the server
// runs without keys.
func keyFrom(ctx context.Context) *store.Key {
	k, _ := ctx.Value(keyContextKey{}).(*store.Key)
	return k
}

// authenticator decides whether a request may go on. While the key store has
// never held a key, the server is open (serve only allows that on loopback,
// or when told to); from the first key on, every request needs an active one.
type authenticator struct {
	keys       keyLookup
	keysExist  atomic.Bool // once true, stays true: keys are never deleted
	onFirstKey func()
}

// open reports whether requests need no key.
func (a *authenticator) open(ctx context.Context) (bool, error) {
	if a.keysExist.Load() {
		return false, nil
	}
	has, err := a.keys.HasKeys(ctx)
	if err != nil {
		return false, err
	}
	if has && a.keysExist.CompareAndSwap(false, true) && a.onFirstKey != nil {
		a.onFirstKey()
	}
	return !has, nil
}

// authenticate returns the request's key (nil in open mode), or a refusal.
// Missing, malformed, unknown and revoked keys are refused alike, so an
// answer never hints whether a key exists. With tokens (the /mcp route of
// a server with OAuth), an OAuth access token is taken too, and acts as
// the key its grant names.
func (s *Server) authenticate(r *http.Request, tokens bool) (*store.Key, *oauth.Grant, *tokenRefusal, error) {
	a := s.auth
	open, err := a.open(r.Context())
	if err != nil || open {
		return nil, nil, nil, err
	}
	unauthorized := &tokenRefusal{status: http.StatusUnauthorized, description: errUnauthorized.Error()}
	if r.URL.Query().Has("access_token") {
		// RFC 6750 §2.3 allows it; the MCP authorization specification
		// forbids it: a URL ends up in logs and histories.
		return nil, nil, &tokenRefusal{http.StatusBadRequest, "invalid_request",
			"access_token: a token is never accepted in the query string; send it in the Authorization header"}, nil
	}
	token := bearerToken(r)
	if token == "" {
		return nil, nil, unauthorized, nil
	}
	if tokens && !looksLikeAPIKey(token) {
		return s.verifyToken(r.Context(), token)
	}
	k, err := a.keys.Authenticate(r.Context(), token)
	if errors.Is(err, store.ErrNotFound) {
		if tokens {
			unauthorized.code = "invalid_token"
		}
		return nil, nil, unauthorized, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	return &k, nil, nil, nil
}

func bearerToken(r *http.Request) string {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		return ""
	}
	return fields[1]
}

// requireKey refuses requests without a valid key with 401 and otherwise
// records the key, and the caller for accounting, in the request's context.
func (s *Server) requireKey(next http.Handler) http.Handler { return s.requireCaller(next, false) }

// requireCaller is requireKey, taking OAuth tokens too when tokens is set
// and the server has OAuth; its refusals then carry the challenge that
// tells a client where to get one.
func (s *Server) requireCaller(next http.Handler, tokens bool) http.Handler {
	withOAuth := tokens && s.cfg.OAuth != nil
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, grant, refusal, err := s.authenticate(r, withOAuth)
		if err != nil {
			s.log.Error("authenticate", "err", err)
			writeError(w, http.StatusInternalServerError, execapi.CodeInternal, "the key store or the authorization server could not be read")
			return
		}
		if refusal != nil {
			s.m.rejections.add(reasonUnauthorized)
			code := CodeUnauthorized
			switch refusal.status {
			case http.StatusForbidden:
				code = CodeInsufficientScope
			case http.StatusBadRequest:
				code = execapi.CodeInvalidRequest
			}
			if withOAuth {
				s.cfg.OAuth.challenge(w, *refusal)
			} else {
				w.Header().Set("WWW-Authenticate", `Bearer realm="scratchrun"`)
			}
			writeError(w, refusal.status, code, refusal.description)
			return
		}
		if key != nil {
			ctx := context.WithValue(r.Context(), keyContextKey{}, key)
			if grant != nil {
				ctx = context.WithValue(ctx, grantContextKey{}, grant)
			}
			r = r.WithContext(execapi.WithCaller(ctx, key.ID))
		}
		next.ServeHTTP(w, r)
	})
}

// mcpTokenLifetime is the expiry the MCP SDK's bearer middleware is given: API
// keys do not expire, they are revoked, and every request is checked anew.
const mcpTokenLifetime = 100 * 365 * 24 * time.Hour

// grantSkew is beyond the clock skew any verifier allows past a token's
// expiry (external's is 30 s by default).
const grantSkew = 5 * time.Minute

// mcpAuth puts the request's key where the MCP SDK carries it into tool
// handlers. In go-sdk v1.8.0 a stateful session's tool handlers run in the
// context of the request that opened the session, so values put on later
// requests' contexts never reach them; what does reach each tool call is the
// TokenInfo that auth.RequireBearerToken stores (req.Extra.TokenInfo), which
// the MCP server turns into execapi.WithCaller. The SDK also binds a session
// to its TokenInfo.UserID, so one key cannot use another key's session.
func (s *Server) mcpAuth(next http.Handler) http.Handler {
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		// requireKey ran first with this same header; nothing else may pass.
		k := keyFrom(r.Context())
		if k == nil {
			return nil, auth.ErrInvalidToken
		}
		if g := grantFrom(r.Context()); g != nil {
			// The verifier judged the expiry, with the clock skew it
			// allows; the SDK, which allows none, must not judge again.
			return &auth.TokenInfo{UserID: k.ID, Scopes: g.Scopes, Expiration: g.Expiry.Add(grantSkew)}, nil
		}
		return &auth.TokenInfo{UserID: k.ID, Expiration: time.Now().Add(mcpTokenLifetime)}, nil
	}
	withToken := auth.RequireBearerToken(verify, nil)(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if keyFrom(r.Context()) == nil {
			next.ServeHTTP(w, r) // open mode: there is no token to carry
			return
		}
		withToken.ServeHTTP(w, r)
	})
}
