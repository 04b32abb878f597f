package gvisor

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/sessiontest"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// openSession creates a session sandbox on the bash image and returns it
// with its Session; the sandbox is destroyed, and nothing of it may be
// left, when t ends.
func openSession(t *testing.T) (sandbox.Sandbox, sandbox.Session) {
	t.Helper()
	return openSessionOn(t, "bash")
}

// openSessionOn is openSession on the image of runtime.
func openSessionOn(t *testing.T, runtime string) (sandbox.Sandbox, sandbox.Session) {
	t.Helper()
	img, _ := env.Image(t, runtime)
	b := backend(t)
	before := leakcheck.Take(leakOpts)
	cfg := testenv.SandboxConfig(img)
	cfg.Session = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if td := sb.Destroy(); !td.Purged {
			t.Errorf("teardown not verified: %v", td.Err)
		}
		checkClean(t, before)
	})
	ss, ok := sandbox.SandboxAs[sandbox.Session](sb)
	if !ok {
		t.Fatal("a sandbox created with Config.Session has no Session")
	}
	return sb, ss
}

// PR_SET_CHILD_SUBREAPER works inside runsc as on Linux: a process the job
// orphans (a double fork) reparents to the job's keeper, not to pid 1 of
// its pid namespace (the reaper), so it still counts among the job's
// processes when the job's main process has ended. The job's first
// process leads no process group (it may call setsid, as elsewhere).
func TestSessionSubreaperInRunsc(t *testing.T) {
	_, ss := openSession(t)
	c := sessiontest.Run(t, ss, 20*time.Second, `( sleep 1000 & echo $! > /tmp/orphan.pid ); echo $$ > /tmp/main.pid`)
	if c.ExitCode != 0 || c.Left != 1 || !c.Separated || c.Ended {
		t.Fatalf("the orphan is not the job's: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	c = sessiontest.Run(t, ss, 20*time.Second, `ppid=$(awk '/^PPid:/ {print $2}' /proc/$(cat /tmp/orphan.pid)/status); [ "$ppid" -gt 1 ] && [ "$ppid" != "$(cat /tmp/main.pid)" ] && echo keeper
[ "$(cut -d' ' -f5 /proc/$$/stat)" != "$$" ] && echo no-group-leader`)
	if c.Stdout != "keeper\nno-group-leader\n" {
		t.Errorf("the orphan's parent is not its keeper: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}
}

// A session keeps files and a background process across jobs and refuses
// a plain Run; a timeout and a cancel kill only their
// own job's processes, however detached; files written and read between
// jobs follow no link a job left.
func TestSessionJobsFilesAndTimeouts(t *testing.T) {
	sb, ss := openSession(t)
	ctx := context.Background()
	if _, err := sb.Run(ctx, sandbox.Job{Argv: []string{"/bin/true"}}); err == nil {
		t.Error("a session sandbox ran a plain Run")
	}
	c := sessiontest.Run(t, ss, 20*time.Second, `echo kept > /code/state; sleep 1000 & echo $! > /tmp/bg.pid; echo one`)
	if c.ExitCode != 0 || c.Stdout != "one\n" || c.Left != 1 || !c.Separated || c.Ended {
		t.Fatalf("first job: %+v, stderr %q", c.Outcome, c.Stderr)
	}
	c = sessiontest.Run(t, ss, time.Second, `( setsid sleep 1000 & echo $! > /tmp/j2.pid ); sleep 1000`)
	if !c.TimedOut || !c.Separated || c.Ended || c.ExitCode != 137 {
		t.Fatalf("timed-out job: %+v", c.Outcome)
	}
	check := `cat /code/state; kill -0 "$(cat /tmp/bg.pid)" && echo bg-alive; kill -0 "$(cat /tmp/j2.pid)" 2>/dev/null || echo j2-gone; exit 3`
	if c := sessiontest.Run(t, ss, 20*time.Second, check); c.Stdout != "kept\nbg-alive\nj2-gone\n" || c.ExitCode != 3 {
		t.Errorf("after the timeout: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := &signalWriter{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := ss.RunNext(cctx, sandbox.Job{Argv: bash(`sleep 1000 & echo $! > /tmp/j4.pid; echo go; wait`),
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/tmp", Timeout: time.Minute, Stdout: started})
		done <- err
	}()
	<-started.ready
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled job: %v", err)
	}
	if c := sessiontest.Run(t, ss, 20*time.Second, `kill -0 "$(cat /tmp/bg.pid)" && echo bg-alive; kill -0 "$(cat /tmp/j4.pid)" 2>/dev/null || echo j4-gone`); c.Stdout != "bg-alive\nj4-gone\n" {
		t.Errorf("after the cancel: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}

	data := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	if err := ss.WriteFile(ctx, "/code/new/dir/in.bin", data); err != nil {
		t.Fatal(err)
	}
	c = sessiontest.Run(t, ss, 20*time.Second, `od -An -tx1 /code/new/dir/in.bin | tr -d ' \n'; printf '\000\377x' > /tmp/out.bin
ln -s ../../../../etc/hostname /tmp/up; ln -s /proc/1 /tmp/p1; ln -s /proc/self/root /tmp/magic; ln -s /proc/self /tmp/dir; mkfifo /tmp/fifo`)
	if c.Stdout != "000102fffe0a00" {
		t.Errorf("the job read %q (stderr %q)", c.Stdout, c.Stderr)
	}
	if got, err := ss.ReadFile(ctx, "/tmp/out.bin", 1<<20); err != nil || !bytes.Equal(got, []byte{0, 0xff, 'x'}) {
		t.Errorf("read back %q, %v", got, err)
	}
	var fe *hostside.FileError
	for _, path := range []string{"/tmp/up", "/tmp/p1/comm", "/tmp/dir/oom_score_adj", "/tmp/magic/tmp/x", "/tmp/fifo"} {
		if err := ss.WriteFile(ctx, path, []byte("0\n")); !errors.As(err, &fe) {
			t.Errorf("write %s: %v, want a refusal", path, err)
		}
	}
	for _, path := range []string{"/tmp/p1/comm", "/tmp/fifo", "/tmp/magic/etc/hostname", "/tmp/missing"} {
		if _, err := ss.ReadFile(ctx, path, 1<<20); !errors.As(err, &fe) {
			t.Errorf("read %s: %v, want a refusal", path, err)
		}
	}
	if _, err := ss.ReadFile(ctx, "/tmp/out.bin", 2); err == nil {
		t.Error("a file larger than max was read")
	}
	if c := sessiontest.Run(t, ss, 20*time.Second, `[ -p /tmp/fifo ] && [ -L /tmp/up ] && ! [ -e /tmp/x ] && echo kept`); c.Stdout != "kept\n" {
		t.Errorf("after the refused writes: %+v, stdout %q", c.Outcome, c.Stdout)
	}
	if !ss.Alive() {
		t.Error("the session is not alive after its jobs")
	}
}

// signalWriter closes ready at its first write.
type signalWriter struct {
	once  sync.Once
	ready chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ready) })
	return len(p), nil
}

// A job that kills its own keeper leaves processes that can no longer be
// told apart from the session's: the result says so and the session ends.
func TestSessionKeeperKilledEndsIt(t *testing.T) {
	_, ss := openSession(t)
	c := sessiontest.Run(t, ss, 20*time.Second, `sleep 1000 & kill -9 $PPID; wait`)
	if c.Separated || !c.Ended || !strings.Contains(strings.Join(c.Notes, " "), "keeper") {
		t.Fatalf("a job that killed its keeper: %+v", c.Outcome)
	}
	if ss.Alive() {
		t.Error("the session is alive after its keeper was killed")
	}
	if _, err := ss.RunNext(context.Background(), sandbox.Job{Argv: []string{"/bin/true"}, Timeout: time.Second}); !errors.Is(err, sandbox.ErrSessionEnded) {
		t.Errorf("a job after the end: %v", err)
	}
}
