package admission

import (
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// The sampler reads the machine's own counters: with three CPU-bound
// processes per CPU, some runnable task waits nearly all the time, and a
// reading says so within a window or two.
func TestSamplerSeesSaturation(t *testing.T) {
	s := NewSampler(0, 0)
	defer s.Close()
	if _, psi := readPSI(); psi != (s.Kind() == GaugePSI) {
		t.Errorf("kind %q where /proc/pressure/cpu reads %v", s.Kind(), psi)
	}
	spinUntilSaturated(t, s)
}

// Where the kernel has no PSI, the run queue stands in for it.
func TestRunQueueSamplerSeesSaturation(t *testing.T) {
	s := newSampler(0, 0, false)
	defer s.Close()
	if s.Kind() != GaugeRunQueue {
		t.Fatalf("kind %q", s.Kind())
	}
	spinUntilSaturated(t, s)
}

func spinUntilSaturated(t *testing.T, s *Sampler) {
	t.Helper()
	// Processes, not goroutines: Go runs at most GOMAXPROCS threads.
	for range 3 * runtime.NumCPU() {
		spin := exec.Command("sh", "-c", "while :; do :; done")
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { spin.Process.Kill(); spin.Wait() }()
	}
	deadline := time.Now().Add(10 * time.Second)
	var r CPUReading
	for time.Now().Before(deadline) {
		time.Sleep(DefaultWindow)
		if r = s.CPU(); r.Pressure >= 0.5 {
			t.Logf("%s gauge under %d spinning processes: %+v", s.Kind(), 3*runtime.NumCPU(), r)
			return
		}
	}
	t.Errorf("%s gauge never saw saturation: last %+v", s.Kind(), r)
}
