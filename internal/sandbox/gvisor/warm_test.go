package gvisor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine/warm"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// warmConfig is a warm Python sandbox's configuration, as the engine's pool
// builds it: the maximum memory limit and a pre-started interpreter.
func warmConfig(t *testing.T, preload string) sandbox.Config {
	t.Helper()
	img, rt := env.Image(t, "python3.13")
	argv, err := warm.Command(rt.Warm, rt.WarmCommand)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	if preload != "" {
		env = append(env, "SCRATCHRUN_PRELOAD="+preload)
	}
	cfg := testenv.SandboxConfig(img)
	cfg.MemoryBytes = 512 << 20
	cfg.Warm = true
	cfg.Prestart = &sandbox.Prestart{Argv: argv, Env: env, Dir: "/tmp"}
	return cfg
}

// A pre-started interpreter runs the job's code file with the job's
// environment, and has imported what it was asked to before the job came.
func TestWarmInterpreterRunsJob(t *testing.T) {
	r := run(t, warmConfig(t, "json"), sandbox.Job{
		Argv:  []string{"/usr/bin/python3.13", "/code/main.py"},
		Env:   []string{"PATH=/usr/bin:/bin", "GREETING=hello"},
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("import os, sys\nprint(os.environ['GREETING'], 'json' in sys.modules, sys.argv)")}},
	})
	if r.ExitCode != 0 || r.Stdout != "hello True ['/code/main.py']\n" {
		t.Errorf("got %+v stdout %q stderr %q", r.Outcome, r.Stdout, r.Stderr)
	}
}

// A job whose memory limit is below what the warm sandbox already uses is
// refused before anything of it runs, with ErrLimitBelowUsage.
func TestWarmLimitBelowUsage(t *testing.T) {
	b := backend(t)
	s, err := b.Create(context.Background(), warmConfig(t, "numpy,pandas,matplotlib.pyplot"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	// The limit asked for plus the Sentry's allowance must be below what
	// cannot be reclaimed (the Sentry's heap, the interpreter's memory in
	// the Sentry's memory file); the image's page cache, also charged, can.
	// Crossing that mark is not enough: mid-import much of the usage is the
	// image's page cache, which the kernel reclaims to meet the new limit.
	// Wait for the imports to finish (usage steady for 2 s).
	deadline := time.Now().Add(60 * time.Second)
	want := 1<<20 + b.overhead + 32<<20
	last, steadySince := int64(-1), time.Now()
	for time.Now().Before(deadline) {
		usage := s.(*gvSandbox).MemoryUsage()
		if usage > last+1<<20 {
			last, steadySince = usage, time.Now()
		}
		if usage >= want && time.Since(steadySince) >= 2*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond) // still importing
	}
	t.Logf("warm sandbox uses %d MiB", s.(*gvSandbox).MemoryUsage()>>20)
	var out strings.Builder
	_, err = s.Run(context.Background(), sandbox.Job{Argv: []string{"/usr/bin/python3.13", "/code/main.py"}, Dir: "/tmp",
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("print('ran')")}}, MemoryBytes: 1 << 20,
		Timeout: 10 * time.Second, MaxReturnBytes: 1, Stdout: &out})
	if !errors.Is(err, sandbox.ErrLimitBelowUsage) || out.Len() > 0 {
		t.Errorf("Run with a limit below usage: %v, output %q", err, out.String())
	}
}
