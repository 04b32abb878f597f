package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Defaults of Config.
const (
	// DefaultQueueWait is how long a call may wait for a worker with room
	// before it is refused, as a single server's queue wait.
	DefaultQueueWait = 2 * time.Second
	// DefaultChoices is K of the power of K choices: two sampled workers
	// already avoid the worst placements of a random one.
	DefaultChoices = 2
)

// Config configures a Frontend.
type Config struct {
	// Conn is the front end's NATS connection. Required; the caller
	// closes it.
	Conn *nats.Conn
	// Policy is what the front end validates requests with first (the
	// gate's): its defaults fill what a request leaves out before it is
	// sent, so every worker runs it alike; each worker still checks it
	// against its own. Required.
	Policy execapi.Policy
	// Sessions is the operator's bounds for sessions (the gate's); off
	// (its zero value), the front end has none to offer. Each worker
	// holds its sessions to its own too.
	Sessions execapi.SessionPolicy
	// QueueWait bounds how long a call waits for a worker with room
	// (default DefaultQueueWait; negative: one round of tries).
	QueueWait time.Duration
	// Choices is K of the power of K choices (default DefaultChoices).
	Choices int
	// Replicas of the registry bucket when the front end creates it
	// (default: 3 on a NATS cluster, else 1).
	Replicas int
	// Timing tunes beats and how soon a silent worker is lost.
	Timing Timing
	// MaxResultBytes bounds the JSON of one result whatever a worker's
	// caps say (default DefaultMaxResultBytes): each call holds at most
	// what its result may weigh of its worker's answers, and a worker
	// that sends more loses the call.
	MaxResultBytes int64
	// Only, when set, keeps placement to these workers (a benchmark
	// measuring one worker among others registered).
	Only []string
	// Logger receives operational logs; never request contents.
	Logger *slog.Logger
}

// Timing are the front end's beats and waits.
type Timing struct {
	// Beat is how often a call in flight beats to its worker (default
	// 1 s); the worker answers each.
	Beat time.Duration
	// LostAfter is how long a worker with a call may go unheard before the
	// call is lost (default 4 s).
	LostAfter time.Duration
	// GoneAfter is how long nobody may listen on a worker's subjects
	// during a call before it is lost (default 2 s: a worker moving to
	// another NATS node is back well within it).
	GoneAfter time.Duration
	// ReadyWait is how long an offer waits for its answer before the call
	// goes to another worker (default 2 s; nothing ran: no go was sent).
	ReadyWait time.Duration
	// LiveWindow is how long a worker stays live without a heartbeat
	// (default 5 s: workers beat every second); it is also the
	// registry's entry TTL.
	LiveWindow time.Duration
}

func (t Timing) withDefaults() Timing {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Beat, time.Second)
	def(&t.LostAfter, 4*time.Second)
	def(&t.GoneAfter, 2*time.Second)
	def(&t.ReadyWait, 2*time.Second)
	def(&t.LiveWindow, 5*time.Second)
	return t
}

// Frontend places calls on a cluster's workers. It is an execapi.Service
// and safe for concurrent use.
type Frontend struct {
	cfg   Config
	t     Timing
	nc    *nats.Conn
	kv    jetstream.KeyValue
	reg   *registry
	log   *slog.Logger
	inbox string
	sub   *nats.Subscription
	m     *metrics

	ctx     context.Context
	cancel  context.CancelFunc
	watched chan struct{}

	boxMu sync.Mutex
	boxes map[string]*mailbox
	// held is what the calls hold of their workers' answers.
	held heldBytes

	randMu sync.Mutex
	rand   *rand.Rand

	line waitLine

	// ended are the sessions workers said they ended as they stopped.
	ended endedSessions
}

var (
	_ execapi.Service        = (*Frontend)(nil)
	_ execapi.SessionService = (*Frontend)(nil)
	_ execapi.SessionAdmin   = (*Frontend)(nil)
)

// New opens the registry (creating its bucket when it is missing), starts
// watching it, and listens for its calls' answers. It waits up to ctx for
// the registry's current entries, so that the first call sees the workers
// already live.
func New(ctx context.Context, cfg Config) (*Frontend, error) {
	if cfg.Conn == nil || cfg.Policy.MaxTimeout <= 0 {
		return nil, errors.New("frontend: Config needs a NATS connection and a policy")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueWait == 0 {
		cfg.QueueWait = DefaultQueueWait
	}
	if cfg.Choices <= 0 {
		cfg.Choices = DefaultChoices
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	t := cfg.Timing.withDefaults()
	f := &Frontend{cfg: cfg, t: t, nc: cfg.Conn, reg: newRegistry(t.LiveWindow, t.Beat), log: cfg.Logger,
		boxes: map[string]*mailbox{}, m: newMetrics(), watched: make(chan struct{}),
		rand: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	kv, err := openRegistry(ctx, cfg.Conn, t.LiveWindow, cfg.Replicas, cfg.Logger)
	if err != nil {
		return nil, err
	}
	f.kv = kv
	f.inbox = cfg.Conn.NewRespInbox()
	sub, err := cfg.Conn.Subscribe(f.inbox+".*", f.dispatch)
	if err != nil {
		return nil, fmt.Errorf("frontend: listen for answers: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("frontend: %w", err)
	}
	f.sub = sub
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go f.watch()
	select {
	case <-f.watched:
	case <-ctx.Done():
		f.Close()
		return nil, fmt.Errorf("frontend: read the registry of workers: %w", ctx.Err())
	}
	return f, nil
}

// watch keeps the view of workers in step with the registry, and watches
// afresh when the watch falls silent (its consumer lost with a node).
func (f *Frontend) watch() {
	once := sync.OnceFunc(func() { close(f.watched) })
	for f.ctx.Err() == nil {
		w, err := f.kv.WatchAll(f.ctx)
		if err != nil {
			f.log.Warn("cannot watch the registry of workers; retrying", "err", err)
			select {
			case <-f.ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		f.follow(w, once)
		w.Stop()
	}
}

// follow applies the watch's updates until it ends or falls silent for
// longer than workers can (they beat every second).
func (f *Frontend) follow(w jetstream.KeyWatcher, initial func()) {
	tick := time.NewTicker(f.t.Beat)
	defer tick.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-tick.C:
			if f.reg.silentFor(time.Now()) > 2*f.t.LiveWindow {
				return
			}
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				initial()
				continue
			}
			now := time.Now()
			switch e.Operation() {
			case jetstream.KeyValuePut:
				reg, err := cluster.DecodeRegistration(e.Key(), e.Value())
				if err != nil {
					f.log.Warn("ignoring a registration", "err", err)
					continue
				}
				f.ended.add(reg.EndedSessions)
				if reg.Draining {
					// Its last word as it stops: it takes nothing more.
					f.reg.remove(e.Key(), now)
					continue
				}
				f.reg.put(reg, now)
			default:
				f.reg.remove(e.Key(), now)
			}
		}
	}
}

// Close stops watching and listening. Calls in flight end with errors.
func (f *Frontend) Close() {
	f.cancel()
	if f.sub != nil {
		f.sub.Unsubscribe()
	}
}

// Workers lists the workers live now (those of Config.Only, when set), by id.
func (f *Frontend) Workers() []cluster.Registration {
	live := f.live()
	slices.SortFunc(live, func(a, b cluster.Registration) int { return strings.Compare(a.ID, b.ID) })
	return live
}

// live is Workers in no particular order: placement samples them at
// random and Ready only counts them, so neither pays for a sort on a
// call's path.
func (f *Frontend) live() []cluster.Registration {
	live := f.reg.live(time.Now())
	if len(f.cfg.Only) > 0 {
		live = slices.DeleteFunc(live, func(w cluster.Registration) bool { return !slices.Contains(f.cfg.Only, w.ID) })
	}
	return live
}

// Ready reports whether a worker is live to take calls.
func (f *Frontend) Ready(context.Context) error {
	if len(f.live()) == 0 {
		return fmt.Errorf("no worker is live: none has heartbeated to the registry in the last %s", f.t.LiveWindow)
	}
	return nil
}

// Policy is the front end's own (the gate validates with it).
func (f *Frontend) Policy() execapi.Policy { return f.cfg.Policy }

// Describe implements execapi.Service: the runtimes the live workers
// offer together, the isolation levels among them, and the front end's
// policy's limits (requests are held to them before any worker sees
// them). The output and return-file caps are the smallest any live worker
// has, which every one honours; software emulation is said when any
// worker's isolation runs under it. The workers' versions are listed, each
// once; the front end's own is its server's to add.
func (f *Frontend) Describe(context.Context) (execapi.Info, error) {
	p := f.cfg.Policy
	info := p.Info()
	// Empty, not null, in the JSON when no worker is live.
	info.UnenforcedLimits, info.Runtimes = []string{}, []execapi.RuntimeInfo{}
	anyEgress := false
	seen := map[string]bool{}
	isolations := map[string]bool{}
	unenforced := map[string]bool{}
	versions := map[string]bool{}
	for _, w := range f.Workers() {
		if w.Version != "" {
			versions[w.Version] = true
		}
		for _, rt := range w.Runtimes {
			if !seen[rt.Name] {
				seen[rt.Name] = true
				info.Runtimes = append(info.Runtimes, rt)
			}
		}
		isolations[w.Isolation] = true
		info.SoftwareEmulation = info.SoftwareEmulation || w.SoftwareEmulation
		anyEgress = anyEgress || w.EgressAllowed
		for _, l := range w.UnenforcedLimits {
			unenforced[l] = true
		}
		if info.OutputLimitBytes == 0 || w.OutputLimitBytes < info.OutputLimitBytes {
			info.OutputLimitBytes = w.OutputLimitBytes
		}
		if info.MaxReturnBytes == 0 || w.MaxReturnBytes < info.MaxReturnBytes {
			info.MaxReturnBytes = w.MaxReturnBytes
		}
	}
	// A call asking for egress is placed only on a worker that allows it,
	// and the front end's own policy must allow it first.
	info.EgressAllowed = p.AllowEgress && anyEgress
	sort.Slice(info.Runtimes, func(i, j int) bool { return info.Runtimes[i].Name < info.Runtimes[j].Name })
	info.Isolation = strings.Join(slices.Sorted(maps.Keys(isolations)), ", ")
	info.UnenforcedLimits = append(info.UnenforcedLimits, slices.Sorted(maps.Keys(unenforced))...)
	info.WorkerVersions = slices.Sorted(maps.Keys(versions))
	return info, nil
}
