package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
)

// A burst sends every call at once and counts what came back: results
// (and among them the calls killed for the machine's memory or at their
// own limit), refusals by reason with the longest Retry-After, and other
// failures; latencies and waits are of the results only.
func TestBurstCountsWhatCameBack(t *testing.T) {
	fake := execapitest.New("python3.13")
	var n atomic.Int64
	fake.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		switch n.Add(1) % 5 {
		case 0:
			return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedCPU, RetryAfter: 2500 * time.Millisecond}}
		case 1:
			return execapitest.Response{Err: &execapi.Refusal{Reason: execapi.RefusedMemory, RetryAfter: time.Second}}
		case 2:
			return execapitest.Response{Result: execapitest.Exit(execapi.ExitKilled, "", execapi.Facts{MachineMemoryHit: true})}
		case 3:
			return execapitest.Response{Err: errors.New("sandbox init ended without a result")}
		}
		return execapitest.Response{Result: execapitest.Success(""), Delay: 10 * time.Millisecond}
	})
	r, err := Burst(context.Background(), fake, Workloads["sleep"], BurstOptions{Concurrency: 10, SandboxMemory: func() int64 { return 3 << 20 }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Succeeded != 4 || r.MachineMemoryKills != 2 || r.Failed != 2 || r.Refused["cpu"] != 2 || r.Refused["memory"] != 2 ||
		r.RetryAfterMax != 3 || r.PeakMemoryMiB != 3 || r.P50 <= 0 || r.P95 < r.P50 || r.FirstError == "" {
		t.Errorf("report: %+v", r)
	}
	if len(fake.Calls()) != 10 {
		t.Errorf("%d calls made, want 10", len(fake.Calls()))
	}
}
