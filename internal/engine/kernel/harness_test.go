package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// interpreter finds a host interpreter the kernels are tested under. They
// are present on every machine the fast tier runs on (CI installs both), so
// a missing one fails the test rather than skipping what it covers.
func interpreter(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed to test its session kernel (install it): %v", name, err)
	}
	return p
}

// stream collects one of a kernel's output pipes so that each cell gets
// exactly what the kernel wrote before its reply: the kernel flushes before
// it replies, so what the pipe holds when the reply is read is the cell's.
// A read and the copy of its bytes happen under mu, and take drains the
// pipe under mu too, so no byte is between the pipe and buf unseen.
type stream struct {
	f    *os.File
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{} // closed and replaced whenever bytes arrive
}

func newStream(f *os.File) *stream {
	s := &stream{f: f, more: make(chan struct{})}
	go s.loop()
	return s
}

func (s *stream) loop() {
	rc, err := s.f.SyscallConn()
	if err != nil {
		return
	}
	b := make([]byte, 64<<10)
	for {
		eof := false
		err := rc.Read(func(fd uintptr) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			n, err := syscall.Read(int(fd), b)
			if n > 0 {
				s.buf.Write(b[:n])
				close(s.more)
				s.more = make(chan struct{})
			}
			if errors.Is(err, syscall.EAGAIN) {
				return false
			}
			eof = n == 0
			return true
		})
		if err != nil || eof {
			return
		}
	}
}

// take returns what the stream got since the last take, including all the
// pipe holds now.
func (s *stream) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc, err := s.f.SyscallConn()
	if err == nil {
		b := make([]byte, 64<<10)
		_ = rc.Control(func(fd uintptr) {
			for {
				n, err := syscall.Read(int(fd), b)
				if n <= 0 || err != nil {
					return
				}
				s.buf.Write(b[:n])
			}
		})
	}
	out := s.buf.String()
	s.buf.Reset()
	return out
}

// waitFor waits until the stream has got text since the last take: the
// event a test waits for before it interrupts a running cell. It may run
// on a goroutine of its own, so it reports rather than fails.
func (s *stream) waitFor(text string) error {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, more := strings.Contains(s.buf.String(), text), s.more
		s.mu.Unlock()
		if got {
			return nil
		}
		select {
		case <-more:
		case <-deadline.C:
			return fmt.Errorf("no %q in the kernel's output", text)
		}
	}
}

// hostKernel is a kernel run as a host process, fed by a Driver as init
// feeds one in a sandbox.
type hostKernel struct {
	t        *testing.T
	cmd      *exec.Cmd
	driver   *Driver
	requests *os.File
	replies  *os.File
	stdout   *stream
	stderr   *stream
	dir      string
	ext      string
	calls    int
	waited   chan struct{}
	waitErr  error
}

// cell is what a test sees of one call.
type cell struct {
	Outcome
	stdout, stderr string
}

func startKernel(t *testing.T, kind string, grace time.Duration) *hostKernel {
	t.Helper()
	var template []string
	var ext string
	switch kind {
	case "python":
		template, ext = []string{interpreter(t, "python3"), "-c", "{bootstrap}"}, ".py"
	case "node":
		template, ext = []string{interpreter(t, "node"), "-e", "{bootstrap}"}, ".js"
	}
	argv, err := Command(kind, template)
	if err != nil {
		t.Fatal(err)
	}
	k := &hostKernel{t: t, dir: t.TempDir(), ext: ext, waited: make(chan struct{})}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	k.cmd = exec.Command(argv[0], argv[1:]...)
	k.cmd.Dir = k.dir
	k.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	k.cmd.Stdout, k.cmd.Stderr = outW, errW
	k.cmd.ExtraFiles = []*os.File{reqR, repW}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{reqR, repW, outW, errW} {
		f.Close()
	}
	k.requests, k.replies = reqW, repR
	k.stdout, k.stderr = newStream(outR), newStream(errR)
	go func() {
		k.waitErr = k.cmd.Wait()
		close(k.waited)
	}()
	k.driver = NewDriver(reqW, repR, func() error { return k.cmd.Process.Signal(syscall.SIGINT) }, grace)
	t.Cleanup(func() {
		k.requests.Close()
		select {
		case <-k.waited:
		case <-time.After(10 * time.Second):
			t.Errorf("the kernel did not end at the end of its input")
			k.cmd.Process.Kill()
			<-k.waited
		}
		k.replies.Close()
		outR.Close()
		errR.Close()
	})
	return k
}

// run runs src as the kernel's next cell, each in a file of its own as the
// engine writes them (call-N), with env as the request's environment.
func (k *hostKernel) run(src string, env ...string) cell {
	return k.runCtx(context.Background(), src, env...)
}

func (k *hostKernel) runCtx(ctx context.Context, src string, env ...string) cell {
	k.t.Helper()
	k.calls++
	path := filepath.Join(k.dir, fmt.Sprintf("call-%d%s", k.calls, k.ext))
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		k.t.Fatal(err)
	}
	out := k.driver.Run(ctx, k.dir, path, append([]string{"PATH=" + os.Getenv("PATH")}, env...))
	if out.Lost {
		// As init does with a lost kernel: its tree is killed, so nothing
		// it left can still write the pipes.
		k.cmd.Process.Kill()
		<-k.waited
	}
	return cell{Outcome: out, stdout: k.stdout.take(), stderr: k.stderr.take()}
}

// ok runs src and fails unless the cell ended with status 0.
func (k *hostKernel) ok(src string, env ...string) cell {
	k.t.Helper()
	c := k.run(src, env...)
	if c.Lost || c.Status != 0 {
		k.t.Fatalf("cell %q: status %d lost %v (%v)\nstdout: %s\nstderr: %s", src, c.Status, c.Lost, c.Err, c.stdout, c.stderr)
	}
	return c
}

// expect checks a cell's stdout exactly.
func (c cell) expect(t *testing.T, stdout string) {
	t.Helper()
	if c.stdout != stdout {
		t.Errorf("stdout %q, want %q (stderr %q)", c.stdout, stdout, c.stderr)
	}
}

// interruptWhen returns a context that ends once the kernel's stdout shows
// text: the cell is then surely running, so the interrupt reaches it.
func (k *hostKernel) interruptWhen(text string) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := k.stdout.waitFor(text); err != nil {
			k.t.Error(err)
		}
		cancel()
	}()
	return ctx
}
