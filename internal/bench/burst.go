package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// BurstReport is one burst: Concurrency calls sent at the same moment,
// each once, through an executor with admission, as a hundred agents'
// calls arrive at a server.
type BurstReport struct {
	Workload    string `json:"workload"`
	Concurrency int    `json:"concurrency"`
	Round       int    `json:"round"`
	// Succeeded counts results (whatever the program's exit), Refused the
	// calls admission turned away (by reason), Failed other errors.
	Succeeded int            `json:"succeeded"`
	Refused   map[string]int `json:"refused"`
	Failed    int            `json:"failed"`
	// MachineMemoryKills counts results killed because the sandboxes
	// together ran out of the machine's budget (outcome machine_memory),
	// MemoryLimitKills those killed at their own memory_mb.
	MachineMemoryKills int `json:"machine_memory_kills"`
	MemoryLimitKills   int `json:"memory_limit_kills"`
	// P50, P95 and Max are the latencies of the calls that got a result,
	// in ms, from the burst's start; RetryAfterMax the longest Retry-After
	// of a refusal.
	P50           float64 `json:"p50_ms"`
	P95           float64 `json:"p95_ms"`
	Max           float64 `json:"max_ms"`
	RetryAfterMax float64 `json:"retry_after_max_s"`
	// WaitP50 and WaitP95 are how long the calls that got a result waited
	// for admission (the executor's EventAdmitted), in ms.
	WaitP50 float64 `json:"wait_p50_ms"`
	WaitP95 float64 `json:"wait_p95_ms"`
	// WallMS is the burst's length: its start to the last answer.
	WallMS float64 `json:"wall_ms"`
	// CPUPerCall is the machine's busy CPU time during the burst per call
	// that got a result (sandbox creation, the program, teardown, the
	// pool's refills), in ms.
	CPUPerCall float64 `json:"cpu_ms_per_call"`
	// PeakMemoryMiB is the most the sandboxes used at once (sampled from
	// the memory gauge), MachineMemoryMiB how much more memory the machine
	// used at its peak than before the burst (MemAvailable), both in MiB.
	PeakMemoryMiB    float64 `json:"peak_sandbox_memory_mib"`
	MachineMemoryMiB float64 `json:"peak_machine_memory_mib"`
	// LoadAverage is the machine's one-minute load average before the
	// burst: other work on the machine skews every figure.
	LoadAverage string `json:"load_average_before"`
	// FirstError is the first failure's message, if any.
	FirstError string `json:"first_error,omitempty"`
}

// BurstOptions configure Burst.
type BurstOptions struct {
	Concurrency int
	Round       int
	Network     string
	// SandboxMemory reports what the sandboxes use now (nil: not sampled).
	SandboxMemory func() int64
}

// Burst sends o.Concurrency calls of w at once through executor and waits
// for every answer. Refusals are counted, not errors: they are what
// admission is for.
func Burst(ctx context.Context, executor execapi.Executor, w Workload, o BurstOptions) (BurstReport, error) {
	if o.Concurrency < 1 {
		return BurstReport{}, errors.New("bench: the concurrency of a burst must be at least 1")
	}
	r := BurstReport{Workload: w.Name, Concurrency: o.Concurrency, Round: o.Round, Refused: map[string]int{}, LoadAverage: loadAverage()}
	req := execapi.Request{Runtime: w.Runtime, Code: w.Code, ReturnFiles: w.Return, Network: o.Network}
	if w.TimeoutMS > 0 {
		req.Limits.TimeoutMS = w.TimeoutMS
	}

	stopSampling := make(chan struct{})
	var sampled sync.WaitGroup
	var peakSandbox, peakMachine int64
	availBefore := memAvailable()
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if o.SandboxMemory != nil {
				peakSandbox = max(peakSandbox, o.SandboxMemory())
			}
			if a := memAvailable(); a > 0 && availBefore > 0 {
				peakMachine = max(peakMachine, availBefore-a)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		waits     []time.Duration
		wg        sync.WaitGroup
	)
	startGate := make(chan struct{})
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			t := time.Now()
			var waited time.Duration
			res, err := executor.Exec(ctx, req, func(ev execapi.Event) {
				if ev.Kind == execapi.EventAdmitted {
					waited = ev.Elapsed
				}
			})
			d := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			var refusal *execapi.Refusal
			switch {
			case errors.As(err, &refusal):
				r.Refused[string(refusal.Reason)]++
				r.RetryAfterMax = max(r.RetryAfterMax, float64(refusal.RetryAfterSeconds()))
			case err != nil:
				r.Failed++
				if r.FirstError == "" {
					r.FirstError = err.Error()
				}
			default:
				r.Succeeded++
				latencies = append(latencies, d)
				waits = append(waits, waited)
				switch res.Outcome {
				case execapi.OutcomeMachineMemory:
					r.MachineMemoryKills++
				case execapi.OutcomeMemoryLimit:
					r.MemoryLimitKills++
				}
				if res.ExitCode != 0 && r.FirstError == "" {
					r.FirstError = fmt.Sprintf("exit %d (%s): %s", res.ExitCode, res.Outcome, res.Note)
				}
			}
		}()
	}
	cpuBefore := cpuTime()
	start := time.Now()
	close(startGate)
	wg.Wait()
	r.WallMS = ms(time.Since(start))
	cpu := cpuTime() - cpuBefore
	close(stopSampling)
	sampled.Wait()
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if n := len(latencies); n > 0 {
		r.P50, r.P95, r.Max = percentile(latencies, 0.50), percentile(latencies, 0.95), percentile(latencies, 1)
		r.WaitP50, r.WaitP95 = percentile(waits, 0.50), percentile(waits, 0.95)
		r.CPUPerCall = ms(cpu) / float64(n)
	}
	r.PeakMemoryMiB = float64(peakSandbox) / (1 << 20)
	r.MachineMemoryMiB = float64(peakMachine) / (1 << 20)
	return r, nil
}

// percentile is the p-th percentile (0 to 1) of ds, in ms; it sorts ds.
func percentile(ds []time.Duration, p float64) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	n := len(ds)
	return ms(ds[max(0, min(n-1, int(p*float64(n)+0.5)-1))])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
