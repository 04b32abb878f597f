package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kernel adds a task's wait for a CPU to its schedstat only when the
// task next gets one (sched_info_arrive), so a task starved on a crowded
// machine reads as idle for as long as it is starved: exactly when
// admission most needs to see it computing. Neither cgroup v1 nor a
// kernel without schedstats enabled offers a live count (cgroup v2's
// cpu.pressure is one, but this machine kind runs v1), so the wait that
// is still going on is estimated here from two facts the kernel does give
// live: a task whose run+wait sum has not moved since an earlier reading,
// and which is runnable now (state R in /proc/<tid>/stat), has not been
// scheduled in since that reading (every arrival moves the sum, and a
// task cannot sleep without running), so it has waited at least since
// then. The estimate never exceeds the wait the kernel will add when the
// task runs, so the reported demand does not go backwards when it does.

// demandMemo remembers, per thread, the schedstat sum it last read and
// when it first read it, to estimate the wait still going on.
type demandMemo struct {
	mu   sync.Mutex
	seen map[string]taskSeen
}

// taskSeen is one thread's schedstat sum (run + wait, nanoseconds) and
// when it was first read at that value.
type taskSeen struct {
	sum   int64
	since time.Time
}

// taskReading is what one thread's /proc files say now: its schedstat
// run+wait sum and whether it is runnable (running or queued for a CPU);
// ok false when the thread is gone or the kernel keeps no schedstat.
type taskReading func(tid string) (sum int64, runnable, ok bool)

// total is the demand of tids at now: their schedstat sums plus, for each
// runnable thread whose sum has not moved since an earlier reading, the
// time since that reading. Threads no longer listed are forgotten.
func (m *demandMemo) total(tids []string, now time.Time, read taskReading) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[string]taskSeen, len(tids))
	var total time.Duration
	for _, tid := range tids {
		sum, runnable, ok := read(tid)
		if !ok {
			continue
		}
		total += time.Duration(sum)
		prev, known := m.seen[tid]
		if known && prev.sum == sum {
			if runnable {
				total += now.Sub(prev.since)
			}
			seen[tid] = prev
			continue
		}
		seen[tid] = taskSeen{sum: sum, since: now}
	}
	m.seen = seen
	return total
}

// readTask is a taskReading from /proc: "run wait slices" of schedstat
// (CONFIG_SCHED_INFO) and the state after the command's closing
// parenthesis in stat (the command itself may hold spaces and
// parentheses).
func readTask(tid string) (int64, bool, bool) {
	f := words(filepath.Join("/proc", tid, "schedstat"))
	if len(f) < 2 {
		return 0, false, false
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false, false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", tid, "stat"))
	if err != nil {
		return run + wait, false, true
	}
	s := string(stat)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return run + wait, len(rest) > 0 && rest[0] == "R", true
}
