package engine

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// readyIDs lists the ids of the ready sandboxes of one pool key.
func readyIDs(e *Engine, key execapi.PoolKey) []string {
	e.pool.mu.Lock()
	defer e.pool.mu.Unlock()
	var ids []string
	if st := e.pool.keys[key]; st != nil {
		for _, r := range st.ready {
			ids = append(ids, r.l.sb.ID())
		}
	}
	return ids
}

// cpuWeight reads the CPU weight file (v2 cpu.weight, v1 cpu.shares) of
// sandbox id's cgroup; "" when it has none.
func cpuWeight(t *testing.T, id string) string {
	t.Helper()
	for _, dir := range testNS.Cgroups().Leftovers() {
		if filepath.Base(dir) != id {
			continue
		}
		for _, file := range []string{"cpu.weight", "cpu.shares"} {
			if data, err := os.ReadFile(filepath.Join(dir, file)); err == nil {
				return strings.TrimSpace(string(data))
			}
		}
	}
	return ""
}

// With as many calls in flight as CPUs, the pool builds at background CPU
// weight, and the call that takes such a sandbox runs at the normal weight;
// with a CPU to spare it builds at the normal weight.
func TestPoolBuildsInBackgroundWhenBusy(t *testing.T) {
	e, _ := newPooledEngine(t, PoolConfig{Floor: 1, Max: 1, Runtimes: []string{"bash"}, Networks: []string{"none"}, IdleAfter: time.Minute})
	defer e.Close()
	if testNS.Cgroups() == nil {
		t.Skip("no cgroups: limits are not enforced here")
	}
	normal, low := "1024", "102" // cpu.shares
	if testNS.Cgroups().Version() == cgroups.V2 {
		normal, low = "100", "10" // cpu.weight
	}
	key := execapi.PoolKey{Runtime: "bash", Network: "none"}
	waitReady(t, e, execapi.PoolKey{Runtime: "bash", Network: "none"}, 1)
	if id := readyIDs(e, key)[0]; cpuWeight(t, id) != normal {
		t.Fatalf("sandbox built on an idle machine has CPU weight %q, want %q", cpuWeight(t, id), normal)
	}

	// Fill every CPU with calls of another runtime (cold: not pooled), then
	// let a bash call take the ready sandbox: its refill is built busy.
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := execapi.Request{Runtime: "python3.13", Code: "import time; time.sleep(8)", Limits: execapi.Limits{TimeoutMS: 20000}}
			if _, err := e.Exec(context.Background(), req, nil); err != nil {
				t.Errorf("long call: %v", err)
			}
		}()
	}
	defer wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); e.adm.Running() < runtime.NumCPU(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long calls were not admitted")
		}
	}
	if res := run(t, e, execapi.Request{Runtime: "bash", Code: "true"}); res.ExitCode != 0 {
		t.Fatalf("bash call: %+v", res)
	}
	waitReady(t, e, execapi.PoolKey{Runtime: "bash", Network: "none"}, 1)
	id := readyIDs(e, key)[0]
	if got := cpuWeight(t, id); got != low {
		t.Fatalf("sandbox built while every CPU had a call has CPU weight %q, want %q", got, low)
	}
	// The call that takes it runs at the normal weight.
	done := make(chan execapi.Result, 1)
	go func() {
		res, err := e.Exec(context.Background(), execapi.Request{Runtime: "bash", Code: "sleep 2"}, nil)
		if err != nil {
			t.Errorf("sleep call: %v", err)
		}
		done <- res
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got := cpuWeight(t, id); got == normal {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the call's sandbox kept CPU weight %q", got)
		}
	}
	if res := <-done; res.ExitCode != 0 {
		t.Errorf("sleep call: %+v", res)
	}
}
