package namespaces

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/warm"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// BenchmarkZygoteCreation compares, in one run, the CPU a warm python
// sandbox costs (created with its pre-started interpreter, running
// print(1), destroyed) made through a zygote against made through the
// helper exec'ing python, for the light variant (nothing preloaded) and
// the heavy one (the image's preload). cpu-ms/sandbox is the spawner's or
// zygote's CPU and its sandboxes' (cpuGroup), spawner-cpu-ms/sandbox the
// spawner's or zygote's own part of it (its schedstat); what the engine's
// Go side does is the same in both and left out, and so is what the
// kernel's workers do to tear namespaces down. Run as root, e.g.
//
//	go test -run '^$' -bench ZygoteCreation -benchtime 100x ./internal/sandbox/namespaces/
func BenchmarkZygoteCreation(b *testing.B) {
	be := testenv.RealBackend[*Backend](b, level)
	img, rt := env.Image(b, "python3.13")
	warmArgv, err := warm.Command("python", rt.WarmCommand)
	if err != nil {
		b.Fatal(err)
	}
	for _, variant := range []struct{ name, preload string }{{"light", ""}, {"heavy", strings.Join(rt.Preload, ",")}} {
		for _, way := range []string{"exec", "zygote"} {
			b.Run(variant.name+"/"+way, func(b *testing.B) {
				sp, pre := be.currentSpawner(), &sandbox.Prestart{Argv: warmArgv, Env: pythonEnv(rt), Dir: "/tmp"}
				if variant.preload != "" {
					pre.Env = append(pre.Env, "SCRATCHRUN_PRELOAD="+variant.preload)
				}
				var via *zygoteProcess
				pid := sp.Pid()
				if way == "zygote" {
					z, zpre := startPythonZygote(b, be, img, rt, variant.preload)
					via, pre = z, zpre
					pid = zygoteHostPid(b, z)
				}
				cfg := testenv.SandboxConfig(img)
				cfg.Prestart = pre
				cfg.MemoryBytes = 1 << 30
				// One sandbox first: the zygote's pages and the image's
				// files are warm for both ways.
				group := cpuGroup(b, pid)
				createRun(b, be, cfg, via)
				load := loadavg()
				cpu0, own0 := groupCPU(b, group), schedRuntime(b, pid)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					createRun(b, be, cfg, via)
				}
				b.StopTimer()
				cpu, own := groupCPU(b, group)-cpu0, schedRuntime(b, pid)-own0
				b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/sandbox")
				b.ReportMetric(float64(own)/1e6/float64(b.N), "spawner-cpu-ms/sandbox")
				b.Logf("%s/%s: load %s -> %s", variant.name, way, load, loadavg())
			})
		}
	}
}

// createRun creates a sandbox with cfg (through via, when not nil), runs
// print(1) in it and destroys it.
func createRun(b *testing.B, be *Backend, cfg sandbox.Config, via *zygoteProcess) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := be.create(ctx, cfg, via)
	if err != nil {
		b.Fatal(err)
	}
	o, err := sb.Run(ctx, sandbox.Job{Argv: []string{"/usr/bin/python3.13", "/code/main.py"}, Env: cfg.Prestart.Env, Dir: "/tmp",
		Timeout: 30 * time.Second, Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("print(1)")}}})
	if err != nil || o.ExitCode != 0 {
		b.Fatalf("run: %+v %v", o, err)
	}
	if td := sb.Destroy(); !td.Purged {
		b.Fatalf("teardown: %v", td.Err)
	}
}

// cpuGroup is a cpuacct cgroup of the benchmark's that pid (the spawner or
// the zygote) is moved into, with every sandbox it makes from then on (the
// backend's groups are in other hierarchies): its cpuacct.usage counts
// their CPU, also once they are gone. It is removed when b ends.
func cpuGroup(b *testing.B, pid int) string {
	root := "/sys/fs/cgroup/cpuacct"
	if _, err := os.Stat(filepath.Join(root, "cpuacct.usage")); err != nil {
		b.Skip("no cgroup v1 cpuacct hierarchy to measure in")
	}
	dir := filepath.Join(root, fmt.Sprintf("zygote-bench-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		if err := os.Remove(dir); err != nil {
			b.Errorf("remove %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		b.Fatal(err)
	}
	return dir
}

// groupCPU is the cpuacct group's CPU use, in ns.
func groupCPU(b *testing.B, dir string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		b.Fatal(err)
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// schedRuntime is the CPU time process pid has run, in ns.
func schedRuntime(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		b.Fatal(err)
	}
	n, _ := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
	return n
}

// zygoteHostPid is the zygote's pid in ours: the child of the pid 1 its
// launcher forked.
func zygoteHostPid(t testing.TB, z *zygoteProcess) int {
	t.Helper()
	pid := z.Pid()
	for range 2 {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		f := strings.Fields(string(data))
		if err != nil || len(f) != 1 {
			t.Fatalf("the children of %d: %q %v", pid, data, err)
		}
		pid, _ = strconv.Atoi(f[0])
	}
	return pid
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(data))[:3], " ")
}
