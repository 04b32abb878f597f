package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These measure admission alone with many calls running: gauges and
// meters that read real files shaped like the kernel's (a cgroup's
// memory.usage_in_bytes and memory.stat, a sandbox's tasks and each
// thread's schedstat and stat), so that what the controller reads, and
// when, costs what it costs on a host. Compare running=0 with running=500
// in the same run: admission should not slow with load.

// fakeHost is a directory tree shaped like the files the gauges read.
type fakeHost struct{ dir string }

func newFakeHost(b testing.TB) fakeHost {
	h := fakeHost{dir: b.TempDir()}
	h.write(b, "memory.usage_in_bytes", "104857600\n")
	h.write(b, "memory.stat", "cache 1000\nrss 2000\ntotal_cache 4096\ntotal_inactive_file 8192\ntotal_active_file 0\n")
	return h
}

func (h fakeHost) write(b testing.TB, name, content string) {
	p := filepath.Join(h.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

// memory reads usage less inactive file pages, as the cgroup gauge does.
func (h fakeHost) memory() int64 {
	usage := readNumber(filepath.Join(h.dir, "memory.usage_in_bytes"))
	data, _ := os.ReadFile(filepath.Join(h.dir, "memory.stat"))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return usage - n
		}
	}
	return usage
}

// sandbox makes sandbox i's files (one thread, sleeping) and returns a
// meter that reads them as the cgroup CPU meter does: the tasks file,
// then each thread's schedstat and stat.
func (h fakeHost) sandbox(b testing.TB, i int) func() (time.Duration, bool) {
	tid := strconv.Itoa(100000 + i)
	h.write(b, filepath.Join("cg", tid, "tasks"), tid+"\n")
	h.write(b, filepath.Join("proc", tid, "schedstat"), "1234567 89012 34\n")
	h.write(b, filepath.Join("proc", tid, "stat"), tid+" (python3) S 1 1 1 0 -1 4194560 100 0 0 0 1 0 0 0 20 0 1 0 1 1 1\n")
	tasks := filepath.Join(h.dir, "cg", tid, "tasks")
	return func() (time.Duration, bool) {
		data, err := os.ReadFile(tasks)
		if err != nil {
			return 0, false
		}
		var total time.Duration
		for _, t := range strings.Fields(string(data)) {
			f, err := os.ReadFile(filepath.Join(h.dir, "proc", t, "schedstat"))
			if err != nil {
				continue
			}
			fields := strings.Fields(string(f))
			run, _ := strconv.ParseInt(fields[0], 10, 64)
			wait, _ := strconv.ParseInt(fields[1], 10, 64)
			if _, err := os.ReadFile(filepath.Join(h.dir, "proc", t, "stat")); err != nil {
				continue
			}
			total += time.Duration(run + wait)
		}
		return total, true
	}
}

func readNumber(path string) int64 {
	data, _ := os.ReadFile(path)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// BenchmarkAcquireRelease admits, starts and releases calls from parallel callers
// (as many as may start at once) beside running calls that sleep, each
// with a meter over its files, under the servers' default conditions
// (memory budget, CPU threshold) with gauges that read files.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, running := range []int{0, 500} {
		b.Run(fmt.Sprintf("running=%d", running), func(b *testing.B) {
			h := newFakeHost(b)
			c := New(Settings{MemoryBudget: 64 << 30, CallFloor: DefaultCallFloor, CPUThreshold: DefaultCPUThreshold,
				MaxQueue: 1024, Settle: 3 * time.Millisecond}, Gauges{Memory: h.memory, CPU: &fakeCPU{}})
			defer c.Close()
			held := make([]*Ticket, 0, running)
			for i := range running {
				// AcquireRunning: the sleepers are admitted past the
				// starting allowance, then started with their meters.
				t, err := c.AcquireRunning(context.Background(), "sleepers", time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				t.Started(h.sandbox(b, i))
				held = append(held, t)
			}
			defer func() {
				for _, t := range held {
					t.Release(time.Second)
				}
			}()
			if running > 0 {
				// Let their first readings be taken, so that what remains
				// is the steady state: each looked at again now and then.
				time.Sleep(lightRecheck + 100*time.Millisecond)
			}
			// GOMAXPROCS callers: no more than MinStarting (one per CPU).
			b.SetParallelism(1)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, err := c.Acquire(context.Background(), "bench", time.Second)
					if err != nil {
						b.Error(err)
						return
					}
					// A call whose sandbox started and is gone (one
					// released before its job began keeps its floor
					// until memory is read: it may have made a
					// session's sandbox).
					t.Started(nil)
					t.Release(0)
				}
			})
		})
	}
}
