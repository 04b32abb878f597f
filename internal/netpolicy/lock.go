package netpolicy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// hostLock is one engine's share of egress in one network namespace. Every
// engine with egress in a namespace opens the same lock file (named by the
// namespace) and takes open-file-description byte-range locks in it:
//
//   - byte 0, the gate: held for writing while an engine joins or leaves,
//     so that installing and removing the policy never interleave;
//   - byte 1, the users: every engine holds it for reading while it runs;
//     an engine that can take it for writing is the only one;
//   - byte 2+i: network slot i, held for writing by the engine using it.
//
// The kernel drops an engine's locks when it dies (kill -9 included), so a
// crashed engine's slots and share free themselves. One file with byte
// ranges rather than a file per slot (or flock on several files), so that
// nothing piles up: the last engine out removes the file, under the gate.
// The file holds the policy of the engines sharing it, so that a later
// engine with another policy is refused instead of running under rules it
// did not ask for.
type hostLock struct {
	f    *os.File
	path string
}

// Byte offsets of the locks.
const (
	gateByte  = 0
	usersByte = 1
	slotBase  = 2
)

// lockFileName names the lock file of the current network namespace.
func lockFileName(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return "", fmt.Errorf("identify network namespace: %w", err)
	}
	return filepath.Join(dir, fmt.Sprintf("egress-netns-%d.lock", st.Ino)), nil
}

// joinHost opens the lock file of the current network namespace and joins
// the engines using egress there. It returns with the gate held: first is
// true when no other engine is there (the caller then installs the policy,
// replacing whatever a crashed engine left); otherwise policy must equal the
// policy the others run, or joining fails. The caller must call openGate.
func joinHost(dir, policy string) (l *hostLock, first bool, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	path, err := lockFileName(dir)
	if err != nil {
		return nil, false, err
	}
	for range 100 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, false, err
		}
		l := &hostLock{f: f, path: path}
		if err := l.lock(gateByte, unix.F_WRLCK, true); err != nil {
			f.Close()
			return nil, false, err
		}
		if !l.current() {
			f.Close() // the last engine out removed it while we waited: use a new one
			continue
		}
		if l.lock(usersByte, unix.F_WRLCK, false) == nil {
			// Alone: record our policy, then share the users' lock.
			err := l.writePolicy(policy)
			if err == nil {
				err = l.lock(usersByte, unix.F_RDLCK, false)
			}
			if err != nil {
				f.Close()
				return nil, false, err
			}
			return l, true, nil
		}
		theirs, err := l.readPolicy()
		if err == nil && theirs != policy {
			err = fmt.Errorf("another ScratchRun engine runs network egress in this network namespace with a different policy (%s); "+
				"this one asks for (%s): give both the same egress settings, or stop the other first", oneLine(theirs), oneLine(policy))
		}
		if err == nil {
			err = l.lock(usersByte, unix.F_RDLCK, false)
		}
		if err != nil {
			f.Close()
			return nil, false, err
		}
		return l, false, nil
	}
	return nil, false, fmt.Errorf("egress lock %s keeps being replaced", path)
}

// openGate lets other engines join or leave.
func (l *hostLock) openGate() { _ = l.lock(gateByte, unix.F_UNLCK, false) }

// leave gives up this engine's share. It returns with the gate held and
// reports whether this engine was the last one (then the caller removes the
// policy); the caller must call close.
func (l *hostLock) leave() (last bool, err error) {
	if err := l.lock(gateByte, unix.F_WRLCK, true); err != nil {
		return false, err
	}
	// Converting our read lock succeeds only when no other engine holds one.
	return l.lock(usersByte, unix.F_WRLCK, false) == nil, nil
}

// close releases every lock, removing the lock file first when this engine
// was the last (removeFile), so that lock files of namespaces no engine uses
// do not pile up.
func (l *hostLock) close(removeFile bool) error {
	var err error
	if removeFile && l.current() {
		err = os.Remove(l.path)
	}
	return errors.Join(err, l.f.Close())
}

// claimSlot takes slot i for this engine; false when another engine has it.
func (l *hostLock) claimSlot(i int) bool {
	return l.lock(int64(slotBase+i), unix.F_WRLCK, false) == nil
}

// releaseSlot gives slot i back.
func (l *hostLock) releaseSlot(i int) { _ = l.lock(int64(slotBase+i), unix.F_UNLCK, false) }

// lock sets (or clears) an OFD lock on one byte; wait blocks until it can.
func (l *hostLock) lock(at int64, kind int16, wait bool) error {
	cmd := unix.F_OFD_SETLK
	if wait {
		cmd = unix.F_OFD_SETLKW
	}
	fl := unix.Flock_t{Type: kind, Whence: io.SeekStart, Start: at, Len: 1}
	for {
		err := unix.FcntlFlock(l.f.Fd(), cmd, &fl)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// current reports whether the open lock file is still the one at its path.
func (l *hostLock) current() bool {
	var a, b unix.Stat_t
	return unix.Fstat(int(l.f.Fd()), &a) == nil && unix.Stat(l.path, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

func (l *hostLock) writePolicy(policy string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(policy), 0)
	return err
}

func (l *hostLock) readPolicy() (string, error) {
	data, err := io.ReadAll(io.NewSectionReader(l.f, 0, 1<<20))
	return string(data), err
}

// sweepLockFiles removes lock files in dir that no engine holds: those of
// network namespaces whose engines crashed, or that are gone. A file some
// engine is about to use is safe to remove: joinHost notices and opens a
// new one.
func sweepLockFiles(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "egress-netns-*.lock"))
	for _, path := range matches {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		l := &hostLock{f: f, path: path}
		if l.lock(gateByte, unix.F_WRLCK, false) == nil && l.lock(usersByte, unix.F_WRLCK, false) == nil && l.current() {
			os.Remove(path)
		}
		f.Close()
	}
}

func oneLine(policy string) string {
	return strings.Join(strings.Split(strings.TrimSpace(policy), "\n"), "; ")
}
