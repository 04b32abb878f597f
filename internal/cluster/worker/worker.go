package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Engine is what a worker serves calls with: the local engine.
type Engine interface {
	execapi.CheckedExecutor
	Describe(ctx context.Context) (execapi.Info, error)
	// Admission is how its admission stands now: Free is what the
	// worker publishes as its free sandboxes. It is asked only when
	// Describe's Info carries no Admission (the real engine's does).
	Admission() execapi.AdmissionInfo
}

// Config configures a Worker.
type Config struct {
	// ID names the worker in the registry and in its call subjects
	// (cluster.ValidateWorkerID). Required.
	ID string
	// Conn is the worker's NATS connection. Required; the caller closes it.
	Conn *nats.Conn
	// Engine runs the calls. Required.
	Engine Engine
	// Sessions, when set, holds the worker's sessions (the engine's own,
	// with sessions on): front ends open them here and route their calls
	// here. Nil: the worker refuses session operations. When it also is
	// an execapi.SessionAdmin, the worker ends its sessions as it stops
	// and tells front ends which it ended.
	Sessions execapi.SessionService
	// Runtimes, when not empty, are the only runtimes the worker offers
	// and runs (of those its engine has); others are refused as unknown.
	Runtimes []string
	// Aliases, when set, reports the engine's runtime aliases (alias ->
	// runtime), published so that front ends place calls that name one.
	// It may be slow (it rescans the image store): it is asked once at
	// Start and then once a beat on a goroutine of its own, and nothing
	// waits for it but the next alias list.
	Aliases func() map[string]string
	// Version is the worker's scratchrun version, published.
	Version string
	// Timing tunes heartbeats and expiries (zero fields: the defaults).
	Timing Timing
	// Logger receives operational logs; never request env values or code.
	Logger *slog.Logger
}

// Timing are the worker's heartbeats and how long it waits for callers.
type Timing struct {
	// Beat is how often the registration is published (default 1 s).
	Beat time.Duration
	// CallerLost is how long a run goes on without a beat from its caller
	// before the worker takes the caller to be gone and kills the sandbox
	// (default 5 s; front ends beat every second).
	CallerLost time.Duration
	// GoWait is how long an offer waits for its go before it is forgotten
	// for good (default 10 s).
	GoWait time.Duration
	// KeepFinished is how long a finished call's last frames are kept
	// for a caller that has not said it got them (default 30 s).
	KeepFinished time.Duration
	// Resend is how long a frame goes unacknowledged before a caller's
	// beat makes the worker send it again (default 500 ms).
	Resend time.Duration
	// Flush is how long output events are gathered into one frame
	// (default 30 ms): progress, not the result, waits for it.
	Flush time.Duration
}

func (t Timing) withDefaults() Timing {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Beat, time.Second)
	def(&t.CallerLost, 5*time.Second)
	def(&t.GoWait, 10*time.Second)
	def(&t.KeepFinished, 30*time.Second)
	def(&t.Resend, 500*time.Millisecond)
	def(&t.Flush, 30*time.Millisecond)
	return t
}

// tombstoneFor is how long a forgotten call's id is remembered, so that a
// go that arrives after its offer was given up never starts it.
const tombstoneFor = 5 * time.Minute

// Worker serves a cluster's calls with one engine.
type Worker struct {
	cfg      Config
	t        Timing
	instance string
	offered  map[string]bool // nil: every runtime of the engine
	log      *slog.Logger
	sub      *nats.Subscription
	// base is the parent of every run's context: Close cancels it.
	base       context.Context
	cancelBase context.CancelFunc
	runs       sync.WaitGroup
	// senders are the calls' outboxes' goroutines (see queueLocked);
	// turn orders their publishing, one at a time (see send).
	senders   sync.WaitGroup
	turn      chan struct{}
	stopBeats chan struct{}
	// loops are the heartbeat's and the expiries' goroutines (not the
	// aliases', which may be stuck in a slow rescan: it ends at its next
	// beat).
	loops sync.WaitGroup

	mu    sync.Mutex
	calls map[string]*call
	// aliases are Config.Aliases as last read: asking the image store
	// rescans it, which neither a call's path nor the heartbeat should
	// wait for.
	aliases map[string]string
	tombs   map[string]time.Time
	// ended are the sessions the worker ended as it stopped, for its
	// last registration.
	ended    []cluster.EndedSession
	draining bool
	stopped  bool
	// capacity is the engine's admission's upper bound on calls, as of
	// the last heartbeat; waiting counts what the offers not yet started
	// hold (see holdOfferLocked).
	capacity int
	waiting  waitingOffers
}

// Start subscribes to the worker's calls, publishes its registration and
// keeps it fresh until Shutdown or Close.
func Start(cfg Config) (*Worker, error) {
	if err := cluster.ValidateWorkerID(cfg.ID); err != nil {
		return nil, err
	}
	if cfg.Conn == nil || cfg.Engine == nil {
		return nil, errors.New("worker: Config needs a NATS connection and an engine")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, t: cfg.Timing.withDefaults(), instance: nuid.Next(), log: cfg.Logger.With("worker", cfg.ID),
		calls: map[string]*call{}, tombs: map[string]time.Time{}, stopBeats: make(chan struct{}), turn: make(chan struct{}, 1)}
	if len(cfg.Runtimes) > 0 {
		w.offered = map[string]bool{}
		for _, rt := range cfg.Runtimes {
			w.offered[rt] = true
		}
	}
	w.base, w.cancelBase = context.WithCancel(context.Background())
	w.readAliases()
	if _, err := w.registration(); err != nil {
		w.cancelBase()
		return nil, err
	}
	sub, err := cfg.Conn.Subscribe(cluster.WorkerCalls(cfg.ID), w.handle)
	if err != nil {
		w.cancelBase()
		return nil, fmt.Errorf("worker: subscribe to its calls: %w", err)
	}
	// Calls queue in memory while the engine is busy; never drop one for
	// a slow consumer's limits (a dropped go would leave its caller
	// guessing).
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe()
		w.cancelBase()
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.sub = sub
	// Listening everywhere before anyone is told it exists.
	if err := cfg.Conn.Flush(); err != nil {
		sub.Unsubscribe()
		w.cancelBase()
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.publishRegistration()
	// Each on a loop of its own: killing the run of a caller that fell
	// silent must not wait for the engine to describe itself or for the
	// image store to be rescanned. The rescans are not waited for at Close
	// (one may hang on the store).
	w.loops.Add(2)
	go func() { defer w.loops.Done(); w.everyBeat(w.beat) }()
	go func() { defer w.loops.Done(); w.everyBeat(func() { w.expire(time.Now()) }) }()
	if cfg.Aliases != nil {
		go w.everyBeat(w.readAliases)
	}
	return w, nil
}

// InFlight counts the calls the worker holds: offered, running, or
// finished with frames not yet acknowledged.
func (w *Worker) InFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

// Shutdown stops taking calls: it takes the worker out of the registry,
// refuses new offers (as draining: front ends place them elsewhere),
// lets the runs in flight finish and their results reach their callers,
// and returns once it holds no call. When ctx ends first, the runs still
// going are cancelled (their sandboxes killed) and their callers told.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	w.draining = true
	w.mu.Unlock()
	w.deregister()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for w.InFlight() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			err = fmt.Errorf("worker: %d calls still in flight when the shutdown's time ran out; cancelled", w.InFlight())
			break wait
		}
	}
	w.Close()
	return err
}

// Close cancels every run at once (their sandboxes are killed), stops
// heartbeating and listening, and returns once the runs have ended.
func (w *Worker) Close() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped, w.draining = true, true
	for _, c := range w.calls {
		if c.cancel != nil {
			c.shutdownKill = true
		}
	}
	w.mu.Unlock()
	w.cancelBase()
	w.runs.Wait()
	// The runs' last frames (the worker stopped them) go out first.
	w.senders.Wait()
	close(w.stopBeats)
	w.loops.Wait()
	if w.sub != nil {
		w.sub.Unsubscribe()
	}
	if w.endSessions() {
		// Its last word: which sessions it ended, for their next call.
		// It stands (as draining: no front end places on it) until its
		// entry expires, rather than be deleted: a delete right behind
		// it would take it from the bucket before a front end's watch
		// read it (the bucket keeps one value per key).
		w.publishRegistration()
		w.cfg.Conn.Flush()
		return
	}
	w.deregister()
	w.cfg.Conn.Flush()
}

// offers reports whether the worker runs runtime (by the operator's
// restriction; the engine decides whether it has it).
func (w *Worker) offers(runtime string, aliases map[string]string) bool {
	if w.offered == nil {
		return true
	}
	if target, ok := aliases[runtime]; ok {
		runtime = target
	}
	return w.offered[runtime]
}

// registration is what the worker publishes now.
func (w *Worker) registration() (cluster.Registration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := w.cfg.Engine.Describe(ctx)
	if err != nil {
		return cluster.Registration{}, fmt.Errorf("worker: describe the engine: %w", err)
	}
	// The engine's Describe already read its admission: asking again
	// would read the cgroups a second time every beat.
	if info.Admission == nil {
		adm := w.cfg.Engine.Admission()
		info.Admission = &adm
	}
	// Only the runtimes the worker offers (a slice of its own: the
	// engine's may be shared).
	info.Runtimes = slices.DeleteFunc(slices.Clone(info.Runtimes), func(rt execapi.RuntimeInfo) bool { return !w.offers(rt.Name, nil) })
	if w.cfg.Version != "" {
		info.Version = w.cfg.Version
	}
	r := cluster.Registration{ID: w.cfg.ID, Instance: w.instance, Info: info, Heartbeat: time.Now().UTC(),
		Sessions: w.cfg.Sessions != nil && w.cfg.Sessions.SessionPolicy().Enabled}
	w.mu.Lock()
	r.Draining, r.EndedSessions = w.draining, w.ended
	aliases := w.aliases
	w.capacity = info.Admission.Capacity
	w.mu.Unlock()
	for alias, target := range aliases {
		// r.Runtimes holds only runtimes the worker offers, so an alias
		// to one of them is offered too.
		if slices.ContainsFunc(r.Runtimes, func(rt execapi.RuntimeInfo) bool { return rt.Name == target }) {
			if r.Aliases == nil {
				r.Aliases = map[string]string{}
			}
			r.Aliases[alias] = target
		}
	}
	return r, nil
}

// publishRegistration puts the registration in the registry's stream
// without waiting for its acknowledgement: it is a heartbeat, the next
// one a second later says the same, and a worker then needs no right to
// JetStream's API (only to publish its own key).
func (w *Worker) publishRegistration() {
	r, err := w.registration()
	if err != nil {
		w.log.Error("registration not published", "err", err)
		return
	}
	m := nats.NewMsg(cluster.RegistrySubject(w.cfg.ID))
	m.Data, _ = json.Marshal(r)
	if err := w.send(m); err != nil {
		w.log.Warn("registration not published", "err", err)
	}
}

// deregister deletes the worker's key from the registry (the key-value
// store's delete marker, KV-Operation: DEL), so that front ends stop
// placing calls on it at once rather than when its entry expires.
func (w *Worker) deregister() {
	m := nats.NewMsg(cluster.RegistrySubject(w.cfg.ID))
	m.Header.Set("KV-Operation", "DEL")
	if err := w.cfg.Conn.PublishMsg(m); err != nil {
		w.log.Warn("registration not withdrawn", "err", err)
	}
	w.cfg.Conn.Flush()
}

// everyBeat calls f every beat until the beats stop.
func (w *Worker) everyBeat(f func()) {
	tick := time.NewTicker(w.t.Beat)
	defer tick.Stop()
	for {
		select {
		case <-w.stopBeats:
			return
		case <-tick.C:
			f()
		}
	}
}

// beat publishes the registration, unless draining.
func (w *Worker) beat() {
	w.mu.Lock()
	draining := w.draining
	w.mu.Unlock()
	if !draining {
		w.publishRegistration()
	}
}

// readAliases asks Config.Aliases (a rescan of the image store) and keeps
// what it says.
func (w *Worker) readAliases() {
	if w.cfg.Aliases == nil {
		return
	}
	aliases := w.cfg.Aliases()
	w.mu.Lock()
	w.aliases = aliases
	w.mu.Unlock()
}

// expire forgets offers that never got their go, kills runs whose caller
// fell silent, and drops finished calls nobody collects.
func (w *Worker) expire(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, c := range w.calls {
		switch c.state {
		case cluster.StateWaiting:
			if now.Sub(c.created) > w.t.GoWait {
				w.forgetLocked(id)
			}
		case cluster.StateRunning:
			if now.Sub(c.heard) > w.t.CallerLost && !c.callerGone {
				w.log.Warn("the caller of a call fell silent: killing its sandbox", "call", id)
				c.callerGone = true
				c.cancel()
			}
		case cluster.StateFinished:
			if now.Sub(c.finished) > w.t.KeepFinished || now.Sub(c.heard) > w.t.CallerLost {
				delete(w.calls, id)
			}
		}
	}
	for id, at := range w.tombs {
		if now.Sub(at) > tombstoneFor {
			delete(w.tombs, id)
		}
	}
}

// forgetLocked drops a call that never ran and remembers its id, so that
// a late go cannot start it.
func (w *Worker) forgetLocked(id string) {
	if c := w.calls[id]; c != nil {
		w.waiting.release(c)
	}
	delete(w.calls, id)
	w.tombs[id] = time.Now()
}
