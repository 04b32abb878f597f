package namespaces

import (
	"errors"
	"os"
	"sync"
)

// Each sandbox's user namespace is owned by a host uid of its own, from
// this range, while the sandbox lives. The kernel charges what it counts per
// user inside a user namespace (inotify instances and watches, queued
// signals, message queue bytes, locked shared memory) to the namespace's
// owner as well (kernel/ucount.c); owned by root, every sandbox's usage
// counted against host root's quotas and against every other sandbox's.
// With owners of their own, a sandbox that exhausts its quotas (bounded
// anyway by initproto.KernelRlimits and initproto.UserNamespaceLimits) takes
// nothing from the host or from another sandbox.
//
// An owner holds every capability over its namespace from outside it, so
// these must be uids no host process runs as: the range lies far from the
// uids distributions hand out, above the images' (1000000000 to
// 1000065535, see images.DefaultUIDBase) and below the sandboxes' own
// (idmap.SandboxBase).
const (
	ownerUIDBase  = 1_100_000_000
	ownerUIDCount = 65536
)

// owners hands out owner uids to live sandboxes. Engines on one host each
// start at another point of the range (by pid), so they rarely share one;
// two that do only share that uid's counts.
type owners struct {
	mu    sync.Mutex
	next  uint32
	inUse map[uint32]bool
}

func newOwners() *owners {
	return &owners{next: uint32(os.Getpid()) * 2654435761 % ownerUIDCount, inUse: map[uint32]bool{}}
}

// take returns a uid no live sandbox of this engine owns.
func (o *owners) take() (uint32, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for range ownerUIDCount {
		uid := ownerUIDBase + o.next
		o.next = (o.next + 1) % ownerUIDCount
		if !o.inUse[uid] {
			o.inUse[uid] = true
			return uid, nil
		}
	}
	return 0, errors.New("every user namespace owner uid is in use")
}

// release returns uid once its sandbox is gone.
func (o *owners) release(uid uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.inUse, uid)
}

// takeBlock reserves n consecutive uids no live sandbox of this engine
// owns, for a zygote's sandboxes (its seccomp filter lets it take those
// only); releaseBlock frees them once the zygote and its sandboxes are
// gone. The search starts where take's does (by pid), so that two engines
// on one host do not all begin at the same block. It is not a reservation:
// another engine's take can still hand out a uid inside this block
// (docs/zygotes.md, what is left).
func (o *owners) takeBlock(n uint32) (uint32, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	blocks := ownerUIDCount / n
	first := o.next / n
	for i := range blocks {
		start := (first + i) % blocks * n
		free := true
		for k := start; k < start+n && free; k++ {
			free = !o.inUse[ownerUIDBase+k]
		}
		if free {
			for k := start; k < start+n; k++ {
				o.inUse[ownerUIDBase+k] = true
			}
			return ownerUIDBase + start, nil
		}
	}
	return 0, errors.New("no block of free user namespace owner uids is left")
}

func (o *owners) releaseBlock(base, n uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := base; k < base+n; k++ {
		delete(o.inUse, k)
	}
}
