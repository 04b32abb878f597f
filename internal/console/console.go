package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/sessionrecord"
	"github.com/scratchrun/scratchrun/internal/store"
)

// MinTokenLength is the shortest operator token accepted: as for `scratchrun
// mcp --token`, short enough to remember is short enough to guess.
const MinTokenLength = 16

// Defaults of Config.
const (
	DefaultSessionIdle = 30 * time.Minute
	DefaultSessionMax  = 12 * time.Hour
)

// Config configures the console.
type Config struct {
	// Token is the operator token that signs in (--console-token); at
	// least MinTokenLength characters.
	Token string
	// Keys is the server's key and usage store (a *store.Store).
	Keys KeyStore
	// MaxBodyBytes bounds a playground request (default
	// httpapi.DefaultMaxBodyBytes, as the API's).
	MaxBodyBytes int64
	// SessionIdle ends a session not used for this long (default
	// DefaultSessionIdle); SessionMax ends any session this long after
	// sign-in (default DefaultSessionMax).
	SessionIdle time.Duration
	SessionMax  time.Duration
	// Logger receives sign-ins, sign-outs and failures; never the token,
	// a key or a request's content.
	Logger *slog.Logger
	// Sessions, when set, offers the Sessions page: the store's rows of
	// open code sessions (a *store.Store) and the operator's end
	// requests. Unset (sessions off), the page and its routes are absent.
	Sessions SessionRows
	// SessionAdmin, when set, is the server's own sessions (a
	// sessionrecord.Recorder), for the memory of those it holds.
	SessionAdmin execapi.SessionAdmin
	// SessionEndPoll is how soon a server ends a session the operator
	// asked to end, as the page says (default sessionrecord.DefaultPoll).
	SessionEndPoll time.Duration

	// now is the clock of sessions and throttling (tests move it).
	now func() time.Time
}

// Console is a configured console, to be mounted on a server (Mount).
type Console struct {
	cfg      Config
	sessions *sessions
	throttle *signinThrottle
	log      *slog.Logger
}

// CheckToken says why token cannot be the operator token, or nil.
func CheckToken(token string) error {
	switch {
	case len(token) < MinTokenLength:
		return fmt.Errorf("the console token must be at least %d characters (it has %d)", MinTokenLength, len(token))
	case strings.HasPrefix(token, store.KeyPrefix):
		// An API key is for programs; reusing one would let every
		// program holding it administer every key.
		return errors.New("the console token looks like an API key (" + store.KeyPrefix + "...): API keys cannot sign in to the console; choose another token")
	case strings.TrimSpace(token) != token || strings.ContainsAny(token, "\x00\r\n"):
		return errors.New("the console token may not start or end with spaces or hold line breaks")
	}
	return nil
}

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if err := CheckToken(cfg.Token); err != nil {
		return nil, err
	}
	if cfg.Keys == nil {
		return nil, errors.New("console: Config needs the key store")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = httpapi.DefaultMaxBodyBytes
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = DefaultSessionMax
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionEndPoll <= 0 {
		cfg.SessionEndPoll = sessionrecord.DefaultPoll
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	return &Console{
		cfg:      cfg,
		sessions: newSessions(cfg.SessionIdle, cfg.SessionMax, cfg.now),
		throttle: newSigninThrottle(cfg.now),
		log:      cfg.Logger,
	}, nil
}

// Mount is the console's handler for a server (httpapi.Config.Console):
// svc runs the playground's requests (the server's gate) and live reports
// what the server is doing.
func (c *Console) Mount(svc execapi.Service, live func() httpapi.Live) http.Handler {
	h := &handlers{Console: c, svc: svc, live: live}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, basePath+"/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /console/{$}", h.index)
	mux.HandleFunc("GET /console/signin", h.signinPage)
	mux.HandleFunc("POST /console/signin", h.signin)
	mux.Handle("GET /console/assets/", assetHandler())

	api := func(pattern string, f http.HandlerFunc) {
		method, _, _ := strings.Cut(pattern, " ")
		if method == http.MethodGet {
			mux.Handle(pattern, h.withSession(f))
		} else {
			mux.Handle(pattern, h.withSession(requireCSRF(f)))
		}
	}
	api("GET /console/api/session", h.session)
	api("POST /console/api/signout", h.signout)
	api("GET /console/api/keys", h.listKeys)
	api("POST /console/api/keys", h.createKey)
	api("POST /console/api/keys/{id}/revoke", h.revokeKey)
	api("POST /console/api/keys/{id}/limits", h.setLimits)
	api("GET /console/api/usage", h.usage)
	api("GET /console/api/runs", h.runs)
	api("GET /console/api/runs.csv", h.runsCSV)
	api("GET /console/api/live", h.liveState)
	api("GET /console/api/runtimes", h.runtimes)
	api("POST /console/api/run", h.run)
	if c.cfg.Sessions != nil {
		api("GET /console/api/sessions", h.listCodeSessions)
		api("POST /console/api/sessions/{hash}/end", h.endCodeSession)
	}
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "no such console page or method: "+r.Method+" "+r.URL.Path)
	})
	return securityHeaders(mux)
}

// basePath is where the server mounts the console.
const basePath = "/console"

// handlers are the console's routes over one server.
type handlers struct {
	*Console
	svc  execapi.Service
	live func() httpapi.Live
}
