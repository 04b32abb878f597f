package hostside

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// A backend proves at start that it can run a sandbox at all: one sandbox,
// end to end, whose job is a program that answers with a known output (the
// Go init's probe role, see package goinit). These are that probe's pieces.

// ProbeConfig is the probe's sandbox: root as its image, owned by uidBase,
// with the least of every resource that still starts it.
func ProbeConfig(root string, uidBase uint32) sandbox.Config {
	return sandbox.Config{
		Image:       sandbox.Image{RootFS: root, UIDBase: uidBase},
		MemoryBytes: 64 << 20, MaxPids: 64, CPUs: 1,
		WritableBytes: 1 << 20, TmpBytes: 1 << 20, MaxInodes: 64,
	}
}

// RunProbe runs argv in s within timeout and destroys s. It fails when the
// job cannot run, when it does not exit 0 printing want, and when s is not
// torn down: what names s in errors ("probe sandbox"), and what s's runtime
// said of itself (Host.Diagnostics) goes with a wrong answer.
func RunProbe(ctx context.Context, s sandbox.Sandbox, argv []string, want string, timeout time.Duration, what string) error {
	var stdout, stderr bytes.Buffer
	out, runErr := s.Run(ctx, sandbox.Job{
		Argv: argv, Dir: "/", Timeout: timeout, MaxReturnBytes: 1, Stdout: &stdout, Stderr: &stderr,
	})
	t := s.Destroy()
	switch {
	case runErr != nil:
		return runErr
	case out.ExitCode != 0 || stdout.String() != want:
		diagnostics := ""
		if h, ok := s.(interface{ Diagnostics() string }); ok {
			diagnostics = h.Diagnostics()
		}
		return fmt.Errorf("%s: exit %d, stdout %q, stderr %q%s", what, out.ExitCode, stdout.String(), stderr.String(), diagnostics)
	case !t.Purged:
		return fmt.Errorf("%s was not torn down: %w", what, t.Err)
	}
	return nil
}

// FirstLine is s up to its first newline: a probe's error, shortened for a
// limitation's one line.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// ProbeMarker names the file in dir that keeps a probe's verdict: prefix
// and a hash of everything the verdict depends on, the facts given and the
// size and modification time of each of files (the binaries it ran), so
// that a change to any of them means a new probe.
func ProbeMarker(dir, prefix string, files []string, facts ...any) string {
	h := sha256.New()
	fmt.Fprintln(h, facts...)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintln(h, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return filepath.Join(dir, fmt.Sprintf("%s%x", prefix, h.Sum(nil)[:12]))
}
