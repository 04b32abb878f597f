package engine

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
)

// PoolConfig sizes the warm pool. Each pooled sandbox is fully built
// (namespaces, mounts, cgroup, network slot, a pre-started interpreter with
// heavy imports done) and used by exactly one call, then destroyed; the pool
// refills behind it.
type PoolConfig struct {
	// Floor is how many sandboxes each warm runtime keeps ready even when
	// idle; 0 disables the pool.
	Floor int
	// Max caps the ready sandboxes of one runtime (0: no cap beyond the
	// memory budgets).
	Max int
	// MemoryBudgetBytes caps the memory all ready sandboxes use together
	// (measured from their cgroups), within the engine's admission
	// budget, which bounds them too: a warm sandbox is built only while
	// a call's floor still fits beside it and no call waits, and idle
	// ones are released when a call would otherwise wait for memory.
	MemoryBudgetBytes int64
	// IdleAfter is how long without demand before a runtime shrinks back to
	// Floor.
	IdleAfter time.Duration
	// MaxAge recycles a ready sandbox that waited this long.
	MaxAge time.Duration
	// Runtimes lists the runtimes to keep warm (empty: all installed).
	Runtimes []string
	// Networks lists the network modes to keep warm ("none", "egress").
	Networks []string
	// Builders is how many sandboxes may be built at once: the pool's CPU
	// budget (default 1).
	Builders int
	// Variants limits the warm variants kept ("light", "heavy"; empty: all).
	Variants []string
}

// DefaultPoolConfig keeps one of each runtime ready, grows with concurrent
// demand (a burst of a hundred calls leaves a hundred warm sandboxes for
// the next one), within 2 GiB and the admission budget, and shrinks after
// a minute idle.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{Floor: 1, MemoryBudgetBytes: 2 << 30, IdleAfter: time.Minute, MaxAge: 10 * time.Minute,
		Networks: []string{"none"}}
}

// Warm variants of runtimes that pre-start an interpreter.
const (
	variantLight = "light" // interpreter started, nothing imported
	variantHeavy = "heavy" // the runtime's Preload modules imported
)

// WarmVariant tells which warm variant a call of code on rt would use ("",
// "light" or "heavy"), for tools that size a pool for one workload.
func WarmVariant(rt images.Runtime, code string) string { return warmVariant(rt, code) }

// warmVariant picks the variant a call's code wants: heavy when it imports
// one of the runtime's preloaded modules (a cheap textual look, good enough
// to choose a sandbox: a wrong guess costs time, never correctness).
func warmVariant(rt images.Runtime, code string) string {
	if rt.Warm == "" {
		return ""
	}
	if rt.Warm == "python" {
		for _, m := range rt.Preload {
			top := strings.SplitN(m, ".", 2)[0]
			if pythonImports(code, top) {
				return variantHeavy
			}
		}
	}
	return variantLight
}

// pythonImports reports whether code has an "import top" or "from top"
// statement at the start of a line (possibly indented).
func pythonImports(code, top string) bool {
	for _, line := range strings.Split(code, "\n") {
		f := strings.Fields(strings.ReplaceAll(line, ",", " "))
		if len(f) >= 2 && (f[0] == "import" || f[0] == "from") {
			for _, w := range f[1:] {
				if w == "as" || w == "import" {
					break
				}
				if strings.SplitN(w, ".", 2)[0] == top {
					return true
				}
			}
		}
	}
	return false
}

type readySandbox struct {
	l     *leased
	since time.Time
}

type keyState struct {
	ready    []readySandbox
	creating int
	inFlight int
	// size is what a ready sandbox of this key last measured.
	size int64
	// peak is the most runs of this key in flight at once since lastBusy.
	peak     int
	lastBusy time.Time
}

// pool keeps warm sandboxes per key (execapi.PoolKey). The zero-config pool
// (Floor 0) hands out nothing and builds nothing.
type pool struct {
	e      *Engine
	cfg    PoolConfig
	mu     sync.Mutex
	keys   map[execapi.PoolKey]*keyState
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

func newPool(e *Engine, cfg PoolConfig) *pool {
	p := &pool{e: e, cfg: cfg, keys: map[execapi.PoolKey]*keyState{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.Floor <= 0 {
		close(p.done)
		return p
	}
	if cfg.Max > 0 && cfg.Max < cfg.Floor {
		p.cfg.Max = cfg.Floor
	}
	for _, rt := range e.store.Installed() {
		if !p.wanted(rt) {
			continue
		}
		variants := []string{""}
		if rt.Warm != "" {
			variants = []string{variantLight}
			if len(rt.Preload) > 0 {
				variants = append(variants, variantHeavy)
			}
			variants = slices.DeleteFunc(variants, func(v string) bool {
				return len(cfg.Variants) > 0 && !slices.Contains(cfg.Variants, v)
			})
		}
		for _, n := range cfg.Networks {
			if n == "egress" && e.cfg.Network == nil {
				continue
			}
			for _, v := range variants {
				key := execapi.PoolKey{Runtime: rt.Name, Network: n, Variant: v}
				if e.zygotes && !poolKeepsWithZygotes(key) {
					// Calls of these are made from zygotes: none is kept.
					if res, err := e.store.Resolve(rt.Name); err == nil && e.zygoteServes(res, key) {
						continue
					}
				}
				p.keys[key] = &keyState{}
			}
		}
	}
	go p.loop()
	return p
}

func (p *pool) wanted(rt images.Runtime) bool {
	if len(p.cfg.Runtimes) == 0 {
		return true
	}
	for _, name := range p.cfg.Runtimes {
		if name == rt.Name {
			return true
		}
	}
	return false
}

// take hands out a ready sandbox for key, or nil (the caller goes cold).
// It also records demand, which sizes the pool. It does not wake the
// builders: a refill started now would compete for CPU with the very call
// it serves (on 2 cores that made a warm python print(1) 1.5x slower); the
// refill starts when the call finishes (see finished).
func (p *pool) take(key execapi.PoolKey) *leased {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.keys[key]
	if st == nil || p.closed {
		return nil
	}
	st.inFlight++
	st.lastBusy = time.Now()
	if st.inFlight > st.peak {
		st.peak = st.inFlight
	}
	if len(st.ready) == 0 {
		return nil
	}
	r := st.ready[0]
	st.ready = st.ready[1:]
	return r.l
}

// finished records the end of a run of key (pairs with take) and wakes the
// builders to refill.
func (p *pool) finished(key execapi.PoolKey) {
	defer p.poke()
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.keys[key]; st != nil && st.inFlight > 0 {
		st.inFlight--
	}
}

func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// target is how many ready sandboxes key should have now.
func (p *pool) target(st *keyState, now time.Time) int {
	if now.Sub(st.lastBusy) > p.cfg.IdleAfter {
		st.peak = st.inFlight
	}
	n := max(p.cfg.Floor, st.peak)
	if p.cfg.Max > 0 {
		n = min(n, p.cfg.Max)
	}
	return n
}

// usage is the memory of all ready sandboxes.
func (p *pool) usage() int64 {
	var total int64
	for _, st := range p.keys {
		for _, r := range st.ready {
			total += r.l.usage
		}
	}
	return total
}

// loop refills, shrinks and recycles until close, building at most Builders
// sandboxes at once: the pool's CPU budget.
func (p *pool) loop() {
	builders := make(chan struct{}, max(p.cfg.Builders, 1))
	var building sync.WaitGroup
	defer func() {
		building.Wait()
		close(p.done)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		p.trim()
		select {
		case builders <- struct{}{}:
			if key, ok := p.next(); ok {
				building.Add(1)
				go func() {
					defer building.Done()
					p.build(key)
					<-builders
					p.poke()
				}()
				continue
			}
			<-builders
		default:
		}
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-tick.C:
		}
	}
}

// next picks the key most short of its target, within the memory budget.
func (p *pool) next() (execapi.PoolKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return execapi.PoolKey{}, false
	}
	now := time.Now()
	var best execapi.PoolKey
	bestGap := 0
	for k, st := range p.keys {
		gap := p.target(st, now) - len(st.ready) - st.creating
		if gap > bestGap {
			best, bestGap = k, gap
		}
	}
	if bestGap == 0 {
		return execapi.PoolKey{}, false
	}
	if p.cfg.MemoryBudgetBytes > 0 && p.usage() >= p.cfg.MemoryBudgetBytes {
		return execapi.PoolKey{}, false
	}
	// Within the machine's budget, beside a call's floor, and never while
	// calls wait for room.
	if !p.e.adm.RoomFor(p.keys[best].size) {
		return execapi.PoolKey{}, false
	}
	p.keys[best].creating++
	return best, true
}

func (p *pool) build(key execapi.PoolKey) {
	l, err := p.create(key)
	p.mu.Lock()
	st := p.keys[key]
	st.creating--
	if err != nil || p.closed {
		p.mu.Unlock()
		if err != nil {
			p.e.log.Warn("building a warm sandbox", "runtime", key.Runtime, "err", err)
			// Do not spin on a broken runtime.
			select {
			case <-p.stop:
			case <-time.After(5 * time.Second):
			}
		} else {
			p.e.release(l)
		}
		return
	}
	st.ready = append(st.ready, readySandbox{l: l, since: time.Now()})
	st.size = l.usage
	p.mu.Unlock()
}

func (p *pool) create(key execapi.PoolKey) (*leased, error) {
	rt, err := p.e.store.Resolve(key.Runtime)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := p.e.lease(ctx, rt, key, int64(p.e.cfg.Policy.MaxMemoryMB)<<20, true, p.e.busy())
	if err != nil {
		return nil, err
	}
	l.measure()
	return l, nil
}

// trim destroys ready sandboxes above target (idle shrink) or past MaxAge.
func (p *pool) trim() {
	p.mu.Lock()
	now := time.Now()
	var drop []*leased
	for _, st := range p.keys {
		target := p.target(st, now)
		keep := st.ready[:0]
		for _, r := range st.ready {
			r.l.measure() // imports may have grown it since it was built
			if len(keep) >= target || (p.cfg.MaxAge > 0 && now.Sub(r.since) > p.cfg.MaxAge) {
				drop = append(drop, r.l)
				continue
			}
			keep = append(keep, r)
		}
		st.ready = keep
	}
	p.mu.Unlock()
	for _, l := range drop {
		p.e.release(l)
	}
}

// reclaim destroys idle ready sandboxes, the largest first, until about
// need bytes (by their cgroups' usage) are freed or none is left: a call
// waiting for memory comes before sandboxes kept for calls to come. It
// returns what they used.
func (p *pool) reclaim(need int64) int64 {
	p.mu.Lock()
	type candidate struct {
		st *keyState
		l  *leased
	}
	var all []candidate
	for _, st := range p.keys {
		for _, r := range st.ready {
			r.l.measure()
			all = append(all, candidate{st, r.l})
		}
	}
	chosen, freed := largestFirst(all, func(c candidate) *leased { return c.l }, need)
	var drop []*leased
	for _, c := range chosen {
		c.st.ready = slices.DeleteFunc(c.st.ready, func(r readySandbox) bool { return r.l == c.l })
		drop = append(drop, c.l)
	}
	p.mu.Unlock()
	// Destroyed before returning, so that the memory gauge sees it gone.
	for _, l := range drop {
		p.e.release(l)
	}
	if len(drop) > 0 {
		p.e.log.Info("released idle warm sandboxes for calls waiting for memory", "count", len(drop), "freed_mib", freed>>20)
	}
	return freed
}

// largestFirst picks, of all (each with its sandbox, measured), the
// largest first until they free about need bytes; it returns them and
// what they use together. Reclaiming for a call waiting for memory frees
// the fewest sandboxes that way.
func largestFirst[T any](all []T, sb func(T) *leased, need int64) ([]T, int64) {
	slices.SortFunc(all, func(a, b T) int { return cmp.Compare(sb(b).usage, sb(a).usage) })
	var freed int64
	for i, c := range all {
		if freed >= need {
			return all[:i], freed
		}
		freed += sb(c).usage
	}
	return all, freed
}

// measure records the sandbox's current memory use (0 when the backend
// cannot tell).
func (l *leased) measure() { l.usage = l.sb.MemoryUsage() }

// waitWarm blocks until every key has its floor ready, or timeout/ctx.
func (p *pool) waitWarm(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		ok := true
		for _, st := range p.keys {
			if len(st.ready) < p.cfg.Floor {
				ok = false
			}
		}
		p.mu.Unlock()
		if ok {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memory reports the average memory, measured now from their cgroups, of
// the ready sandboxes of each key (keys with none ready are left out).
func (p *pool) memory() map[execapi.PoolKey]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[execapi.PoolKey]int64{}
	for k, st := range p.keys {
		if len(st.ready) == 0 {
			continue
		}
		var total int64
		for _, r := range st.ready {
			r.l.measure()
			total += r.l.usage
		}
		out[k] = total / int64(len(st.ready))
	}
	return out
}

// stats reports ready sandboxes per key (for metrics, the console and
// tests).
func (p *pool) stats() map[execapi.PoolKey]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[execapi.PoolKey]int{}
	for k, st := range p.keys {
		out[k] = len(st.ready)
	}
	return out
}

// close stops building and destroys every ready sandbox.
func (p *pool) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	if p.cfg.Floor > 0 {
		close(p.stop)
	}
	<-p.done
	p.mu.Lock()
	var drop []*leased
	for _, st := range p.keys {
		for _, r := range st.ready {
			drop = append(drop, r.l)
		}
		st.ready = nil
	}
	p.mu.Unlock()
	for _, l := range drop {
		p.e.release(l)
	}
}
