package namespaces

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// The backend's zygotes, kept by key (sandbox.Zygote's caller, runtime and
// variant, and the image): started on the first sandbox asked of a key,
// retired once idle for zygoteIdle or after zygoteForks sandboxes (a
// zygote's hash seed and address layout are shared by all its sandboxes,
// so none is used for long), and at most zygoteMax live, the least
// recently used retired first. A retired zygote stops serving; the
// sandboxes it made run on until destroyed.
const (
	zygoteIdle  = 10 * time.Minute
	zygoteForks = 1000
	zygoteMax   = 8
	// zygoteKeep is how recently used a zygote may be and still be
	// retired to make room for another key's: with more callers than
	// zygoteMax calling in turn, retiring the least recently used for each
	// call would start an interpreter per call, dearer than the helper's
	// sandbox; the newcomer's sandboxes go to the helper instead.
	zygoteKeep = 30 * time.Second
	// zygoteRetry is how long a key whose zygote failed to start goes to
	// the helper before a zygote is tried again (a start costs an
	// interpreter's start and its preloads).
	zygoteRetry = time.Minute
)

// retirable is what the pool keeps: a zygote (*zygoteProcess), or a
// test's stand-in.
type retirable interface {
	Retire()
	Dead() bool
}

type zygoteKey struct {
	caller, runtime, variant, rootfs string
	uidBase                          uint32
}

type zygoteEntry[Z retirable] struct {
	z        Z
	ready    chan struct{} // closed once started (or failed to)
	err      error
	failedAt time.Time
	forks    int
	lastUse  time.Time
	timer    *time.Timer
	// inUse counts the sandboxes being made through it now; a zygote
	// retired meanwhile is retired once they are made (retire).
	inUse  int
	retire bool
}

// zygotePool keeps zygotes by key; start starts one, retired is told of
// each retired (after Retire).
type zygotePool[Z retirable] struct {
	start   func(sandbox.Zygote, sandbox.Image) (Z, error)
	retired func(Z)
	log     *slog.Logger
	idle    time.Duration
	forks   int
	max     int
	keep    time.Duration

	mu       sync.Mutex
	live     map[zygoteKey]*zygoteEntry[Z]
	closed   bool
	starting sync.WaitGroup
}

func newZygotePool[Z retirable](start func(sandbox.Zygote, sandbox.Image) (Z, error), retired func(Z), log *slog.Logger) *zygotePool[Z] {
	return &zygotePool[Z]{start: start, retired: retired, log: log, idle: zygoteIdle, forks: zygoteForks, max: zygoteMax, keep: zygoteKeep,
		live: map[zygoteKey]*zygoteEntry[Z]{}}
}

// get returns the zygote for zc on img, counting one more sandbox made
// from it: a live one, else one started now. done must be called once the
// sandbox is made (or failed to be).
func (p *zygotePool[Z]) get(ctx context.Context, zc sandbox.Zygote, img sandbox.Image) (z Z, done func(), err error) {
	var none Z
	k := zygoteKey{zc.Caller, zc.Runtime, zc.Variant, img.RootFS, img.UIDBase}
	p.mu.Lock()
	for {
		if p.closed {
			p.mu.Unlock()
			return none, nil, errors.New("the backend is closed")
		}
		e, ok := p.live[k]
		if !ok {
			break
		}
		select {
		case <-e.ready:
		default:
			// Another call is starting it: wait for that.
			p.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				return none, nil, ctx.Err()
			}
			p.mu.Lock()
			continue
		}
		if e.err != nil {
			if time.Since(e.failedAt) < zygoteRetry {
				p.mu.Unlock()
				return none, nil, e.err
			}
		} else if !e.z.Dead() && e.forks < p.forks {
			e.forks++
			e.lastUse = time.Now()
			e.timer.Reset(p.idle)
			e.inUse++
			p.mu.Unlock()
			return e.z, p.doneFunc(e), nil
		}
		p.retireLocked(k, e)
	}
	for len(p.live) >= p.max {
		if !p.retireOldestLocked(time.Now().Add(-p.keep)) {
			p.mu.Unlock()
			return none, nil, errZygotesBusy
		}
	}
	e := &zygoteEntry[Z]{ready: make(chan struct{}), forks: 1, inUse: 1}
	p.live[k] = e
	p.starting.Add(1)
	defer p.starting.Done()
	p.mu.Unlock()
	z, err = p.start(zc, img)
	p.mu.Lock()
	defer p.mu.Unlock()
	e.z, e.err, e.lastUse = z, err, time.Now()
	close(e.ready)
	if err != nil {
		e.failedAt = e.lastUse
		e.inUse = 0
		p.log.Warn("a zygote failed to start; the helper makes its sandboxes for a while", "caller", zc.Caller, "runtime", zc.Runtime, "variant", zc.Variant, "err", err)
		return none, nil, err
	}
	e.timer = time.AfterFunc(p.idle, func() { p.expire(k, e) })
	if p.closed || p.live[k] != e {
		// Closed (or every zygote retired) while it started: it serves
		// nothing.
		e.timer.Stop()
		e.inUse = 0
		p.retired(e.z)
		return none, nil, errors.New("the backend is closed")
	}
	return z, p.doneFunc(e), nil
}

// doneFunc ends one use of e.
func (p *zygotePool[Z]) doneFunc(e *zygoteEntry[Z]) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			e.inUse--
			if e.inUse == 0 && e.retire {
				e.retire = false
				p.retired(e.z)
			}
		})
	}
}

// expire retires e if it is still k's zygote and was not used since its
// timer was set.
func (p *zygotePool[Z]) expire(k zygoteKey, e *zygoteEntry[Z]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live[k] == e && time.Since(e.lastUse) >= p.idle {
		p.retireLocked(k, e)
	}
}

// errZygotesBusy: every zygote's place is taken by one used lately; the
// helper makes the sandbox.
var errZygotesBusy = errors.New("every zygote was used lately")

// retireOldestLocked retires the least recently used started zygote last
// used before before (false: none is).
func (p *zygotePool[Z]) retireOldestLocked(before time.Time) bool {
	var oldest *zygoteEntry[Z]
	var oldestKey zygoteKey
	for k, e := range p.live {
		select {
		case <-e.ready:
		default:
			continue // starting
		}
		if !e.lastUse.Before(before) {
			continue
		}
		if oldest == nil || e.lastUse.Before(oldest.lastUse) {
			oldest, oldestKey = e, k
		}
	}
	if oldest == nil {
		return false
	}
	p.retireLocked(oldestKey, oldest)
	return true
}

// retireLocked removes a started entry; its zygote, if it started, is
// retired.
func (p *zygotePool[Z]) retireLocked(k zygoteKey, e *zygoteEntry[Z]) {
	delete(p.live, k)
	if e.timer != nil {
		e.timer.Stop()
	}
	if e.err != nil {
		return
	}
	if e.inUse > 0 {
		e.retire = true
		return
	}
	p.retired(e.z)
}

// close retires every zygote and serves no more; one still starting is
// retired as it finishes.
func (p *zygotePool[Z]) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.retireAll()
}

// retireAll retires every zygote; later gets start new ones.
func (p *zygotePool[Z]) retireAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, e := range p.live {
		select {
		case <-e.ready:
			p.retireLocked(k, e)
		default:
			delete(p.live, k)
		}
	}
}

// wait returns once no zygote is starting (after close, every zygote has
// then been handed to retired, or will be as its last sandbox is made).
func (p *zygotePool[Z]) wait() { p.starting.Wait() }

// liveCount is how many zygotes are kept (started or starting).
func (p *zygotePool[Z]) liveCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}
