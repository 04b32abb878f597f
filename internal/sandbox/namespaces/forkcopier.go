package namespaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// A fork's copy is written by a process of its own, the copier, placed in
// the new sandbox's cgroup before it writes anything: the kernel charges a
// written page (tmpfs: RAM) to the writer's memory cgroup, so a copy the
// engine wrote would count in the engine's memory, beyond the new
// sandbox's limit and outside admission's count. In the new sandbox's
// cgroup the copy counts as the same files written by its own code would,
// and a copy larger than its memory limit gets the copier killed, never the
// engine; the fork then fails and the new sandbox is destroyed.
//
// The copier is the engine's own executable (/proc/self/exe) started with
// copierArgv0 and copierRole: this package's init runs it instead of the
// program's main, so every binary that links the backend (scratchrun, test
// binaries) serves as its copier without its main's cooperation. It gets
// the open directories (the engine opens them, as it did when it copied
// itself) as descriptors 3 and up, two per tree, waits on its stdin for the
// trees' limits, which the engine writes only once it has moved the copier
// into the cgroup, and answers with a copierResult on stdout.

const (
	// copierArgv0 is the copier's argv[0]: no such file exists; the name
	// and copierRole tell the executable which role it plays.
	copierArgv0 = "/.scratchrun/fork-copy"
	copierRole  = "scratchrun-fork-copy"
	// copierFirstFD is the first tree's source; its destination follows.
	copierFirstFD = 3
	// copierOutputMax bounds what the engine keeps of the copier's output
	// (its messages name paths of the parent's tree, up to maxCopyDepth
	// deep).
	copierOutputMax = 256 << 10
	// copierMessageMax bounds what an error keeps of the copier's stderr.
	copierMessageMax = 512
	// copierThreads is about how many of the new sandbox's pids the
	// copier's threads take (GOMAXPROCS=1; measured: 4 fail, 6 do).
	copierThreads = 6
	// copierWaitDelay bounds waiting for the copier's output after it was
	// killed.
	copierWaitDelay = 5 * time.Second
)

// copySpec is what the copier is told to copy, in its descriptors' order.
type copySpec struct {
	// Rootless: the engine's uid is its sandboxes' root already, so the
	// copier keeps its identity (see becomeSandboxRoot).
	Rootless bool
	Trees    []copyTreeSpec
}

// copyTreeSpec is one tree of a copySpec: a treeCopy's name and limits.
type copyTreeSpec struct {
	Name    string
	Overlay bool
	Bytes   int64
	Inodes  int64
}

// copierResult is the copier's answer: the copy's error, if any, and
// whether it was errForkTooLarge.
type copierResult struct {
	Error    string
	TooLarge bool
}

// copyError is a copier's error as the engine sees it: the copier's message,
// and errForkTooLarge when it was that.
type copyError struct {
	msg      string
	tooLarge bool
}

func (e *copyError) Error() string { return e.msg }

func (e *copyError) Is(target error) bool { return e.tooLarge && target == errForkTooLarge }

func init() {
	if len(os.Args) == 2 && os.Args[0] == copierArgv0 && os.Args[1] == copierRole {
		os.Exit(runCopier(os.Stdin, os.Stdout))
	}
}

// runCopier is the copier's main: it reads the spec (which arrives once it
// is in the new sandbox's cgroup), copies, and writes the result.
func runCopier(in io.Reader, out io.Writer) int {
	// becomeSandboxRoot changes this thread's identity only: the copy
	// runs on it, from this goroutine, to the end.
	runtime.LockOSThread()
	var res copierResult
	if err := copyFromSpec(in); err != nil {
		res = copierResult{Error: err.Error(), TooLarge: errors.Is(err, errForkTooLarge)}
	}
	if err := json.NewEncoder(out).Encode(res); err != nil {
		return 1
	}
	return 0
}

func copyFromSpec(in io.Reader) error {
	var spec copySpec
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		return fmt.Errorf("read the copy's spec: %w", err)
	}
	if !spec.Rootless {
		if err := becomeSandboxRoot(); err != nil {
			return err
		}
	}
	for i, t := range spec.Trees {
		c := &treeCopy{src: copierFirstFD + 2*i, dst: copierFirstFD + 2*i + 1, name: t.Name,
			overlay: t.Overlay, bytesLeft: t.Bytes, inodesLeft: t.Inodes}
		if err := c.run(context.Background()); err != nil {
			return err
		}
	}
	return nil
}

// copyInGroup copies roots in a copier placed in group (nil: the backend has
// no cgroups, and nothing is charged to anyone). The roots' descriptors stay
// the caller's.
func copyInGroup(ctx context.Context, group *cgroups.Group, rootless bool, roots []*treeCopy) error {
	spec := copySpec{Rootless: rootless}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, r := range roots {
		spec.Trees = append(spec.Trees, copyTreeSpec{Name: r.name, Overlay: r.overlay, Bytes: r.bytesLeft, Inodes: r.inodesLeft})
		for _, fd := range []int{r.src, r.dst} {
			dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("pass %s to the copier: %w", r.name, err)
			}
			files = append(files, os.NewFile(uintptr(dup), r.name))
		}
	}
	out := &cappedBuffer{max: copierOutputMax}
	stderr := &cappedBuffer{max: copierOutputMax}
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{copierArgv0, copierRole}
	// One P: the copier is one goroutine's work, and its threads count in
	// the new sandbox's pids limit.
	cmd.Env = []string{"GOMAXPROCS=1"}
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = out, stderr
	cmd.WaitDelay = copierWaitDelay
	// Dies with the engine (the starter's thread lives as long).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := hostside.StartChild(cmd); err != nil {
		stdin.Close()
		return fmt.Errorf("start the copier: %w", err)
	}
	for _, f := range files {
		f.Close()
	}
	files = nil
	if group != nil {
		if err := group.AddProcess(cmd.Process.Pid); err != nil {
			stdin.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("move the copier into the new sandbox's cgroup: %w", err)
		}
	}
	werr := json.NewEncoder(stdin).Encode(spec)
	stdin.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		return copierDied(ctx, group, errors.Join(err, werr), stderr.String())
	}
	var res copierResult
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		return fmt.Errorf("the copier's answer: %w (stderr %q)", err, stderr.String())
	}
	if group != nil && group.OOMKills() > 0 {
		// The copier finished, but the limit killed another of the new
		// sandbox's processes (its init) for it.
		return fmt.Errorf("%w: the copy passed the new sandbox's memory limit", errForkTooLarge)
	}
	if res.Error != "" {
		return &copyError{msg: res.Error, tooLarge: res.TooLarge}
	}
	return nil
}

// copierDied says why the copier ended without an answer.
func copierDied(ctx context.Context, group *cgroups.Group, err error, stderr string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if group != nil && group.OOMKills() > 0 {
		return fmt.Errorf("%w: the copy passed the new sandbox's memory limit", errForkTooLarge)
	}
	if group != nil && group.PidsLimitHits() > 0 {
		// The Go runtime aborts when it cannot start a thread.
		return fmt.Errorf("the copier: %w: its threads passed the new sandbox's process limit (a fork needs %d)", err, copierThreads)
	}
	// Its first line says why (a Go runtime's abort goes on with a dump).
	first, _, _ := strings.Cut(stderr, "\n")
	if len(first) > copierMessageMax {
		first = first[:copierMessageMax]
	}
	if first != "" {
		return fmt.Errorf("the copier: %w (%q)", err, first)
	}
	return fmt.Errorf("the copier: %w", err)
}

// cappedBuffer keeps the first max bytes written to it and discards the
// rest.
type cappedBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *cappedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *cappedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}
