package gvisor

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
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// PinnedRunscVersion is the gVisor version ScratchRun is built and tested
// against; scripts/install-runsc.sh builds exactly this one from the Go
// module proxy (a test keeps the two in step).
const PinnedRunscVersion = "v0.0.0-20260905035102-160fafc42237"

// DefaultRunscPath is where scripts/install-runsc.sh caches the pinned build.
func DefaultRunscPath() string {
	return filepath.Join("/var/cache/scratchrun/runsc", PinnedRunscVersion, "runsc")
}

// findRunsc picks the runsc binary: the configured path, else the pinned
// build, else one on PATH (noted: it may be an older, incompatible release).
func findRunsc(configured string) (path, note string, err error) {
	if configured != "" {
		if err := checkExecutable(configured); err != nil {
			return "", "", fmt.Errorf("runsc %s: %w", configured, err)
		}
		return configured, "", nil
	}
	pinned := DefaultRunscPath()
	if checkExecutable(pinned) == nil {
		return pinned, "", nil
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return p, fmt.Sprintf("using runsc from PATH (%s), not the pinned %s build; older releases lack working network=sandbox on recent kernels", p, PinnedRunscVersion), nil
	}
	return "", "", fmt.Errorf("gVisor's runsc is not installed: neither %s nor runsc on PATH exists (build it with scripts/install-runsc.sh, or point SCRATCHRUN_RUNSC at a runsc binary)", pinned)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// runscEnv is runsc's whole environment: nothing of the engine's.
var runscEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// globalFlags are the flags every runsc command of this backend takes; state
// commands (delete, kill) need the same --root as run.
func (b *Backend) globalFlags() []string {
	flags := []string{"--root=" + b.runscRoot}
	if d := b.opts.DebugLogDir; d != "" {
		flags = append(flags, "--debug", "--debug-log="+d+"/")
	}
	return flags
}

// runFlags are the flags of `runsc run` for one sandbox.
func (b *Backend) runFlags(platform string, egress bool, writableBytes int64) []string {
	network := "none"
	if egress {
		network = "sandbox"
	}
	overlay := "root:memory"
	if writableBytes > 0 {
		overlay += fmt.Sprintf(",size=%d", writableBytes)
	}
	flags := append(b.globalFlags(),
		"--platform="+platform,
		"--network="+network,
		"--overlay2="+overlay,
		// A checked, advisory-only look at host sysctls costs start-up time
		// on every sandbox and changes nothing.
		"--host-settings=ignore",
	)
	if b.cgroups == nil {
		flags = append(flags, "--ignore-cgroups")
	}
	return flags
}

// runscCommand runs one short runsc state command (delete, state) and
// returns its combined output, bounded by timeout.
func (b *Backend) runscCommand(timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.runsc, append(b.globalFlags(), args...)...)
	cmd.Env = runscEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := hostside.RunChild(cmd)
	data := out.Bytes()
	if len(data) > 4096 {
		data = data[:4096]
	}
	if err != nil {
		return data, fmt.Errorf("runsc %s: %w: %s", args[0], err, strings.TrimSpace(string(data)))
	}
	return data, nil
}

// deleteContainer force-deletes container id when runsc still has state for
// it (which kills what is left of it) and removes its files; a container
// runsc no longer knows is not an error.
func (b *Backend) deleteContainer(id string) error {
	if stateFileExists(b, id) {
		_, err := b.runscCommand(30*time.Second, "delete", "--force", id)
		if err != nil && stateFileExists(b, id) {
			return err
		}
	}
	// runsc leaves the control socket of a sandbox it did not stop itself.
	return removeFiles(b.stateFiles(id))
}

func stateFileExists(b *Backend, id string) bool {
	m, _ := filepath.Glob(filepath.Join(b.runscRoot, id+"_sandbox:*.state"))
	return len(m) > 0
}

func removeFiles(paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stateFiles lists runsc's files for container id in the backend's root:
// "<id>_sandbox:<id>.state", its lock, and the sandbox's control socket
// "runsc-<id>.sock".
func (b *Backend) stateFiles(id string) []string {
	matches, _ := filepath.Glob(filepath.Join(b.runscRoot, id+"_sandbox:*"))
	if _, err := os.Lstat(filepath.Join(b.runscRoot, "runsc-"+id+".sock")); err == nil {
		matches = append(matches, filepath.Join(b.runscRoot, "runsc-"+id+".sock"))
	}
	return matches
}

// stateID returns the container id a file in runsc's root belongs to.
func stateID(name string) (string, bool) {
	if id, _, ok := strings.Cut(name, "_sandbox:"); ok {
		return id, true
	}
	if strings.HasPrefix(name, "runsc-") && strings.HasSuffix(name, ".sock") {
		return strings.TrimSuffix(strings.TrimPrefix(name, "runsc-"), ".sock"), true
	}
	return "", false
}

// boundedBuffer keeps the first max bytes written to it and discards the
// rest: runsc's own messages, which a broken sandbox could make endless.
type boundedBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}
