package hostside

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// serveSession plays a session's init: it answers each request with what
// answer returns (nil: no answer), until the control pipe ends.
func (f *fakeInit) serveSession(t *testing.T, answer func(q initproto.Request) interface{ MarshalBinary() ([]byte, error) }) {
	f.conn.StartSession()
	go func() {
		for {
			var q initproto.Request
			if err := initproto.ReadMessage(f.control, initproto.MaxJobBytes, &q); err != nil {
				return
			}
			if m := answer(q); m != nil {
				if err := initproto.WriteMessage(f.status, m); err != nil {
					return
				}
			}
		}
	}()
}

// A session's jobs run one after another over one open control pipe;
// each job gets the output written while it ran (up to what the pipe held
// when init reported), and what was written between jobs is counted on
// the next job and goes to neither.
func TestSessionConnRunsJobsInTurn(t *testing.T) {
	f := newFake(t)
	c := f.conn
	n := 0
	f.serveSession(t, func(q initproto.Request) interface{ MarshalBinary() ([]byte, error) } {
		if q.Kind != initproto.RequestJob {
			t.Errorf("request of kind %d, want a job", q.Kind)
			return nil
		}
		n++
		f.stdout.WriteString(strings.Repeat(q.Job.Argv[0], 70<<10)) // more than a pipe holds
		return initproto.ResultMessage{Started: true, ExitCode: n, Separated: true, Left: uint64(n)}
	})
	var first, second bytes.Buffer
	o1, err := c.RunNext(context.Background(), sandbox.Job{Argv: []string{"a"}, Timeout: 5 * time.Second, Stdout: &first})
	if err != nil {
		t.Fatal(err)
	}
	// Written between the jobs: wait until the reader has taken it.
	f.stdout.WriteString("between")
	p := c.session.out.pipes[0]
	bound := time.NewTimer(30 * time.Second) // a bound on a broken reader, not a timing
	defer bound.Stop()
	for {
		p.mu.Lock()
		between, changed := p.between, p.changed
		p.mu.Unlock()
		if between >= int64(len("between")) {
			break
		}
		select {
		case <-changed:
		case <-bound.C:
			t.Fatalf("the reader took %d bytes between jobs, want %d", between, len("between"))
		}
	}
	o2, err := c.RunNext(context.Background(), sandbox.Job{Argv: []string{"b"}, Timeout: 5 * time.Second, Stdout: &second})
	if err != nil {
		t.Fatal(err)
	}
	if o1.ExitCode != 1 || o2.ExitCode != 2 || !o1.Separated || o1.Ended || o2.Left != 2 {
		t.Errorf("outcomes %+v, %+v", o1, o2)
	}
	if first.String() != strings.Repeat("a", 70<<10) || second.String() != strings.Repeat("b", 70<<10) {
		t.Errorf("first job's output %d bytes, second's %d: each must be its own", first.Len(), second.Len())
	}
	if o1.BetweenCallsBytes != 0 || o2.BetweenCallsBytes != int64(len("between")) {
		t.Errorf("between-calls bytes %d", o2.BetweenCallsBytes)
	}
	if c.SessionEnded() {
		t.Error("the session ended")
	}
}

// A job whose ctx ends gets a cancel sent to init, not the sandbox killed:
// when init separates the job's processes, the session goes on; when it
// cannot, or the memory limit killed a process, the session ends (every
// later request refused) with a note saying why.
func TestSessionConnCancelAndEnd(t *testing.T) {
	for _, tc := range []struct {
		name      string
		separated bool
		oom       bool
		wantEnded bool
	}{
		{"separated", true, false, false},
		{"not separated", false, false, true},
		{"memory", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := f.conn
			f.oom = tc.oom
			started := make(chan struct{})
			f.serveSession(t, func(q initproto.Request) interface{ MarshalBinary() ([]byte, error) } {
				switch q.Kind {
				case initproto.RequestJob:
					if q.Job.Argv[0] == "wait" {
						close(started)
						return nil // the cancel answers
					}
					return initproto.ResultMessage{Started: true, Separated: tc.separated}
				case initproto.RequestCancel:
					return initproto.ResultMessage{Started: true, TimedOut: true, ExitCode: 137, Signal: 9, Separated: tc.separated}
				}
				return initproto.FileMessage{}
			})
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-started; cancel() }()
			_, err := c.RunNext(ctx, sandbox.Job{Argv: []string{"wait"}, Timeout: time.Minute})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled job: %v", err)
			}
			if c.SessionEnded() != tc.wantEnded {
				t.Errorf("after the cancel, ended %v, want %v", c.SessionEnded(), tc.wantEnded)
			}
			if tc.wantEnded {
				if _, err := c.RunNext(context.Background(), sandbox.Job{Argv: []string{"x"}, Timeout: time.Second}); !errors.Is(err, sandbox.ErrSessionEnded) {
					t.Errorf("a job after the end: %v", err)
				}
				return
			}
			o, err := c.RunNext(context.Background(), sandbox.Job{Argv: []string{"x"}, Timeout: time.Second})
			if err != nil || o.Ended || !o.Separated {
				t.Errorf("the next job: %+v %v", o, err)
			}
		})
	}
	// A job that ends with a memory kill ends the session as 137.
	f := newFake(t)
	f.oom = true
	f.serveSession(t, func(initproto.Request) interface{ MarshalBinary() ([]byte, error) } {
		return initproto.ResultMessage{Started: true, Separated: true}
	})
	o, err := f.conn.RunNext(context.Background(), sandbox.Job{Argv: []string{"x"}, Timeout: time.Second})
	if err != nil || !o.Ended || o.ExitCode != 128+int(syscall.SIGKILL) || !strings.Contains(strings.Join(o.Notes, " "), "more than its memory limit") {
		t.Errorf("a job at the memory limit: %+v %v", o, err)
	}
	if !f.conn.SessionEnded() || f.killed.Load() == 0 {
		t.Error("the session lives on after a memory kill")
	}
	if _, err := f.conn.ReadFile(context.Background(), "/x", 10); !errors.Is(err, sandbox.ErrSessionEnded) {
		t.Errorf("a read after the end: %v", err)
	}
	// A timed-out job whose processes init could not separate ends it.
	g := newFake(t)
	g.serveSession(t, func(initproto.Request) interface{ MarshalBinary() ([]byte, error) } {
		return initproto.ResultMessage{Started: true, TimedOut: true, ExitCode: 137, Signal: 9}
	})
	o, err = g.conn.RunNext(context.Background(), sandbox.Job{Argv: []string{"x"}, Timeout: time.Second})
	if err != nil || !o.Ended || o.Separated || !o.TimedOut || !strings.Contains(strings.Join(o.Notes, " "), "could not be told apart") {
		t.Errorf("a job not separated: %+v %v", o, err)
	}
}

// File requests carry paths and bytes as they are (binary-safe); init's
// refusal is a FileError; a read over the limit is refused before it is
// sent, and an init that returns more than was asked is not believed.
func TestSessionConnFiles(t *testing.T) {
	f := newFake(t)
	c := f.conn
	files := map[string][]byte{}
	f.serveSession(t, func(q initproto.Request) interface{ MarshalBinary() ([]byte, error) } {
		switch q.Kind {
		case initproto.RequestFileWrite:
			files[q.Path] = q.Data
			return initproto.FileMessage{}
		case initproto.RequestFileRead:
			if q.Path == "/liar" {
				return initproto.FileMessage{Data: make([]byte, q.Max+1)}
			}
			d, ok := files[q.Path]
			if !ok {
				return initproto.FileMessage{Error: "it does not exist"}
			}
			return initproto.FileMessage{Data: d}
		}
		return nil
	})
	data := []byte{0, 1, 0, 0xff, '\n'}
	if err := c.WriteFile(context.Background(), "/tmp/b.bin", data); err != nil {
		t.Fatal(err)
	}
	got, err := c.ReadFile(context.Background(), "/tmp/b.bin", 1<<20)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back %q, %v", got, err)
	}
	var fe *FileError
	if _, err := c.ReadFile(context.Background(), "/nope", 10); !errors.As(err, &fe) || fe.Reason != "it does not exist" {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := c.ReadFile(context.Background(), "/x", initproto.MaxFileReadBytes+1); err == nil {
		t.Error("a read over the limit was sent")
	}
	if _, err := c.ReadFile(context.Background(), "/liar", 4); err == nil {
		t.Error("more bytes than asked for were believed")
	}
}

// A plain sandbox's Conn has no session: its session methods refuse.
func TestSessionMethodsNeedASession(t *testing.T) {
	f := newFake(t)
	if _, err := f.conn.RunNext(context.Background(), sandbox.Job{Argv: []string{"x"}}); !errors.Is(err, errNotSession) {
		t.Errorf("RunNext on a plain Conn: %v", err)
	}
	if err := f.conn.WriteFile(context.Background(), "/x", nil); !errors.Is(err, errNotSession) {
		t.Errorf("WriteFile on a plain Conn: %v", err)
	}
}

// A session's init locks down before it answers its first request: a
// fork's child holds a tree user code made, and a file request before the
// first job must meet the jobs' confinement, not init's setup powers. A
// plain cold sandbox still locks down at its job (after the job's files).
func TestSessionSetupLocksDownEarly(t *testing.T) {
	if !Setup(sandbox.Config{Session: true}, Confinement{}).LockDownEarly {
		t.Error("a session's setup does not lock down before its first request")
	}
	if Setup(sandbox.Config{}, Confinement{}).LockDownEarly {
		t.Error("a plain cold sandbox locks down early")
	}
}
