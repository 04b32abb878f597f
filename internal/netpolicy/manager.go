package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Manager installs the egress policy and hands out slots, keeping PoolSize of
// them ready so that a call with egress costs little more than one without.
//
// Engines on one host share the policy: the first engine with egress in a
// network namespace installs the table (replacing whatever a crashed engine
// left), later ones with the same policy join it, and the last one out
// removes it. Slot indexes (interface names and addresses) are claimed
// across processes with a lock per slot (see hostLock), so engines never
// take each other's.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	lock  *hostLock
	slots int // how many /30 slots the subnet holds
	ready chan *Slot

	mu     sync.Mutex
	held   map[int]bool // slot indexes this engine holds
	next   int          // where the search for a free index starts
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

// New joins the engines using egress in the current network namespace,
// installing the policy when it is the first (replacing a table and
// removing interfaces left by a crashed engine), and starts filling the
// pool. It fails when another engine there runs a different policy. It needs
// CAP_NET_ADMIN in the current network namespace: root on the host.
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	if len(cfg.DNS) == 0 {
		cfg.DNS = HostResolvers()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lock, first, err := joinHost(cfg.LockDir, cfg.fingerprint())
	if err != nil {
		return nil, err
	}
	if err := setUp(cfg, first); err != nil {
		last, _ := lock.leave()
		if last {
			_ = removeRules(cfg.Table)
		}
		lock.close(last)
		return nil, err
	}
	lock.openGate()
	sweepLockFiles(cfg.LockDir)
	m := &Manager{cfg: cfg, log: log, lock: lock, slots: 1 << (32 - cfg.Subnet.Bits() - 2),
		ready: make(chan *Slot, max(cfg.PoolSize, 0)), held: map[int]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go m.fill()
	return m, nil
}

// setUp prepares the namespace for egress. The first engine replaces the
// table and removes every sandbox interface (no engine is left to own one:
// a crashed engine's); a later one only makes sure the table is there.
func setUp(cfg Config, first bool) error {
	if err := enableForwarding(); err != nil {
		return err
	}
	if first {
		removeLinks(cfg.InterfacePrefix)
		return installRules(cfg)
	}
	if !tableExists(cfg.Table) {
		return installRules(cfg)
	}
	return nil
}

// Config returns the policy in force.
func (m *Manager) Config() Config { return m.cfg }

// take claims a free slot index, one no engine on the host holds.
func (m *Manager) take() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, errors.New("netpolicy: closed")
	}
	for n := range m.slots {
		i := (m.next + n) % m.slots
		if m.held[i] || !m.lock.claimSlot(i) {
			continue
		}
		m.held[i] = true
		m.next = i + 1
		return i, nil
	}
	return 0, errors.New("netpolicy: every network slot is in use")
}

func (m *Manager) give(i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lock.releaseSlot(i)
	delete(m.held, i)
}

// fill keeps the ready pool full until Close.
func (m *Manager) fill() {
	defer close(m.done)
	for {
		for len(m.ready) < cap(m.ready) {
			s, err := m.create()
			if err != nil {
				m.log.Warn("pre-creating a network slot", "err", err)
				break
			}
			select {
			case m.ready <- s:
			default:
				m.release(s)
			}
		}
		if _, ok := <-m.wake; !ok {
			return
		}
	}
}

func (m *Manager) create() (*Slot, error) {
	i, err := m.take()
	if err != nil {
		return nil, err
	}
	s, err := createSlot(m.cfg, i)
	if err != nil {
		m.give(i)
		return nil, err
	}
	return s, nil
}

// Acquire returns a ready slot, or builds one now when the pool is empty.
// The caller must Release it after the sandbox in it is gone.
func (m *Manager) Acquire(ctx context.Context) (*Slot, error) {
	defer m.poke()
	select {
	case s := <-m.ready:
		return s, nil
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return m.create()
}

func (m *Manager) poke() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Release destroys a slot: its veth pair goes, and its namespace with the
// last reference to it. Slots are never reused.
func (m *Manager) Release(s *Slot) error {
	return m.release(s)
}

func (m *Manager) release(s *Slot) error {
	err := s.destroy()
	m.give(s.index)
	if err != nil {
		return fmt.Errorf("release slot %d: %w", s.index, err)
	}
	return nil
}

// Close destroys the ready slots and leaves the engines sharing egress; the
// last one out removes the policy's table and the lock file. Slots still
// held by callers must be released first.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.wake)
	m.mu.Unlock()
	<-m.done
	var errs []error
	for {
		select {
		case s := <-m.ready:
			errs = append(errs, m.release(s))
			continue
		default:
		}
		break
	}
	last, err := m.lock.leave()
	errs = append(errs, err)
	if last {
		errs = append(errs, removeRules(m.cfg.Table))
	}
	errs = append(errs, m.lock.close(last))
	return errors.Join(errs...)
}
