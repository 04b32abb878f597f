//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/engine"
)

// idleMemoryReport is what `bench --idle-memory --json` prints.
type idleMemoryReport struct {
	// PooledMiB is the average cgroup memory of a ready warm sandbox, per
	// runtime/network[/variant].
	PooledMiB map[string]float64 `json:"pooled_mib"`
	// BareInterpreterMiB is the anonymous memory of each runtime's
	// interpreter waiting bare, with nothing imported.
	BareInterpreterMiB map[string]float64 `json:"bare_interpreter_mib"`
	// InitMiB is the average anonymous memory of a sandbox's init process
	// (part of PooledMiB: init joins its cgroup before it starts).
	InitMiB float64 `json:"init_mib"`
}

// benchIdleMemory builds two warm sandboxes of every runtime and variant,
// lets them settle, and reports their memory next to each interpreter's own.
func benchIdleMemory(ctx context.Context, setup engineSetup, asJSON bool) int {
	pc := engine.PoolConfig{Floor: 2, Max: 2, IdleAfter: time.Hour, Networks: []string{"none"}}
	eng, err := setup.withPool(pc).open(newLogger(setup.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	defer eng.Close()
	if !eng.WaitWarm(ctx, 5*time.Minute) {
		fmt.Fprintln(os.Stderr, "scratchrun bench: the warm pool did not fill in 5 minutes")
		return exitInternal
	}
	// A heavy sandbox reports ready before its imports finish.
	time.Sleep(5 * time.Second)
	const mib = 1 << 20
	r := idleMemoryReport{PooledMiB: map[string]float64{}, BareInterpreterMiB: map[string]float64{}}
	for k, v := range eng.PoolMemory() {
		r.PooledMiB[k.String()] = float64(v) / mib
	}
	initAnon, _, err := bench.InitMemory(os.Getpid())
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
		return exitInternal
	}
	r.InitMiB = float64(initAnon) / mib
	for _, rt := range eng.Runtimes() {
		argv := bench.IdleCommand(rt)
		if argv == nil {
			continue
		}
		resolved, err := openAndResolve(setup.dataDir, rt.Name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: %v\n", err)
			return exitInternal
		}
		anon, err := bench.BareIdleMemory(ctx, resolved, argv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun bench: bare %s: %v\n", rt.Name, err)
			return exitInternal
		}
		r.BareInterpreterMiB[rt.Name] = float64(anon) / mib
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(r)
		return 0
	}
	keys := make([]string, 0, len(r.PooledMiB))
	for k := range r.PooledMiB {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("idle warm sandbox memory: cgroup usage, average of 2 ready (of which init's own anonymous memory: %.1f MiB)\n", r.InitMiB)
	fmt.Printf("%-26s %10s %22s\n", "", "sandbox", "interpreter bare (anon)")
	for _, k := range keys {
		runtime := strings.SplitN(k, "/", 2)[0]
		bare := "-"
		if v, ok := r.BareInterpreterMiB[runtime]; ok && strings.HasSuffix(k, "/light") {
			bare = fmt.Sprintf("%.1f MiB", v)
		}
		fmt.Printf("%-26s %6.1f MiB %22s\n", k, r.PooledMiB[k], bare)
	}
	return 0
}

// openAndResolve returns the root file system of runtime name's image.
func openAndResolve(dataDir, name string) (string, error) {
	store, err := openStore(dataDir)
	if err != nil {
		return "", err
	}
	rt, err := store.Resolve(name)
	if err != nil {
		return "", err
	}
	return rt.RootFS, nil
}
