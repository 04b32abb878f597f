package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
)

// maxNextSandboxes bounds the callers that have a sandbox made ahead from
// their zygote: the backend keeps at most 8 zygotes too, and a sandbox
// whose caller's zygote was retired to make room would be the last one
// that zygote serves.
const maxNextSandboxes = 8

// defaultNextIdle is how long a caller's next sandbox waits for its call
// when the pool has no IdleAfter.
const defaultNextIdle = time.Minute

// nextSandboxes keeps, for each caller of a zygote-served key, the sandbox
// its next call will run in, forked from its zygote when its last call
// ended: the call then finds its sandbox ready, as a warm pool's would be,
// without the pool building sandboxes per caller ahead of any demand. One
// per caller and key; at most maxNextSandboxes, the least recently used
// dropped first; dropped once its caller has been idle for the pool's
// IdleAfter, when a call waits for memory (reclaim), and at Close. A call
// that comes while its sandbox is still being made waits for that one
// rather than start a second.
//
// It is its own store, not the pool's keys with a caller added: the pool's
// keys are what its metrics and the console show, and a caller (an API
// key's name) does not belong there.
type nextSandboxes struct {
	e    *Engine
	idle time.Duration
	// off: the pool is off (Floor 0), and so is making sandboxes ahead.
	off bool

	mu     sync.Mutex
	next   map[callerKey]*nextSandbox
	size   map[execapi.PoolKey]int64 // last measured, for admission's RoomFor
	closed bool
	making sync.WaitGroup
}

// callerKey is one caller's calls of one pool key.
type callerKey struct {
	caller string
	key    execapi.PoolKey
}

// nextSandbox is a caller's next sandbox, made or being made.
type nextSandbox struct {
	// made is closed when making it ended; l is then the sandbox, or nil
	// when it failed or admission had no room for it.
	made chan struct{}
	l    *leased
	// claimed: a call took it (perhaps before it was made); otherwise
	// one that is no longer in the map when made is destroyed by its
	// maker.
	claimed bool
	since   time.Time
	idle    *time.Timer
}

func newNextSandboxes(e *Engine, cfg PoolConfig) *nextSandboxes {
	idle := cfg.IdleAfter
	if idle <= 0 {
		idle = defaultNextIdle
	}
	return &nextSandboxes{e: e, idle: idle, off: cfg.Floor <= 0 || !e.zygotes,
		next: map[callerKey]*nextSandbox{}, size: map[execapi.PoolKey]int64{}}
}

// take hands out the caller's next sandbox of key, waiting for it if it is
// still being made, or nil (the call makes its own). ready reports whether
// it was made before the call came: a caller whose calls come back to back
// finds it still being made, or none.
func (n *nextSandboxes) take(ctx context.Context, caller string, key execapi.PoolKey) (l *leased, ready bool) {
	ck := callerKey{caller, key}
	n.mu.Lock()
	s := n.next[ck]
	if s == nil {
		n.mu.Unlock()
		return nil, false
	}
	delete(n.next, ck)
	s.claimed = true
	if s.idle != nil {
		s.idle.Stop()
	}
	select {
	case <-s.made:
		ready = true
		// Measured now, its pages copied (a fork copies them after it
		// reports ready): what admission's RoomFor sees the next one as.
		s.l.measure()
		n.size[key] = s.l.usage
	default:
	}
	n.mu.Unlock()
	select {
	case <-s.made:
		return s.l, ready
	case <-ctx.Done():
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-s.made:
		return s.l, ready // made meanwhile: the call's to end
	default:
		// Given up on: neither kept nor claimed, its maker destroys it.
		s.claimed = false
		return nil, false
	}
}

// makeNext starts making the caller's next sandbox of key (rt's), unless
// it has one, the store is off or closed, or admission has no room for it
// (checked in the maker, off the call's path). When the store is full the
// least recently used caller's sandbox makes room.
func (n *nextSandboxes) makeNext(rt images.Resolved, key execapi.PoolKey, caller string) {
	if n.off {
		return
	}
	ck := callerKey{caller, key}
	n.mu.Lock()
	if n.closed || n.next[ck] != nil {
		n.mu.Unlock()
		return
	}
	var evicted *leased
	if len(n.next) >= maxNextSandboxes {
		evicted = n.dropOldestLocked()
	}
	s := &nextSandbox{made: make(chan struct{}), since: time.Now()}
	n.next[ck] = s
	size := n.size[key]
	n.making.Add(1)
	n.mu.Unlock()
	go func() {
		defer n.making.Done()
		// Destroyed here, not on the path of the call that made room.
		if evicted != nil {
			n.e.release(evicted)
		}
		n.make(rt, ck, s, size)
	}()
}

// make builds s for ck. At the normal CPU weight, not the pool's
// background one when busy: a next sandbox is its caller's next call's own
// work done early, and that call often comes before it is made and waits
// for it.
func (n *nextSandboxes) make(rt images.Resolved, ck callerKey, s *nextSandbox, size int64) {
	var l *leased
	if n.e.adm.RoomFor(size) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var err error
		l, err = n.e.leaseZygote(ctx, rt, ck.key, int64(n.e.cfg.Policy.MaxMemoryMB)<<20, ck.caller)
		cancel()
		if err != nil {
			n.e.log.Warn("making a caller's next sandbox from its zygote", "runtime", ck.key.Runtime, "err", err)
			l = nil
		} else {
			l.measure()
		}
	}
	n.mu.Lock()
	s.l = l
	kept := s.claimed || n.next[ck] == s
	if l != nil {
		if _, known := n.size[ck.key]; !known {
			n.size[ck.key] = l.usage // until take measures one whose pages were copied
		}
		if !s.claimed && kept {
			s.idle = time.AfterFunc(n.idle, func() { n.drop(ck, s) })
		}
	}
	if l == nil && n.next[ck] == s {
		delete(n.next, ck)
	}
	close(s.made)
	n.mu.Unlock()
	if l != nil && !kept {
		n.e.release(l)
	}
}

// drop destroys s if it is still ck's unclaimed next sandbox (its caller
// was idle too long).
func (n *nextSandboxes) drop(ck callerKey, s *nextSandbox) {
	n.mu.Lock()
	if n.next[ck] != s || s.claimed {
		n.mu.Unlock()
		return
	}
	delete(n.next, ck)
	n.making.Add(1) // close waits for it
	n.mu.Unlock()
	defer n.making.Done()
	n.e.release(s.l)
}

// dropOldestLocked removes the least recently made entry and returns its
// sandbox if it was made (one still being made is destroyed by its maker).
func (n *nextSandboxes) dropOldestLocked() *leased {
	var oldestKey callerKey
	var oldest *nextSandbox
	for ck, s := range n.next {
		if oldest == nil || s.since.Before(oldest.since) {
			oldestKey, oldest = ck, s
		}
	}
	if oldest == nil {
		return nil
	}
	delete(n.next, oldestKey)
	select {
	case <-oldest.made:
		oldest.idle.Stop()
		return oldest.l
	default:
		return nil
	}
}

// reclaim destroys made next sandboxes, the largest first, until about
// need bytes are freed or none is left, and returns what they used.
func (n *nextSandboxes) reclaim(need int64) int64 {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return 0
	}
	type candidate struct {
		ck callerKey
		s  *nextSandbox
	}
	var made []candidate
	for ck, s := range n.next {
		select {
		case <-s.made:
			s.l.measure()
			made = append(made, candidate{ck, s})
		default:
		}
	}
	chosen, freed := largestFirst(made, func(c candidate) *leased { return c.s.l }, need)
	var drop []*leased
	for _, c := range chosen {
		delete(n.next, c.ck)
		c.s.idle.Stop()
		drop = append(drop, c.s.l)
	}
	n.making.Add(1) // close waits for it
	n.mu.Unlock()
	defer n.making.Done()
	// Destroyed before returning, so that the memory gauge sees them gone.
	for _, l := range drop {
		n.e.release(l)
	}
	if len(drop) > 0 {
		n.e.log.Info("released callers' next sandboxes for calls waiting for memory", "count", len(drop), "freed_mib", freed>>20)
	}
	return freed
}

// count reports how many next sandboxes of keys (of any key when none is
// named) are made and waiting.
func (n *nextSandboxes) count(keys ...execapi.PoolKey) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for ck, s := range n.next {
		if len(keys) > 0 && !slices.Contains(keys, ck.key) {
			continue
		}
		select {
		case <-s.made:
			c++
		default:
		}
	}
	return c
}

// close stops making next sandboxes and destroys them all, those being
// made once they are.
func (n *nextSandboxes) close() {
	n.mu.Lock()
	n.closed = true
	var drop []*leased
	for ck, s := range n.next {
		delete(n.next, ck)
		select {
		case <-s.made:
			s.idle.Stop()
			drop = append(drop, s.l)
		default:
		}
	}
	n.mu.Unlock()
	for _, l := range drop {
		n.e.release(l)
	}
	n.making.Wait()
}
