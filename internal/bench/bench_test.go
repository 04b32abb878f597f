package bench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/images"
)

// measure runs exactly N times, never more than Concurrency at once, and
// stops at the first error.
func TestMeasureRunsNAtConcurrency(t *testing.T) {
	var runs, inFlight, peak atomic.Int64
	once := func() error {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		inFlight.Add(-1)
		runs.Add(1)
		return nil
	}
	st, err := measure(context.Background(), Options{N: 40, Concurrency: 3}, once)
	if err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 40 || peak.Load() > 3 {
		t.Errorf("runs %d peak %d, want 40 and at most 3", runs.Load(), peak.Load())
	}
	if !(st.P50 <= st.P95 && st.P95 <= st.P99) || st.Throughput <= 0 {
		t.Errorf("inconsistent stats %+v", st)
	}
	boom := errors.New("boom")
	if _, err := measure(context.Background(), Options{N: 10, Concurrency: 2}, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("error not reported: %v", err)
	}
}

// The machine's CPU time counter moves when this process burns CPU.
func TestCPUTimeAdvances(t *testing.T) {
	before := cpuTime()
	if before <= 0 {
		t.Fatalf("no CPU time from /proc/stat: %v", before)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	if after := cpuTime(); after <= before {
		t.Errorf("CPU time did not advance over a busy loop (%d iterations): %v -> %v", x, before, after)
	}
}

func TestIdleCommand(t *testing.T) {
	py := images.Runtime{Warm: "python", Command: []string{"/usr/bin/python3.13", "{file}"}}
	if got := IdleCommand(py); len(got) != 3 || got[0] != "/usr/bin/python3.13" || got[1] != "-c" {
		t.Errorf("python: %q", got)
	}
	if got := IdleCommand(images.Runtime{Command: []string{"/bin/bash", "{file}"}}); got != nil {
		t.Errorf("a runtime without a warm start has no idle command: %q", got)
	}
}

// Rounds alternate the two sides: 10 runs in 3 rounds are 4, 3 and 3 of
// each, sandbox first, and every run is counted once.
func TestMeasureInterleavedAlternates(t *testing.T) {
	var mu sync.Mutex
	var order []string
	side := func(name string) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		}
	}
	sb, bare, err := measureInterleaved(context.Background(), Options{N: 10, Concurrency: 1, Rounds: 3}, side("s"), side("b"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ""); got != "ssssbbbbsssbbbsssbbb" {
		t.Errorf("runs in the order %s", got)
	}
	if sb.Throughput <= 0 || bare.Throughput <= 0 {
		t.Errorf("stats %+v %+v", sb, bare)
	}
	order = nil
	if _, _, err := measureInterleaved(context.Background(), Options{N: 2, Concurrency: 1, Rounds: 9}, side("s"), side("b")); err != nil || strings.Join(order, "") != "sbsb" {
		t.Errorf("more rounds than runs: %v, order %v", err, order)
	}
}
