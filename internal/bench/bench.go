// Package bench measures the engine against the same interpreter run bare
// (the same binary from the same image, chrooted, no isolation) in the same
// run, and reports percentiles, throughput and their ratios. Times are only
// ever compared within one run; nothing here asserts an absolute time.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
)

// Workload is one thing to run both ways.
type Workload struct {
	Name    string
	Runtime string
	Code    string
	Return  []string
	// Bare is the command line run with chroot into the image, and BareEnv
	// its environment.
	Bare    []string
	BareEnv []string
	// TimeoutMS, when set, is the calls' timeout (the default otherwise).
	TimeoutMS int
}

// chartCode is the README's chart example; it writes the PNG to $OUT, or to
// stdout when OUT is unset (the bare run, which has no /tmp of its own).
const chartCode = `import os, sys
import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 4 * np.pi, 400)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(x, np.sin(x), label="sin x")
ax.plot(x, np.sin(x) * np.exp(-x / 6), label="damped")
ax.set_title("Rendered in a ScratchRun sandbox")
ax.legend()
fig.tight_layout()
out = os.environ.get("OUT")
fig.savefig(out if out else sys.stdout.buffer, format="png", dpi=100)
`

// busyCode spins until its process has used two seconds of CPU.
const busyCode = "import time\nwhile time.process_time() < 2:\n    pass\n"

// memoryCode takes 96 MiB and holds it for two seconds.
const memoryCode = "import time\nheld = b'x' * (96 << 20)\ntime.sleep(2)\n"

var pyEnv = []string{"PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8", "MPLBACKEND=Agg"}

// Workloads are the benchmark's named workloads.
var Workloads = map[string]Workload{
	"python-print": {Name: "python-print", Runtime: "python3.13", Code: "print(1)",
		Bare: []string{"/usr/bin/python3.13", "-c", "print(1)"}, BareEnv: pyEnv},
	"bash-echo": {Name: "bash-echo", Runtime: "bash", Code: "echo hi",
		Bare: []string{"/bin/bash", "-c", "echo hi"}, BareEnv: pyEnv},
	"node-print": {Name: "node-print", Runtime: "node20", Code: "console.log(1)",
		Bare: []string{"/usr/bin/node", "-e", "console.log(1)"}, BareEnv: pyEnv},
	// sleep is an agent's code that waits (on an API, a download, a retry
	// loop): three seconds of nothing.
	"sleep": {Name: "sleep", Runtime: "python3.13", Code: "import time; time.sleep(3)",
		Bare: []string{"/usr/bin/python3.13", "-c", "import time; time.sleep(3)"}, BareEnv: pyEnv},
	// cpu is CPU-bound code: a busy loop until the process has had two
	// seconds of CPU, so that sharing a CPU makes it take longer.
	"cpu": {Name: "cpu", Runtime: "python3.13", Code: busyCode, TimeoutMS: 30000,
		Bare: []string{"/usr/bin/python3.13", "-c", busyCode}, BareEnv: pyEnv},
	// memory takes 96 MiB, within the default 256 MB limit, and holds it
	// for two seconds: many at once outgrow a small memory budget after
	// they were admitted.
	"memory": {Name: "memory", Runtime: "python3.13", Code: memoryCode,
		Bare: []string{"/usr/bin/python3.13", "-c", memoryCode}, BareEnv: pyEnv},
	"chart": {Name: "chart", Runtime: "python3.13", Code: "import os\nos.environ['OUT'] = '/tmp/chart.png'\n" + chartCode,
		Return: []string{"/tmp/chart.png"},
		Bare:   []string{"/usr/bin/python3.13", "-c", chartCode}, BareEnv: pyEnv},
}

// Stats summarise one side of a run.
type Stats struct {
	P50        float64 `json:"p50_ms"`
	P95        float64 `json:"p95_ms"`
	P99        float64 `json:"p99_ms"`
	Throughput float64 `json:"throughput_per_s"`
	// CPUPerRun is the machine's busy CPU time per run (every process and
	// kernel thread, from /proc/stat): for the sandbox side it includes
	// building and tearing down sandboxes, a warm pool's refills and the
	// kernel's deferred namespace cleanup, so it explains throughput where
	// latency cannot. Anything else running on the machine inflates it.
	CPUPerRun float64 `json:"cpu_ms_per_run"`
}

// Report is the outcome of one benchmark run, in the JSON shape scripts read.
type Report struct {
	Workload        string  `json:"workload"`
	N               int     `json:"n"`
	Concurrency     int     `json:"concurrency"`
	Network         string  `json:"network"`
	IntervalMS      int64   `json:"interval_ms"`
	Sandbox         Stats   `json:"sandbox"`
	Bare            Stats   `json:"bare"`
	RatioP50        float64 `json:"ratio_p50"`
	RatioThroughput float64 `json:"ratio_throughput"`
	// Rounds is how many alternating rounds the runs took.
	Rounds int `json:"rounds"`
}

// Options of one run.
type Options struct {
	N, Concurrency int
	Network        string
	// Warmup runs are made (both ways) and discarded first.
	Warmup int
	// Interval is a pause after each run (on each worker), as an agent
	// thinking between calls leaves one; it lets a warm pool refill. It is
	// not counted in latencies, and throughput is then computed from the
	// busy time alone.
	Interval time.Duration
	// Rounds alternates sandbox and bare runs in this many rounds (0 or 1:
	// all sandbox runs, then all bare ones).
	Rounds int
}

// Run measures w through exec and bare from rt's image.
func Run(ctx context.Context, executor execapi.Executor, rt images.Resolved, w Workload, o Options) (Report, error) {
	if o.N < 1 || o.Concurrency < 1 {
		return Report{}, errors.New("bench: --n and --concurrency must be at least 1")
	}
	req := execapi.Request{Runtime: w.Runtime, Code: w.Code, ReturnFiles: w.Return, Network: o.Network}
	sandboxOnce := func() error {
		res, err := executor.Exec(ctx, req, nil)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("%s exited %d: %s", w.Name, res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		if len(w.Return) > 0 && len(res.Files) != len(w.Return) {
			return fmt.Errorf("%s returned %d files, want %d (%s)", w.Name, len(res.Files), len(w.Return), res.Note)
		}
		return nil
	}
	bareOnce := func() error { return runBare(ctx, rt.RootFS, w) }
	for i := 0; i < o.Warmup; i++ {
		if err := sandboxOnce(); err != nil {
			return Report{}, err
		}
		if err := bareOnce(); err != nil {
			return Report{}, err
		}
	}
	sb, bare, err := measureInterleaved(ctx, o, sandboxOnce, bareOnce)
	if err != nil {
		return Report{}, err
	}
	r := Report{Workload: w.Name, N: o.N, Concurrency: o.Concurrency, Network: o.Network, IntervalMS: o.Interval.Milliseconds(), Sandbox: sb, Bare: bare, Rounds: roundsOf(o)}
	if bare.P50 > 0 {
		r.RatioP50 = sb.P50 / bare.P50
	}
	if bare.Throughput > 0 {
		r.RatioThroughput = sb.Throughput / bare.Throughput
	}
	return r, nil
}

// runBare runs the workload's interpreter from the image with chroot: the
// same binary and libraries, no namespaces, no limits.
func runBare(ctx context.Context, rootfs string, w Workload) error {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{rootfs}, w.Bare...)...)
	cmd.Env = w.BareEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bare %s: %v: %s", w.Name, err, firstLine(out))
	}
	return nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// measureInterleaved measures sandbox and bare in o.Rounds alternating
// rounds (at least one, at most N), each of its share of the N runs: a
// machine whose speed drifts during the run (another VM on the host, a
// CPU's clock) then slows both sides alike, where two long blocks, one
// after the other, would put the drift in the ratio.
func measureInterleaved(ctx context.Context, o Options, sandbox, bare func() error) (Stats, Stats, error) {
	rounds := roundsOf(o)
	var sb, br sample
	for r := range rounds {
		n := o.N / rounds
		if r < o.N%rounds {
			n++ // the remainder, one more in each of the first rounds
		}
		if err := sb.add(ctx, o, n, sandbox); err != nil {
			return Stats{}, Stats{}, fmt.Errorf("sandbox: %w", err)
		}
		if err := br.add(ctx, o, n, bare); err != nil {
			return Stats{}, Stats{}, fmt.Errorf("bare: %w", err)
		}
	}
	return sb.stats(), br.stats(), nil
}

// roundsOf is how many rounds o's runs take: Rounds, at least one, at
// most N.
func roundsOf(o Options) int { return min(max(o.Rounds, 1), o.N) }

// measure runs once o.N times on o.Concurrency workers.
func measure(ctx context.Context, o Options, once func() error) (Stats, error) {
	var s sample
	if err := s.add(ctx, o, o.N, once); err != nil {
		return Stats{}, err
	}
	return s.stats(), nil
}

// sample gathers the rounds of one side.
type sample struct {
	lat       []time.Duration
	wall, cpu time.Duration
}

func (s *sample) stats() Stats {
	st := percentiles(s.lat)
	st.Throughput, st.CPUPerRun = float64(len(s.lat))/s.wall.Seconds(), float64(s.cpu.Microseconds())/1000/float64(len(s.lat))
	return st
}

// add runs once n times on o.Concurrency workers and adds the latencies,
// the wall time (with an Interval, the busy time alone) and the machine's
// CPU time.
func (s *sample) add(ctx context.Context, o Options, n int, once func() error) error {
	lat := make([]time.Duration, n)
	var next int
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	cpuBefore := cpuTime()
	start := time.Now()
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= n || firstErr != nil
				mu.Unlock()
				if stop || ctx.Err() != nil {
					return
				}
				t := time.Now()
				if err := once(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				lat[i] = time.Since(t)
				if o.Interval > 0 {
					time.Sleep(o.Interval)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := cpuTime() - cpuBefore
	if o.Interval > 0 {
		var busy time.Duration
		for _, l := range lat {
			busy += l
		}
		wall = busy / time.Duration(o.Concurrency)
	}
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.lat = append(s.lat, lat...)
	s.wall += wall
	s.cpu += cpu
	return nil
}

// cpuTime is the machine's busy CPU time so far: user, nice, system, irq,
// softirq and steal time of all CPUs in /proc/stat (in USER_HZ, 100 per
// second on Linux). Not this process's rusage: sandbox processes are not all
// its (waited) descendants, and namespace teardown runs in kernel threads.
func cpuTime() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// memAvailable is the machine's MemAvailable, in bytes (0 when unknown).
func memAvailable() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadAverage is /proc/loadavg's three averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
