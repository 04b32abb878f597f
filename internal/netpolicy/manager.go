package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// Manager installs the egress policy and hands out slots, keeping PoolSize of
// them ready so that a call with egress costs little more than one without.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	lock  *os.File
	ready chan *Slot

	mu     sync.Mutex
	free   []int // slot indexes not in use
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

// New installs the policy (replacing a table left by an earlier engine) and
// starts filling the pool. It needs CAP_NET_ADMIN in the current network
// namespace: root on the host.
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
	lock, err := lockNamespace(cfg.LockDir)
	if err != nil {
		return nil, err
	}
	if err := enableForwarding(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := installRules(cfg); err != nil {
		lock.Close()
		return nil, err
	}
	slots := 1 << (32 - cfg.Subnet.Bits() - 2)
	m := &Manager{cfg: cfg, log: log, lock: lock, ready: make(chan *Slot, max(cfg.PoolSize, 0)),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	for i := slots - 1; i >= 0; i-- {
		m.free = append(m.free, i)
	}
	go m.fill()
	return m, nil
}

// Config returns the policy in force.
func (m *Manager) Config() Config { return m.cfg }

func (m *Manager) take() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, errors.New("netpolicy: closed")
	}
	if len(m.free) == 0 {
		return 0, errors.New("netpolicy: every network slot is in use")
	}
	i := m.free[len(m.free)-1]
	m.free = m.free[:len(m.free)-1]
	return i, nil
}

func (m *Manager) give(i int) {
	m.mu.Lock()
	m.free = append(m.free, i)
	m.mu.Unlock()
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

// Close destroys the ready slots and removes the policy's table. Slots still
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
	errs = append(errs, removeRules(m.cfg.Table))
	m.lock.Close()
	return errors.Join(errs...)
}
