//go:build unix

package httpapi

import "golang.org/x/sys/unix"

// DefaultMaxConns is half the process's descriptor limit (the other half is
// left to the engine: sandboxes, pipes, the key database), between 16 and
// 4096.
func DefaultMaxConns() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 512
	}
	return int(min(max(lim.Cur/2, minDefaultConns), maxDefaultConns))
}
