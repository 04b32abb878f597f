package namespaces

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// zygoteRun creates a sandbox through via with a pre-started interpreter,
// runs src as /code/main.py in it with argv, destroys it, and returns what
// it printed.
func zygoteRun(t *testing.T, b *Backend, via *zygoteProcess, img sandbox.Image, prestart *sandbox.Prestart, argv []string, src string) (sandbox.Outcome, string, string) {
	t.Helper()
	cfg := testenv.SandboxConfig(img)
	cfg.Prestart = prestart
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.create(ctx, cfg, via)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() {
		if td := sb.Destroy(); !td.Purged {
			t.Errorf("teardown not verified: %v", td.Err)
		}
	}()
	var stdout, stderr bytes.Buffer
	o, err := sb.Run(ctx, sandbox.Job{Argv: argv, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8"},
		Dir: "/tmp", Timeout: 30 * time.Second, MaxReturnBytes: 1 << 20, Stdout: &stdout, Stderr: &stderr,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(src)}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return o, stdout.String(), stderr.String()
}

// The zygote's serve loop, loaded as a shared object into a program of its
// own, returns 1 in each sandbox's pre-started process: that process gets
// the job on fd 3, is pid 2 of the sandbox, holds exactly fds 0-3 and the
// capabilities of its bounding set (as an exec'd program would, not all of
// init's), is named after the interpreter; and the loop returns 0 when the
// engine closes the socket (the program exits 0, leaving nothing).
func TestZygoteServeReturnsInThePrestartedProcess(t *testing.T) {
	b := testenv.RealBackend[*Backend](t, level)
	img, _ := env.Image(t, "python3.13")
	dir := t.TempDir()
	if _, err := spawner.Build(filepath.Join(dir, spawner.ZygoteObjectName)); err != nil {
		t.Fatal(err)
	}
	driver := filepath.Join(dir, "driver")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-o", driver, "testdata/zygote_driver.c").CombinedOutput(); err != nil {
		t.Fatalf("build the driver: %v: %s", err, out)
	}
	before := level.Snapshot()
	z, err := spawner.Start(driver)
	if err != nil {
		t.Fatal(err)
	}
	pre := &sandbox.Prestart{Argv: []string{"/usr/bin/python3.13", "-c", "never run"}, Dir: "/"}
	o, stdout, stderr := zygoteRun(t, b, &zygoteProcess{Spawner: z}, img, pre, []string{"/usr/bin/python3.13", "/code/main.py"}, "print(1)")
	if o.ExitCode != 0 || !strings.HasPrefix(stdout, "dir=/tmp path=/code/main.py\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.ExitCode, stdout, stderr)
	}
	field := func(name string) string {
		m := regexp.MustCompile("(?m)^" + name + ":\\s*(.*)$").FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("no %s in %q", name, stdout)
		}
		return strings.Join(strings.Fields(m[1]), " ")
	}
	if field("Name") != "python3.13" {
		t.Errorf("named %q", field("Name"))
	}
	if pid := field("NSpid"); pid != "2" {
		t.Errorf("NSpid %q: not pid 2 of the sandbox", pid)
	}
	if eff, prm, bnd := field("CapEff"), field("CapPrm"), field("CapBnd"); eff != bnd || prm != bnd || field("CapInh") != "0000000000000000" || field("CapAmb") != "0000000000000000" {
		t.Errorf("capabilities eff %s prm %s bnd %s inh %s amb %s: not what an exec gives", eff, prm, bnd, field("CapInh"), field("CapAmb"))
	}
	fds := strings.Split(strings.TrimSuffix(field("fds"), ","), ",")
	sort.Strings(fds)
	if strings.Join(fds, ",") != "0,1,2,3" {
		t.Errorf("fds %v, want 0-3", fds)
	}
	z.Close()
	z.Wait()
	if code := z.ExitCode(); code != 0 {
		t.Errorf("the driver exited %d after the socket closed, want 0", code)
	}
	level.CheckClean(t, before)
}
