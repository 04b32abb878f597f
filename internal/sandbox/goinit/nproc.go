package goinit

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Inside gVisor what stops a fork bomb is RLIMIT_NPROC, which the Sentry
// enforces per user; the host cgroup sees only the Sentry's own threads
// (its process limit is a backstop far above), and the Sentry keeps no
// count of the forks it refused. So init counts the sandbox's tasks while
// the program runs, in a pids cgroup of the Sentry's own, and reports when
// they filled RLIMIT_NPROC. The cgroup only counts: its pids.max is not
// reliable in the Sentry (a task in several hierarchies may be charged to
// the wrong one), and RLIMIT_NPROC is. The count misses zombies, which
// RLIMIT_NPROC counts too, so a limit reached by zombies alone goes
// unreported; bombs of live processes and threads do not.

// taskCounterInterval is how often the task count is read while the program
// runs: a fork bomb keeps the table full for far longer than that.
const taskCounterInterval = 10 * time.Millisecond

// countTasks moves init into a pids cgroup of the Sentry's, where
// everything it starts is born, and returns that cgroup's pids.current. The
// cgroup file system is mounted on dir only for the moment it takes and
// then detached (the open file keeps it): user code never sees it, and
// dir's own mount comes after. It needs CAP_SYS_ADMIN.
func countTasks(dir string) (*os.File, error) {
	if err := mount("cgroup", dir, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "pids"); err != nil {
		return nil, err
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	group := dir + "/sandbox"
	if err := os.Mkdir(group, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(group+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return nil, err
	}
	return os.Open(group + "/pids.current")
}

// taskWatch samples a task count until stopped and remembers whether it
// ever reached init's RLIMIT_NPROC.
type taskWatch struct {
	counter *os.File
	limit   uint64
	reached atomic.Bool
	stop    chan struct{}
	done    chan struct{}
}

// watchTasks starts sampling counter (nil, or no RLIMIT_NPROC: nothing is
// watched).
func watchTasks(counter *os.File) *taskWatch {
	var lim unix.Rlimit
	if counter == nil || unix.Getrlimit(unix.RLIMIT_NPROC, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return nil
	}
	w := &taskWatch{counter: counter, limit: lim.Cur, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(taskCounterInterval)
		defer tick.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *taskWatch) sample() {
	buf := make([]byte, 32)
	n, err := w.counter.ReadAt(buf, 0)
	if n == 0 && err != nil {
		return
	}
	if count, err := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64); err == nil && count >= w.limit {
		w.reached.Store(true)
	}
}

// finish takes a last sample (before anything is killed: what the program
// left running may still fill the table), stops the watch and reports
// whether the limit was reached.
func (w *taskWatch) finish() bool {
	if w == nil {
		return false
	}
	w.sample()
	close(w.stop)
	<-w.done
	return w.reached.Load()
}
