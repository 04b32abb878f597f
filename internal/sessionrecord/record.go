package sessionrecord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Rows is what a Recorder needs of the store (*store.Store is one); each
// method is store.Store's: see there.
type Rows interface {
	InsertCodeSession(ctx context.Context, c store.CodeSession) error
	CodeSession(ctx context.Context, idHash string) (store.CodeSession, error)
	OpenCodeSessions(ctx context.Context, owner string, all bool) ([]store.CodeSession, error)
	TouchCodeSession(ctx context.Context, idHash string, expires time.Time) error
	EndCodeSession(ctx context.Context, idHash, reason string, at time.Time) (bool, error)
	EndRequestedCodeSessions(ctx context.Context, server string) ([]store.CodeSession, error)
	EndRequestedWorkerCodeSessions(ctx context.Context) ([]store.CodeSession, error)
	EndServerCodeSessions(ctx context.Context, server, worker, reason string, at time.Time) (int64, error)
	PurgeCodeSessions(ctx context.Context, before time.Time) (int64, error)
}

var _ Rows = (*store.Store)(nil)

// Defaults of Config.
const (
	// DefaultPoll is how often the operator's end requests are read: the
	// CLI tells the operator a session ends within it.
	DefaultPoll = 2 * time.Second
	// DefaultTombstoneAge is how long an ended session's row tells its
	// owner why it ended.
	DefaultTombstoneAge = 24 * time.Hour
)

// Config configures a Recorder.
type Config struct {
	// Host names this machine in the rows' server names (default
	// os.Hostname): a Recorder ends at start only the rows of dead server
	// instances of its own host, so that servers of other machines
	// sharing a PostgreSQL database keep theirs.
	Host string
	// Poll is the period of the end-request loop (default DefaultPoll).
	Poll time.Duration
	// TombstoneAge is how long ended rows are kept (default
	// DefaultTombstoneAge).
	TombstoneAge time.Duration
	// Logger receives what the loop could not do; never an id.
	Logger *slog.Logger
	// Cluster says the wrapped service is a cluster's front end: the
	// rows whose worker is set are every front end's to serve, so the
	// poll loop also ends those the operator asked to end whichever
	// server opened them (finding the id, which no row holds, in the
	// workers' listing by its hash).
	Cluster bool

	// instance is this server's instance name (default
	// hostside.InstanceName of this process; tests name others).
	instance string
	// now is the clock of the rows' times.
	now func() time.Time
}

// Recorder is an execapi.SessionService and SessionAdmin over another,
// keeping the store's rows of its sessions (New).
type Recorder struct {
	inner  execapi.SessionService
	admin  execapi.SessionAdmin // nil when inner is none
	rows   Rows
	cfg    Config
	server string
	log    *slog.Logger

	mu sync.Mutex
	// refs are the sessions this Recorder opened and has not seen end, by
	// id hash: the rows hold no ids, and the operator's end requests name
	// the hash.
	refs map[string]execapi.SessionRef
	// done is closed when the poll loop has stopped.
	done chan struct{}
}

var (
	_ execapi.SessionService = (*Recorder)(nil)
	_ execapi.SessionAdmin   = (*Recorder)(nil)
)

// New returns a Recorder over inner keeping rows, after ending the rows of
// this host's server instances that no longer run (a restart's:
// EndServerRestart); its poll loop ends sessions the operator asked to end
// and purges old tombstones until ctx is done.
func New(ctx context.Context, inner execapi.SessionService, rows Rows, cfg Config) (*Recorder, error) {
	if inner == nil || rows == nil {
		return nil, errors.New("sessionrecord: New needs the session service and the store")
	}
	if cfg.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("sessionrecord: name this host: %w", err)
		}
		cfg.Host = h
	}
	if cfg.instance == "" {
		inst, err := hostside.InstanceName(os.Getpid())
		if err != nil {
			return nil, fmt.Errorf("sessionrecord: name this server: %w", err)
		}
		cfg.instance = inst
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.TombstoneAge <= 0 {
		cfg.TombstoneAge = DefaultTombstoneAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	r := &Recorder{
		inner: inner, rows: rows, cfg: cfg, log: cfg.Logger,
		server: serverName(cfg.Host, cfg.instance),
		refs:   map[string]execapi.SessionRef{},
		done:   make(chan struct{}),
	}
	r.admin, _ = inner.(execapi.SessionAdmin)
	if err := r.endRestarted(ctx); err != nil {
		return nil, err
	}
	go r.loop(ctx)
	return r, nil
}

// Server is the name of this Recorder's server in the rows.
func (r *Recorder) Server() string { return r.server }

// Done is closed when the poll loop has stopped (its context is done).
func (r *Recorder) Done() <-chan struct{} { return r.done }

// SessionPolicy is the wrapped service's.
func (r *Recorder) SessionPolicy() execapi.SessionPolicy { return r.inner.SessionPolicy() }

// OpenSession opens a session in the wrapped service and records it; a
// session whose row cannot be written is closed again (a session without
// a row would outlive the operator's view and its restart's tombstone).
func (r *Recorder) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	return r.openCounted(ctx, func() (execapi.SessionInfo, error) { return r.inner.OpenSession(ctx, c) })
}

// ForkSession forks the caller's session in the wrapped service and
// records the child.
func (r *Recorder) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	ref, row, err := r.resolve(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	return r.openCounted(ctx, func() (execapi.SessionInfo, error) {
		info, err := r.inner.ForkSession(ctx, ref)
		if err != nil {
			return info, r.ended(ctx, row, err)
		}
		return info, nil
	})
}

// record writes the row of a session just opened.
func (r *Recorder) record(ctx context.Context, info execapi.SessionInfo) (execapi.SessionInfo, error) {
	ref := execapi.SessionRef{ID: info.ID, Worker: info.Worker}
	row := store.CodeSession{
		IDHash: store.HashSessionID(info.ID), Owner: execapi.CallerFrom(ctx), Server: r.server, Worker: info.Worker,
		Runtime: info.Runtime, Created: info.CreatedAt, Expires: info.ExpiresAt,
	}
	if err := r.rows.InsertCodeSession(context.WithoutCancel(ctx), row); err != nil {
		if _, cerr := r.inner.CloseSession(context.WithoutCancel(ctx), ref); cerr != nil {
			r.log.Error("close a session whose row could not be written", "err", cerr)
		}
		return execapi.SessionInfo{}, fmt.Errorf("record the session: %w", err)
	}
	r.mu.Lock()
	r.refs[row.IDHash] = ref
	r.mu.Unlock()
	return info, nil
}

// ExecInSession runs a call in the caller's session, and records the
// session's new expiry, or its end.
func (r *Recorder) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	ref, row, err := r.resolve(ctx, ref)
	if err != nil {
		return execapi.SessionResult{}, err
	}
	res, err := r.inner.ExecInSession(ctx, ref, c, events)
	if err != nil {
		return res, r.ended(ctx, row, err)
	}
	if end := res.Session.Ended; end != nil {
		r.markEnded(ctx, row.IDHash, end.Reason, end.At)
	} else if err := r.rows.TouchCodeSession(context.WithoutCancel(ctx), row.IDHash, res.Session.ExpiresAt); err != nil {
		r.log.Warn("record a session's expiry", "err", err)
	}
	return res, nil
}

// Session is the caller's open session: an id whose row is missing,
// another caller's or ended is answered from the row alone, without asking
// the wrapped service; an open row's is asked of it, on its worker.
func (r *Recorder) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	ref, row, err := r.resolve(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	info, err := r.inner.Session(ctx, ref)
	if err != nil {
		return execapi.SessionInfo{}, r.ended(ctx, row, err)
	}
	return info, nil
}

// ListSessions is the wrapped service's list of the caller's sessions.
func (r *Recorder) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return r.inner.ListSessions(ctx)
}

// CloseSession closes the caller's session and records its end.
func (r *Recorder) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	ref, row, err := r.resolve(ctx, ref)
	if err != nil {
		return execapi.SessionEnd{}, err
	}
	end, err := r.inner.CloseSession(ctx, ref)
	if err != nil {
		return end, r.ended(ctx, row, err)
	}
	r.markEnded(ctx, row.IDHash, end.Reason, end.At)
	return end, nil
}

// ReadSessionFile reads a file of the caller's session.
func (r *Recorder) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	ref, row, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	data, err := r.inner.ReadSessionFile(ctx, ref, path)
	return data, r.ended(ctx, row, err)
}

// WriteSessionFile writes a file of the caller's session.
func (r *Recorder) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	ref, row, err := r.resolve(ctx, ref)
	if err != nil {
		return err
	}
	return r.ended(ctx, row, r.inner.WriteSessionFile(ctx, ref, path, data))
}

// AllSessions is the wrapped service's list of every open session.
func (r *Recorder) AllSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	if r.admin == nil {
		return nil, errors.New("this session service offers the operator no list of sessions")
	}
	return r.admin.AllSessions(ctx)
}

// EndSession ends a session whoever owns it and records its end.
func (r *Recorder) EndSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	if r.admin == nil {
		return execapi.SessionEnd{}, errors.New("this session service offers the operator no end of sessions")
	}
	hash := store.HashSessionID(ref.ID)
	if row, err := r.rows.CodeSession(ctx, hash); err == nil {
		ref.Worker = row.Worker
	}
	end, err := r.admin.EndSession(ctx, ref)
	if err != nil {
		if errors.Is(err, execapi.ErrSessionNotFound) {
			r.forget(hash)
		}
		return end, err
	}
	r.markEnded(ctx, hash, end.Reason, end.At)
	return end, nil
}

// resolve finds the row of the caller's session: ErrSessionNotFound when
// there is none or it is another caller's, a *SessionEndedError when it
// has ended; else ref with the row's worker.
func (r *Recorder) resolve(ctx context.Context, ref execapi.SessionRef) (execapi.SessionRef, store.CodeSession, error) {
	if !execapi.IsSessionID(ref.ID) {
		return ref, store.CodeSession{}, execapi.ErrSessionNotFound
	}
	row, err := r.rows.CodeSession(ctx, store.HashSessionID(ref.ID))
	switch {
	case errors.Is(err, store.ErrCodeSessionNotFound):
		return ref, row, execapi.ErrSessionNotFound
	case err != nil:
		return ref, row, err
	case row.Owner != execapi.CallerFrom(ctx):
		return ref, row, execapi.ErrSessionNotFound
	case !row.Open():
		return ref, row, endedError(row)
	}
	ref.Worker = row.Worker
	return ref, row, nil
}

// ended records the end the wrapped service answered for row's session
// (err is a *SessionEndedError, or ErrSessionNotFound for a row still
// open: the service no longer knows the session, so its sandbox is gone),
// and returns the error the caller gets: the end, never "not found", for
// its own session.
func (r *Recorder) ended(ctx context.Context, row store.CodeSession, err error) error {
	var gone *execapi.SessionEndedError
	var lost *execapi.SessionLostError
	switch {
	case errors.As(err, &gone):
		r.markEnded(ctx, row.IDHash, gone.End.Reason, gone.End.At)
	case errors.As(err, &lost):
		// Gone with its worker: the row ends, so that listings do not
		// show it open, with a reason that keeps the owner's next use a
		// *SessionLostError (endedError), not an end by surprise.
		r.markEnded(ctx, row.IDHash, reasonWorkerLost, r.cfg.now())
	case errors.Is(err, execapi.ErrSessionNotFound):
		end := execapi.SessionEnd{Reason: execapi.EndSandboxLost, At: r.cfg.now()}
		r.markEnded(ctx, row.IDHash, end.Reason, end.At)
		return &execapi.SessionEndedError{End: end}
	}
	return err
}

// markEnded records the end of a session and forgets its ref.
func (r *Recorder) markEnded(ctx context.Context, hash string, reason execapi.SessionEndReason, at time.Time) {
	r.forget(hash)
	if at.IsZero() {
		at = r.cfg.now()
	}
	if _, err := r.rows.EndCodeSession(context.WithoutCancel(ctx), hash, string(reason), at); err != nil {
		r.log.Warn("record a session's end", "err", err)
	}
}

func (r *Recorder) forget(hash string) {
	r.mu.Lock()
	delete(r.refs, hash)
	r.mu.Unlock()
}

// reasonWorkerLost is the end_reason of a row whose session was seen lost
// with its cluster worker (a *SessionLostError): not a SessionEndReason,
// since the session did not end so much as vanish.
const reasonWorkerLost = "worker_lost"

// endedError is the owner's error for an ended row.
func endedError(row store.CodeSession) error {
	if row.EndReason == reasonWorkerLost {
		return &execapi.SessionLostError{Worker: row.Worker, Why: "its row says it was lost with its worker"}
	}
	return &execapi.SessionEndedError{End: execapi.SessionEnd{Reason: execapi.SessionEndReason(row.EndReason), At: row.Ended}}
}
