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
		if h, ok := sandbox.SandboxAs[interface{ Diagnostics() string }](s); ok {
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

// DefaultProbeCacheDir keeps the probes' verdicts, shared by the engines of
// a host: a RAM file system, and the verdicts name the boot anyway.
const DefaultProbeCacheDir = "/run/scratchrun"

// ProbeCache keeps start-up probes' verdicts for one boot of the host, so
// that an engine (a one-shot `scratchrun exec` above all) skips a probe
// another engine already ran since the host booted: a KVM that hangs costs
// its timeout once per boot, not once per engine.
type ProbeCache struct {
	// Dir holds the verdicts.
	Dir string
	// BootIDFile names this boot of the host; empty means the kernel's
	// (/proc/sys/kernel/random/boot_id). Tests name another boot with it.
	BootIDFile string
}

// Marker names the file in c.Dir that keeps a probe's verdict: prefix and
// a hash of everything the verdict depends on, this boot of the host, the
// facts given and the size and modification time of each of files (the
// binaries it ran), so that a reboot or a change to any of them means a
// new probe.
func (c ProbeCache) Marker(prefix string, files []string, facts ...any) string {
	bootFile := c.BootIDFile
	if bootFile == "" {
		bootFile = "/proc/sys/kernel/random/boot_id"
	}
	boot, _ := os.ReadFile(bootFile)
	h := sha256.New()
	fmt.Fprintln(h, strings.TrimSpace(string(boot)))
	fmt.Fprintln(h, facts...)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintln(h, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return filepath.Join(c.Dir, fmt.Sprintf("%s%x", prefix, h.Sum(nil)[:12]))
}

// Read returns the lines of the verdict kept in marker; false when there
// is none (or an empty one).
func (c ProbeCache) Read(marker string) ([]string, bool) {
	data, err := os.ReadFile(marker)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return nil, false
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n"), true
}

// Record keeps lines as the verdict in marker, whole or not at all (an
// engine reading it meanwhile sees none, never half of one).
func (c ProbeCache) Record(marker string, lines []string) error {
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(marker), ".probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), marker)
	}
	return err
}
