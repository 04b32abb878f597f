package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// HopReport is what a cluster's hop (front end -> NATS -> worker) adds to
// a call over the same engine called directly, measured in one run: the
// calls alternate between the two, one at a time, so that the machine's
// noise and the warm pool's state fall on both alike.
type HopReport struct {
	Workload   string `json:"workload"`
	N          int    `json:"n"`
	IntervalMS int64  `json:"interval_ms"`
	// Local is the engine called directly; Cluster through the hop.
	Local   Stats `json:"local"`
	Cluster Stats `json:"cluster"`
	// AddedP50 and AddedP99 are Cluster's percentiles less Local's, in ms;
	// PairedP50 is the median of each pair's difference (a call through
	// the hop less the direct call beside it), which the pool's state
	// disturbs less.
	AddedP50  float64 `json:"added_p50_ms"`
	AddedP99  float64 `json:"added_p99_ms"`
	PairedP50 float64 `json:"paired_p50_ms"`
}

// Hop measures w through local (the engine) and cluster (a front end over
// the same engine's worker), N calls each, alternating which goes first
// in each pair, after Warmup pairs; Interval pauses after each call.
func Hop(ctx context.Context, local, cluster execapi.Executor, w Workload, o Options) (HopReport, error) {
	if o.N < 1 {
		return HopReport{}, errors.New("bench: --n must be at least 1")
	}
	req := execapi.Request{Runtime: w.Runtime, Code: w.Code, ReturnFiles: w.Return, Network: o.Network}
	once := func(e execapi.Executor) (time.Duration, error) {
		start := time.Now()
		res, err := e.Exec(ctx, req, nil)
		took := time.Since(start)
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("%s exited %d: %s", w.Name, res.ExitCode, strings.TrimSpace(res.Stderr))
		}
		if o.Interval > 0 {
			time.Sleep(o.Interval)
		}
		return took, nil
	}
	var lat [2][]time.Duration
	var paired []time.Duration
	executors := [2]execapi.Executor{local, cluster}
	for i := -o.Warmup; i < o.N; i++ {
		var took [2]time.Duration
		for j := range 2 {
			k := (i + j) & 1 // who goes first alternates
			d, err := once(executors[k])
			if err != nil {
				return HopReport{}, fmt.Errorf("%s: %w", map[int]string{0: "local", 1: "cluster"}[k], err)
			}
			took[k] = d
		}
		if i >= 0 {
			lat[0], lat[1] = append(lat[0], took[0]), append(lat[1], took[1])
			paired = append(paired, took[1]-took[0])
		}
	}
	r := HopReport{Workload: w.Name, N: o.N, IntervalMS: o.Interval.Milliseconds(), Local: percentiles(lat[0]), Cluster: percentiles(lat[1])}
	r.AddedP50, r.AddedP99 = r.Cluster.P50-r.Local.P50, r.Cluster.P99-r.Local.P99
	r.PairedP50 = percentiles(paired).P50
	return r, nil
}

// percentiles are the latencies' p50, p95 and p99, in ms (nearest rank,
// as percentile has them: one definition for every report); it sorts lat,
// which must not be empty.
func percentiles(lat []time.Duration) Stats {
	return Stats{P50: percentile(lat, 0.50), P95: percentile(lat, 0.95), P99: percentile(lat, 0.99)}
}
