package microvm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// QEMU's uids: a range no host account or other backend uses (the
// namespaces backend's sandbox owners start at 1100000000).
const (
	vmmUIDBase  = 1_200_000_000
	vmmUIDCount = 1 << 20
)

// DefaultUIDLockFile is where the engines of a host take QEMU's uids.
const DefaultUIDLockFile = "/run/scratchrun/microvm-uids.lock"

// vmmUIDs hands out QEMU's uids so that no two live VMs of the host share
// one, whichever engine started them: a QEMU that shares a uid with
// another may read that one's guest RAM through /proc/PID/mem. Every
// engine opens the same lock file and holds an open-file-description lock
// on byte i while uid vmmUIDBase+i runs a VM of its; the kernel drops the
// locks of an engine that dies (kill -9 included), so a crashed engine's
// uids free themselves, and one file holds them all, so nothing piles up.
// A uid some process still runs as (a VM of a dead engine not yet gone,
// or of an engine that took no lock) is passed over.
type vmmUIDs struct {
	f    *os.File
	mu   sync.Mutex
	held map[uint32]bool // indexes this backend holds: its own locks never conflict with it
}

// openVMMUIDs opens the host's lock file at path.
func openVMMUIDs(path string) (*vmmUIDs, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open QEMU's uid lock file: %w", err)
	}
	return &vmmUIDs{f: f, held: map[uint32]bool{}}, nil
}

// acquire takes the lowest uid no live VM of the host runs as, for this
// backend until release.
func (u *vmmUIDs) acquire() (uint32, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var inUse map[uint32]bool // read once, when a lock is first had
	for i := uint32(0); i < vmmUIDCount; i++ {
		if u.held[i] {
			continue
		}
		err := u.lock(i, unix.F_WRLCK)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			continue // another engine's
		} else if err != nil {
			return 0, fmt.Errorf("lock a uid for QEMU: %w", err)
		}
		if inUse == nil {
			if inUse, err = processUIDs(); err != nil {
				_ = u.lock(i, unix.F_UNLCK)
				return 0, err
			}
		}
		if inUse[vmmUIDBase+i] {
			_ = u.lock(i, unix.F_UNLCK)
			continue
		}
		u.held[i] = true
		return vmmUIDBase + i, nil
	}
	return 0, errors.New("every uid for QEMU is in use")
}

// release gives uid back; call it once no process runs as it any more.
func (u *vmmUIDs) release(uid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	i := uid - vmmUIDBase
	if u.held[i] {
		_ = u.lock(i, unix.F_UNLCK)
		delete(u.held, i)
	}
}

// close drops every lock this backend holds.
func (u *vmmUIDs) close() error { return u.f.Close() }

// lock sets or clears the lock on byte i without waiting.
func (u *vmmUIDs) lock(i uint32, kind int16) error {
	fl := unix.Flock_t{Type: kind, Whence: io.SeekStart, Start: int64(i), Len: 1}
	for {
		err := unix.FcntlFlock(u.f.Fd(), unix.F_OFD_SETLK, &fl)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// processUIDs lists the uids in QEMU's range that processes of the host
// run as (real, effective, saved or file-system uid: /proc/PID/status
// says, whatever the process made of its dumpability).
func processUIDs() (map[uint32]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[uint32]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("Uid:"))
			if !ok {
				continue
			}
			for _, f := range bytes.Fields(rest) {
				if id, err := strconv.ParseUint(string(f), 10, 32); err == nil && id >= vmmUIDBase && id < vmmUIDBase+vmmUIDCount {
					out[uint32(id)] = true
				}
			}
			break
		}
	}
	return out, nil
}
