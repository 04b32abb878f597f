package netpolicy

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockNamespace takes an exclusive lock for egress in the current network
// namespace. Two engines sharing one namespace would share interface names,
// slot addresses and the table, and the first to stop would remove the
// other's rules; so only one engine may own egress there at a time.
func lockNamespace(dir string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("identify network namespace: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, fmt.Sprintf("egress-netns-%d.lock", st.Ino))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another ScratchRun engine (pid %s) owns network egress on this host; stop it or run without egress", string(holder))
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d", os.Getpid())
	return f, nil
}
