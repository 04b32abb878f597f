package namespaces

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/sessiontest"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// openSession creates a session sandbox on runtime's image and returns it
// with its Session; the sandbox is destroyed, and the level checked for
// leftovers, when t ends.
func openSession(t *testing.T, runtime string) (sandbox.Sandbox, sandbox.Session) {
	t.Helper()
	b := level.Backend(t)
	img, _ := env.Image(t, runtime)
	before := level.Snapshot()
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
		level.CheckClean(t, before)
	})
	ss, ok := sandbox.SandboxAs[sandbox.Session](sb)
	if !ok {
		t.Fatal("a sandbox created with Config.Session has no Session")
	}
	return sb, ss
}

// A session sandbox keeps what a job leaves, files and a background
// process, for the jobs after it; each job's output is its own; and the
// sandbox refuses a plain Run.
func TestSessionKeepsFilesAndProcesses(t *testing.T) {
	sb, ss := openSession(t, "bash")
	if _, err := sb.Run(context.Background(), sandbox.Job{Argv: []string{"/bin/true"}}); err == nil {
		t.Error("a session sandbox ran a plain Run")
	}
	c1 := sessiontest.Run(t, ss, 20*time.Second, `echo kept > /code/state; sleep 1000 & echo $! > /tmp/bg.pid; echo one`)
	if c1.ExitCode != 0 || c1.Stdout != "one\n" || c1.Left != 1 || !c1.Separated || c1.Ended {
		t.Fatalf("first job: %+v", c1)
	}
	for i, want := range []int{0, 3} {
		c := sessiontest.Run(t, ss, 20*time.Second, `cat /code/state; kill -0 "$(cat /tmp/bg.pid)" && echo alive; exit `+[]string{"0", "3"}[i])
		if c.ExitCode != want || c.Stdout != "kept\nalive\n" || c.Ended {
			t.Errorf("job %d: %+v, stdout %q, stderr %q", i+2, c.Outcome, c.Stdout, c.Stderr)
		}
	}
	if !ss.Alive() {
		t.Error("the session is not alive after three jobs")
	}
}

// A job that times out has its own processes killed, however it detached
// them (a double fork and setsid), and nothing else: the session's background process from an
// earlier job lives on, and the next job runs. (The detached process is
// orphaned before the timeout: only the keeper, a subreaper, still has it
// among the job's.) A job whose ctx ends is
// cancelled the same way.
func TestSessionTimeoutKillsOnlyTheCall(t *testing.T) {
	_, ss := openSession(t, "bash")
	sessiontest.Run(t, ss, 20*time.Second, `sleep 1000 & echo $! > /tmp/bg.pid`)
	c := sessiontest.Run(t, ss, time.Second, `( setsid sleep 1000 & echo $! > /tmp/j2.pid ); sleep 1000`)
	if !c.TimedOut || !c.Separated || c.Ended || c.ExitCode != 137 {
		t.Fatalf("timed-out job: %+v", c.Outcome)
	}
	check := `kill -0 "$(cat /tmp/bg.pid)" && echo bg-alive; kill -0 "$(cat /tmp/j2.pid)" 2>/dev/null || echo j2-gone`
	if c := sessiontest.Run(t, ss, 20*time.Second, check); c.Stdout != "bg-alive\nj2-gone\n" || c.ExitCode != 0 {
		t.Errorf("after the timeout: %+v, stdout %q, stderr %q", c.Outcome, c.Stdout, c.Stderr)
	}

	// Cancelled once it has printed: the job's processes go, the session stays.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := &signalWriter{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := ss.RunNext(ctx, sandbox.Job{Argv: []string{"/bin/bash", "-c", `sleep 1000 & echo $! > /tmp/j4.pid; echo go; wait`},
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

// Memory is the session's: a job that, with what an earlier job's
// background process holds, goes over the limit ends the session, 137,
// and nothing more runs in it.
func TestSessionMemoryAcrossJobsEndsIt(t *testing.T) {
	_, ss := openSession(t, "python3.13")
	py := "/usr/bin/python3.13"
	// The job ends once its background process holds its memory (it says
	// so through the fifo).
	sessiontest.Run(t, ss, 20*time.Second, `mkfifo /tmp/held; `+py+` -c 'import time
x = b"x" * (150 << 20)
open("/tmp/held", "w").write("x")
time.sleep(1000)' & read -r _ < /tmp/held`)
	c := sessiontest.Run(t, ss, 20*time.Second, py+` -c 'y = b"y" * (150 << 20); print("fits")'`)
	if !c.Ended || !c.OOMKilled || c.ExitCode != 137 || !strings.Contains(strings.Join(c.Notes, " "), "memory limit") {
		t.Fatalf("over the memory limit across jobs: %+v, stdout %q", c.Outcome, c.Stdout)
	}
	if ss.Alive() {
		t.Error("the session is alive after a memory kill")
	}
	if _, err := sessiontest.RunArgv(context.Background(), ss, time.Second, "/bin/true"); !errors.Is(err, sandbox.ErrSessionEnded) {
		t.Errorf("a job after the end: %v", err)
	}
}

// Files written and read between jobs are binary-safe, and neither follows
// what a job left to lead elsewhere: a link to a kernel file, a directory
// link into /proc, a magic link, a fifo. (Within /proc the read-only
// /proc/sys and init's being non-dumpable refuse a write too; the writer's
// own refusal of pseudo-file systems is the first of those walls.)
func TestSessionFilesBetweenJobs(t *testing.T) {
	_, ss := openSession(t, "bash")
	ctx := context.Background()
	data := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	if err := ss.WriteFile(ctx, "/code/new/dir/in.bin", data); err != nil {
		t.Fatal(err)
	}
	c := sessiontest.Run(t, ss, 20*time.Second, `od -An -tx1 /code/new/dir/in.bin | tr -d ' \n'; printf '\000\377x' > /tmp/out.bin
ln -s ../../../../etc/hostname /tmp/up; ln -s /proc/sys/user/max_user_namespaces /tmp/link; ln -s /proc/sys/user /tmp/dir; ln -s /proc/1 /tmp/p1; ln -s /proc/1/root /tmp/magic; mkfifo /tmp/fifo
cat /proc/sys/user/max_user_namespaces /proc/1/comm > /tmp/before`)
	if c.Stdout != "000102fffe0a00" {
		t.Errorf("the job read %q", c.Stdout)
	}
	got, err := ss.ReadFile(ctx, "/tmp/out.bin", 1<<20)
	if err != nil || !bytes.Equal(got, []byte{0, 0xff, 'x'}) {
		t.Errorf("read back %q, %v", got, err)
	}
	var fe *hostside.FileError
	for _, path := range []string{"/tmp/up", "/tmp/link", "/tmp/dir/max_user_namespaces", "/tmp/p1/comm", "/tmp/magic/tmp/x", "/tmp/fifo"} {
		if err := ss.WriteFile(ctx, path, []byte("0\n")); !errors.As(err, &fe) {
			t.Errorf("write %s: %v, want a refusal", path, err)
		}
	}
	for _, path := range []string{"/tmp/dir/max_user_namespaces", "/tmp/fifo", "/tmp/magic/etc/hostname"} {
		if _, err := ss.ReadFile(ctx, path, 1<<20); !errors.As(err, &fe) {
			t.Errorf("read %s: %v, want a refusal", path, err)
		}
	}
	if _, err := ss.ReadFile(ctx, "/tmp/out.bin", 2); err == nil {
		t.Error("a file larger than max was read")
	}
	if c := sessiontest.Run(t, ss, 20*time.Second, `[ "$(cat /tmp/before)" = "$(cat /proc/sys/user/max_user_namespaces /proc/1/comm)" ] && echo same; [ -p /tmp/fifo ] && [ -L /tmp/up ] && echo kept`); c.Stdout != "same\nkept\n" {
		t.Errorf("after the refused writes: %+v, stdout %q", c.Outcome, c.Stdout)
	}
}
