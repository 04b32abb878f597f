package bench

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// CPUSample is a reading of the counters the creation benchmark takes the
// difference of: CPU time charged to the benchmark's own processes (the
// engine, the spawner and every sandbox it starts: Meter's job to keep
// them in one account), to the kernel's threads (deferred namespace and
// mount teardown runs in kworkers), and the whole machine's busy time.
type CPUSample struct {
	Accounted, KernelThreads, Machine time.Duration
	// Engine is this process's own part of Accounted and Spawner the
	// spawner helper's (the rest is the sandboxes', or the bare
	// processes').
	Engine, Spawner time.Duration
}

// Meter reads CPUSamples.
type Meter interface {
	Sample() CPUSample
}

// Creator makes one waiting thing (a sandbox, a bare process in fresh
// namespaces) and returns what ends it.
type Creator func(ctx context.Context) (end func() error, err error)

// CreateKind is one row of the creation benchmark.
type CreateKind struct {
	Name   string
	Create Creator
	// Baseline marks the row the others are compared with.
	Baseline bool
}

// CreateOptions of one creation benchmark.
type CreateOptions struct {
	// N things of each kind are created, all kept waiting, then ended.
	N int
	// Rounds repeat every kind, interleaved, so that other load on the
	// machine falls on all kinds alike; the median round is reported.
	Rounds int
	// Settle is waited after the creations (a pre-started interpreter goes
	// on starting after its sandbox reports ready) and after the ends (the
	// kernel frees namespaces after the last process is gone). Idle time
	// costs no CPU, so it only makes the counts complete.
	Settle time.Duration
}

// CreateRow is one kind's CPU per thing, in milliseconds, the median of the
// rounds (each figure's median on its own).
type CreateRow struct {
	Name string `json:"name"`
	// Create and End are the accounted CPU (the benchmark's processes and
	// the kernel's threads) of creating one and of ending it; Total is
	// their sum.
	Create float64 `json:"create_cpu_ms"`
	End    float64 `json:"end_cpu_ms"`
	Total  float64 `json:"total_cpu_ms"`
	// KernelThreads, Engine and Spawner are the kernel threads', the
	// engine's and the spawner helper's parts of Total.
	KernelThreads float64 `json:"kernel_threads_cpu_ms"`
	Engine        float64 `json:"engine_cpu_ms"`
	Spawner       float64 `json:"spawner_cpu_ms"`
	// Machine is the machine's busy time over both phases per thing:
	// anything else running inflates it.
	Machine float64 `json:"machine_cpu_ms"`
	// Ratio is Total against the baseline row's Total.
	Ratio float64 `json:"ratio_to_baseline"`
}

// CreateReport is what `bench --create` prints.
type CreateReport struct {
	N      int         `json:"n"`
	Rounds int         `json:"rounds"`
	Load   string      `json:"load_before"`
	Rows   []CreateRow `json:"rows"`
}

// MeasureCreate measures the CPU cost of creating and ending kinds, N at a
// time, in o.Rounds interleaved rounds.
func MeasureCreate(ctx context.Context, m Meter, kinds []CreateKind, o CreateOptions) (CreateReport, error) {
	if o.N <= 0 || o.Rounds <= 0 {
		return CreateReport{}, fmt.Errorf("creation benchmark needs N and rounds above 0 (got %d, %d)", o.N, o.Rounds)
	}
	r := CreateReport{N: o.N, Rounds: o.Rounds, Load: loadAverage()}
	rounds := make([][]CreateRow, len(kinds))
	for range o.Rounds {
		for i, k := range kinds {
			row, err := createRound(ctx, m, k, o)
			if err != nil {
				return CreateReport{}, fmt.Errorf("%s: %w", k.Name, err)
			}
			rounds[i] = append(rounds[i], row)
		}
	}
	base := -1.0
	for i, k := range kinds {
		row := medianRow(rounds[i])
		row.Name = k.Name
		if k.Baseline {
			base = row.Total
		}
		r.Rows = append(r.Rows, row)
	}
	for i := range r.Rows {
		if base > 0 {
			r.Rows[i].Ratio = r.Rows[i].Total / base
		}
	}
	return r, nil
}

// createRound creates o.N of k, waits, ends them all, waits, and returns
// the CPU per thing.
func createRound(ctx context.Context, m Meter, k CreateKind, o CreateOptions) (CreateRow, error) {
	ends := make([]func() error, 0, o.N)
	endAll := func() error {
		var first error
		for _, end := range ends {
			if err := end(); err != nil && first == nil {
				first = err
			}
		}
		ends = nil
		return first
	}
	start := m.Sample()
	for range o.N {
		end, err := k.Create(ctx)
		if err != nil {
			_ = endAll()
			return CreateRow{}, err
		}
		ends = append(ends, end)
	}
	sleep(ctx, o.Settle)
	created := m.Sample()
	if err := endAll(); err != nil {
		return CreateRow{}, err
	}
	sleep(ctx, o.Settle)
	ended := m.Sample()
	if err := ctx.Err(); err != nil {
		return CreateRow{}, err
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(o.N) }
	own := func(a, b CPUSample) time.Duration {
		return b.Accounted - a.Accounted + b.KernelThreads - a.KernelThreads
	}
	row := CreateRow{
		Create:        per(own(start, created)),
		End:           per(own(created, ended)),
		KernelThreads: per(ended.KernelThreads - start.KernelThreads),
		Engine:        per(ended.Engine - start.Engine),
		Spawner:       per(ended.Spawner - start.Spawner),
		Machine:       per(ended.Machine - start.Machine),
	}
	row.Total = row.Create + row.End
	return row, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// medianRow is each figure's median over rows.
func medianRow(rows []CreateRow) CreateRow {
	med := func(get func(CreateRow) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = get(r)
		}
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return CreateRow{
		Create:        med(func(r CreateRow) float64 { return r.Create }),
		End:           med(func(r CreateRow) float64 { return r.End }),
		Total:         med(func(r CreateRow) float64 { return r.Total }),
		KernelThreads: med(func(r CreateRow) float64 { return r.KernelThreads }),
		Engine:        med(func(r CreateRow) float64 { return r.Engine }),
		Spawner:       med(func(r CreateRow) float64 { return r.Spawner }),
		Machine:       med(func(r CreateRow) float64 { return r.Machine }),
	}
}
