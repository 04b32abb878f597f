package microvm

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// sessionCall is one job's outcome and output.
type sessionCall struct {
	sandbox.Outcome
	stdout, stderr string
}

func mustRunNext(t *testing.T, ss sandbox.Session, timeout time.Duration, script string) sessionCall {
	t.Helper()
	var stdout, stderr bytes.Buffer
	o, err := ss.RunNext(context.Background(), sandbox.Job{Argv: []string{"/bin/bash", "-c", script},
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}, Dir: "/tmp", Timeout: timeout,
		MaxReturnBytes: 1 << 20, ReturnFiles: []string{"/tmp/ret"}, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return sessionCall{o, stdout.String(), stderr.String()}
}

// One guest (boots are slow under emulation) runs a session: it refuses a
// plain Run, keeps files and a background process across
// jobs (the orphan of a double fork counted among its job's processes: the
// keeper's subreaper holds in the guest kernel too), a timeout kills only
// its own job's processes, files written and read between jobs follow no
// link a job left, and teardown leaves nothing.
func TestSessionInOneGuest(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	before := level.Snapshot()
	cfg := testenv.SandboxConfig(img)
	cfg.Session = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer func() {
		if td := sb.Destroy(); !td.Purged {
			t.Errorf("teardown not verified: %v", td.Err)
		}
		level.CheckClean(t, before)
		if left := qemuProcesses(b); len(left) > 0 {
			t.Errorf("QEMU processes left: %v", left)
		}
	}()
	ss, ok := sandbox.SandboxAs[sandbox.Session](sb)
	if !ok {
		t.Fatal("a sandbox created with Config.Session has no Session")
	}
	if _, err := sb.Run(ctx, sandbox.Job{Argv: []string{"/bin/true"}}); err == nil {
		t.Error("a session sandbox ran a plain Run")
	}
	c := mustRunNext(t, ss, 30*time.Second, `echo kept > /code/state; sleep 1000 & echo $! > /tmp/bg.pid; ( sleep 1000 & ); echo one > /tmp/ret`)
	if c.ExitCode != 0 || c.Left != 2 || !c.Separated || c.Ended || string(c.Files["/tmp/ret"]) != "one\n" {
		t.Fatalf("first job: %+v, stderr %q", c.Outcome, c.stderr)
	}
	c = mustRunNext(t, ss, 2*time.Second, `( setsid sleep 1000 & echo $! > /tmp/j2.pid ); sleep 1000`)
	if !c.TimedOut || !c.Separated || c.Ended || c.ExitCode != 137 {
		t.Fatalf("timed-out job: %+v", c.Outcome)
	}
	if err := ss.WriteFile(ctx, "/code/new/in.bin", []byte{0, 0xff}); err != nil {
		t.Fatal(err)
	}
	c = mustRunNext(t, ss, 30*time.Second, `cat /code/state; kill -0 "$(cat /tmp/bg.pid)" && echo bg-alive; kill -0 "$(cat /tmp/j2.pid)" 2>/dev/null || echo j2-gone
od -An -tx1 /code/new/in.bin | tr -d ' \n'; echo; ln -s /proc/1 /tmp/p1; ln -s ../../etc/hostname /tmp/up; mkfifo /tmp/fifo; exit 3`)
	if c.stdout != "kept\nbg-alive\nj2-gone\n00ff\n" || c.ExitCode != 3 {
		t.Errorf("after the timeout: %+v, stdout %q, stderr %q", c.Outcome, c.stdout, c.stderr)
	}
	if got, err := ss.ReadFile(ctx, "/code/state", 1<<20); err != nil || string(got) != "kept\n" {
		t.Errorf("read back %q, %v", got, err)
	}
	var fe *hostside.FileError
	for _, path := range []string{"/tmp/up", "/tmp/p1/comm", "/tmp/fifo"} {
		if err := ss.WriteFile(ctx, path, []byte("0\n")); !errors.As(err, &fe) {
			t.Errorf("write %s: %v, want a refusal", path, err)
		}
		if _, err := ss.ReadFile(ctx, path, 1<<20); path != "/tmp/up" && !errors.As(err, &fe) {
			t.Errorf("read %s: %v, want a refusal", path, err)
		}
	}
	if !ss.Alive() {
		t.Error("the session is not alive after its jobs")
	}
}
