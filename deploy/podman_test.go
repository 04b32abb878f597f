package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// podman runs Debian's podman with storage of the test's own (a
// temporary --root, --runroot, --tmpdir and crun's state), so that nothing
// of it persists on the machine.
type podman struct {
	dir string
}

// podmanSetup runs before each podman command, in a mount namespace of
// its own (private: nothing it mounts reaches the host's). It hides the
// hybrid layout's cgroup2 mount, which crun refuses ("cgroups in hybrid
// mode not supported": v1 controllers beside a cgroup2 mount, as on the
// project's test machines), and makes /var/lib
// read-only there: podman 4.3 as root keeps a blob-info cache in
// /var/lib/containers/cache whatever --root says, and keeps it in memory
// when that directory cannot be made.
const podmanSetup = `if mountpoint -q /sys/fs/cgroup/unified; then umount /sys/fs/cgroup/unified; fi
mount --bind /var/lib /var/lib && mount -o remount,bind,ro /var/lib
exec "$@"`

func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is needed (scripts/test.sh installs Debian's): ", err)
	}
	// Not t.TempDir: podman refuses a --runroot longer than 50 characters.
	dir, err := os.MkdirTemp("", "scratchrun-podman-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove podman's storage: %v", err)
		}
	})
	p := &podman{dir: dir}
	// Big files of an image copy go to TMPDIR, else /var/tmp.
	if err := os.Mkdir(filepath.Join(p.dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	// crun keeps its containers' state in /run/crun unless told: a
	// runtime that tells it reaches the cleanup podman's conmon runs at
	// the container's exit too, which --runtime-flag would not (and
	// crun's delete there is what removes the container's cgroups).
	crun, err := exec.LookPath("crun")
	if err != nil {
		t.Fatal("crun is needed (podman's runtime here): ", err)
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s --root=%s \"$@\"\n", crun, filepath.Join(p.dir, "crun"))
	if err := os.WriteFile(p.runtime(), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runtime is the OCI runtime podman runs: crun with its state in p.dir.
func (p *podman) runtime() string { return filepath.Join(p.dir, "crun.sh") }

// command is podman with args, in its own mount namespace (see
// podmanSetup): the process it returns is podman itself.
func (p *podman) command(args ...string) *exec.Cmd {
	argv := []string{"-m", "--propagation", "private", "sh", "-c", podmanSetup, "sh",
		"env", "TMPDIR=" + filepath.Join(p.dir, "tmp"),
		"podman", "--root", filepath.Join(p.dir, "root"), "--runroot", filepath.Join(p.dir, "run"),
		"--tmpdir", filepath.Join(p.dir, "libpod"), "--storage-driver", "overlay", "--cgroup-manager", "cgroupfs",
		"--runtime", p.runtime()}
	return exec.Command("unshare", append(argv, args...)...)
}

// run runs podman with args and returns its standard output, failing t
// when it fails.
func (p *podman) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.try(args...)
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// try runs podman with args and returns its standard output, or an error
// holding its standard error.
func (p *podman) try(args ...string) (string, error) {
	cmd := p.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &podmanError{err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), nil
}

type podmanError struct {
	err    error
	stderr string
}

func (e *podmanError) Error() string { return e.err.Error() + ": " + e.stderr }
