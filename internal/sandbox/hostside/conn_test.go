package hostside

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// fakeInit plays a sandbox's init on the child ends of a Conn's pipes, in
// this process: what the engine side does with an init's answers (or
// silence) is the same whoever the init is.
type fakeInit struct {
	conn *Conn
	// The init's ends of the pipes, handed over as to a started init.
	control, status, stdout *os.File
	others                  []*os.File
	oom                     bool
	closeOnce               sync.Once
	killed                  atomic.Int32
}

func (f *fakeInit) Kill() {
	f.killed.Add(1)
	// What killing an init does to its pipes: its ends close.
	f.closeOnce.Do(func() { _ = CloseAll(append(f.others, f.control, f.status, f.stdout)...) })
}

func (f *fakeInit) Settle()                                                 {}
func (f *fakeInit) Measure(out *sandbox.Outcome, _ initproto.ResultMessage) { out.OOMKilled = f.oom }
func (f *fakeInit) Diagnostics() string                                     { return "" }

func newFake(t *testing.T) *fakeInit {
	t.Helper()
	f := &fakeInit{}
	c, err := NewConn(f, Timeouts{Setup: 5 * time.Second, Grace: 200 * time.Millisecond, Drain: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.conn = c
	f.control, f.status, f.stdout = c.ChildControl, c.ChildStatus, c.ChildStdout
	f.others = []*os.File{c.ChildStderr}
	c.ChildControl, c.ChildStatus, c.ChildStdout, c.ChildStderr = nil, nil, nil, nil
	t.Cleanup(func() {
		f.Kill()
		c.Close()
	})
	return f
}

// serve answers the setup with ready (or refusal), reads the job and then
// does what answer says.
func (f *fakeInit) serve(t *testing.T, refuse string, answer func(job initproto.JobMessage)) {
	go func() {
		var setup initproto.SetupMessage
		if err := initproto.ReadMessage(f.control, initproto.MaxSetupBytes, &setup); err != nil {
			t.Errorf("init: setup: %v", err)
			return
		}
		if refuse != "" {
			_ = initproto.WriteMessage(f.status, initproto.ReadyMessage{Error: refuse})
			return
		}
		_ = initproto.WriteMessage(f.status, initproto.ReadyMessage{Ready: true})
		var job initproto.JobMessage
		if err := initproto.ReadMessage(f.control, initproto.MaxJobBytes, &job); err != nil {
			return
		}
		answer(job)
	}()
}

func testJob(out *bytes.Buffer) sandbox.Job {
	return sandbox.Job{Argv: []string{"/bin/true"}, Timeout: 100 * time.Millisecond, MaxReturnBytes: 1 << 10,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte("print(1)")}}, Stdout: out}
}

// Setup, job and result cross the pipes, output streams past init, and
// init's report becomes the outcome.
func TestConnRunsAJob(t *testing.T) {
	f := newFake(t)
	c := f.conn
	f.serve(t, "", func(job initproto.JobMessage) {
		if len(job.Files) != 1 || string(job.Files[0].Data) != "print(1)" {
			t.Errorf("init got files %+v", job.Files)
		}
		f.stdout.WriteString("1\n")
		_ = initproto.WriteMessage(f.status, initproto.ResultMessage{Started: true, ExitCode: 3,
			Files: map[string][]byte{"/tmp/a": []byte("x")}, Notes: []string{"n"}})
		f.Kill() // init exits: its ends close
	})
	if err := c.Setup(context.Background(), Setup(sandbox.Config{}, Confinement{})); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o, err := c.Run(context.Background(), testJob(&out))
	if err != nil {
		t.Fatal(err)
	}
	if o.ExitCode != 3 || o.TimedOut || string(o.Files["/tmp/a"]) != "x" || len(o.Notes) != 1 || out.String() != "1\n" {
		t.Errorf("outcome %+v, output %q", o, out.String())
	}
}

// An init that refuses the setup says why.
func TestConnReportsRefusedSetup(t *testing.T) {
	f := newFake(t)
	c := f.conn
	f.serve(t, "mount: no", nil)
	err := c.Setup(context.Background(), Setup(sandbox.Config{}, Confinement{}))
	if err == nil || err.Error() != "init could not build the sandbox: mount: no" {
		t.Errorf("got %v", err)
	}
}

// An init silent past the job's timeout and the grace period is killed
// with its sandbox, and the job counts as timed out; one that ends without
// a word is an error, unless the host saw the memory limit end the whole
// sandbox.
func TestConnSilentOrGoneInit(t *testing.T) {
	t.Run("silent", func(t *testing.T) {
		f := newFake(t)
		c := f.conn
		f.serve(t, "", func(initproto.JobMessage) {})
		if err := c.Setup(context.Background(), Setup(sandbox.Config{}, Confinement{})); err != nil {
			t.Fatal(err)
		}
		o, err := c.Run(context.Background(), testJob(&bytes.Buffer{}))
		if err != nil {
			t.Fatal(err)
		}
		if !o.TimedOut || o.ExitCode != 128+int(syscall.SIGKILL) || f.killed.Load() == 0 || !strings.Contains(strings.Join(o.Notes, " "), "killed whole") {
			t.Errorf("outcome %+v, killed %d times", o, f.killed.Load())
		}
	})
	for _, oom := range []bool{false, true} {
		f := newFake(t)
		c := f.conn
		f.oom = oom
		f.serve(t, "", func(initproto.JobMessage) { f.Kill() })
		if err := c.Setup(context.Background(), Setup(sandbox.Config{}, Confinement{})); err != nil {
			t.Fatal(err)
		}
		o, err := c.Run(context.Background(), testJob(&bytes.Buffer{}))
		switch {
		case !oom && (err == nil || !strings.Contains(err.Error(), "sandbox init ended without a result")):
			t.Errorf("gone without OOM: %+v %v", o, err)
		case oom && (err != nil || o.ExitCode != 128+int(syscall.SIGKILL) || !strings.Contains(strings.Join(o.Notes, " "), "memory limit")):
			t.Errorf("gone at the memory limit: %+v %v", o, err)
		}
	}
}

// A program init could not start is the call's error, not an outcome; a
// result larger than the return budget allows is refused.
func TestConnRefusesNotStartedAndOversized(t *testing.T) {
	f := newFake(t)
	c := f.conn
	f.serve(t, "", func(initproto.JobMessage) {
		_ = initproto.WriteMessage(f.status, initproto.ResultMessage{Error: "start /bin/true: no such file"})
	})
	if err := c.Setup(context.Background(), Setup(sandbox.Config{}, Confinement{})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background(), testJob(&bytes.Buffer{})); err == nil || err.Error() != "sandbox could not start the program: start /bin/true: no such file" {
		t.Errorf("got %v", err)
	}

	big := newFake(t)
	big.serve(t, "", func(initproto.JobMessage) {
		_ = initproto.WriteMessage(big.status, initproto.ResultMessage{Started: true,
			Files: map[string][]byte{"/tmp/big": make([]byte, 2<<20)}})
	})
	if err := big.conn.Setup(context.Background(), Setup(sandbox.Config{}, Confinement{})); err != nil {
		t.Fatal(err)
	}
	if _, err := big.conn.Run(context.Background(), testJob(&bytes.Buffer{})); err == nil || !strings.Contains(err.Error(), "over its limit") {
		t.Errorf("oversized result: %v", err)
	}
}
