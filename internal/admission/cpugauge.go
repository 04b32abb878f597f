package admission

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CPUReading is how loaded the CPUs were over the last short window.
type CPUReading struct {
	// Pressure is the share of the window in which some runnable task
	// waited for a CPU (0 to 1): near 0 while the CPUs keep up, near 1
	// while there is more to run than CPUs.
	Pressure float64
}

// CPUGauge reports the CPUs' recent load. Both averages lag: the
// controller counts a call as starting until a whole window lies after
// its start (Settings.Settle).
type CPUGauge interface {
	CPU() CPUReading
}

// Sampler is the machine's CPUGauge: one goroutine samples, every period,
// the kernel's cumulative counters, and a reading is their change over
// the last window. Pressure comes from PSI (/proc/pressure/cpu, "some
// total", in microseconds) where the kernel has it, else from the run
// queue (/proc/loadavg's running count: a sample counts as waiting when
// more tasks run than there are CPUs). The ten-second
// average the kernel prints itself is far too slow for a burst of calls
// that arrives at once, hence the short window of the raw counter.
type Sampler struct {
	kind   string
	period time.Duration
	window time.Duration
	ncpu   int
	read   func() (waitedUS float64, ok bool)

	mu      sync.Mutex
	samples []cpuSample // oldest first, spanning at least window
	waited  float64     // the run queue's cumulative waiting, in microseconds
	stop    chan struct{}
	done    chan struct{}
}

type cpuSample struct {
	at       time.Time
	waitedUS float64
}

// Sampling defaults: a reading covers DefaultWindow, sampled every
// DefaultPeriod.
const (
	DefaultPeriod = 25 * time.Millisecond
	DefaultWindow = 100 * time.Millisecond
)

// Gauge kinds, as Info names them.
const (
	GaugePSI      = "psi"
	GaugeRunQueue = "run_queue"
)

// NewSampler starts sampling (period and window 0: the defaults). Close
// stops it.
func NewSampler(period, window time.Duration) *Sampler {
	_, psi := readPSI()
	return newSampler(period, window, psi)
}

// newSampler is NewSampler, from PSI or (psi false) from the run queue.
func newSampler(period, window time.Duration, psi bool) *Sampler {
	if period <= 0 {
		period = DefaultPeriod
	}
	if window < 2*period {
		window = max(DefaultWindow, 2*period)
	}
	s := &Sampler{period: period, window: window, ncpu: runtime.NumCPU(), stop: make(chan struct{}), done: make(chan struct{})}
	if psi {
		s.kind, s.read = GaugePSI, readPSI
	} else {
		s.kind, s.read = GaugeRunQueue, s.readRunQueue
	}
	s.sample()
	go s.loop()
	return s
}

// Kind says where pressure comes from: GaugePSI or GaugeRunQueue.
func (s *Sampler) Kind() string { return s.kind }

// Close stops sampling.
func (s *Sampler) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *Sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.period)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *Sampler) sample() {
	waited, _ := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.samples = append(s.samples, cpuSample{at: now, waitedUS: waited})
	// Keep one sample at or before the window's start.
	for len(s.samples) > 2 && now.Sub(s.samples[1].at) >= s.window {
		s.samples = s.samples[1:]
	}
}

// CPU implements CPUGauge: the change of the counters from the sample
// that starts the window to the newest.
func (s *Sampler) CPU() CPUReading {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) < 2 {
		return CPUReading{}
	}
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	var r CPUReading
	if us := float64(last.at.Sub(first.at).Microseconds()); us > 0 {
		r.Pressure = clamp01((last.waitedUS - first.waitedUS) / us)
	}
	return r
}

func clamp01(v float64) float64 { return min(1, max(0, v)) }

// readPSI reads the cumulative time, in microseconds, some task waited for
// a CPU. A kernel built without PSI, or booted with psi=0, has no file or
// refuses to read it (EOPNOTSUPP).
func readPSI() (float64, bool) {
	data, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// errNoLoadavg is what readRunQueue reports on a host without /proc/loadavg.
var errNoLoadavg = errors.New("no /proc/loadavg")

// readRunQueue turns /proc/loadavg's count of running tasks into a
// cumulative waiting time, as PSI keeps one: each period in which more
// tasks ran than there are CPUs (the reader itself not counted) counts
// whole.
func (s *Sampler) readRunQueue() (float64, bool) {
	running, err := runningTasks()
	if err != nil {
		return s.waited, false
	}
	if running-1 > s.ncpu {
		s.waited += float64(s.period.Microseconds())
	}
	return s.waited, true
}

// runningTasks is the fourth field's numerator of /proc/loadavg ("2/209").
func runningTasks() (int, error) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, errNoLoadavg
	}
	f := strings.Fields(string(data))
	if len(f) < 4 {
		return 0, errNoLoadavg
	}
	n, _, _ := strings.Cut(f[3], "/")
	return strconv.Atoi(n)
}
