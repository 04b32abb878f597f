package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// A process that runs as a sandbox's uid on the host (one that left its
// mount namespace, or gVisor's Sentry or gofer) must not be able to write
// the image store's files, which every later sandbox runs; the sandbox
// itself still sees its image as root's and writes it through its overlay.
func TestSandboxRootCannotWriteTheImageStore(t *testing.T) {
	newTestEngine(t, nil)
	img, _ := env.Image(t, "python3.11")
	target := filepath.Join(img.RootFS, "etc/hostname")
	var st syscall.Stat_t
	if err := syscall.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	for _, level := range []*testenv.Level{nsLevel, levelNamed("gvisor")} {
		t.Run(level.Name, func(t *testing.T) {
			backend := level.Backend(t)
			before := level.Snapshot()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := backend.Create(ctx, testenv.SandboxConfig(img))
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			// Before its job, the cgroup holds the sandbox's init (and
			// gVisor's Sentry and gofer): what a sandbox runs as on the host.
			uids := sandboxUIDs(t, level, s)
			for uid := range uids {
				if uid == st.Uid {
					t.Errorf("a process of the sandbox runs as host uid %d, which owns the image's %s", uid, target)
				}
				if err := writeAs(uid, target); err == nil {
					t.Errorf("host uid %d (a sandbox's) opened the image's %s for writing", uid, target)
				}
			}
			var stdout, stderr strings.Builder
			out, err := s.Run(ctx, sandbox.Job{
				Argv: []string{"/bin/sh", "-c", "echo changed >> /etc/hostname && stat -c '%u %g' /etc/hostname /etc/passwd && tail -n1 /etc/hostname"},
				Env:  []string{"PATH=/usr/bin:/bin"}, Dir: "/tmp", Timeout: 30 * time.Second, MaxReturnBytes: 1 << 20,
				Stdout: &stdout, Stderr: &stderr,
			})
			if td := s.Destroy(); !td.Purged {
				t.Errorf("teardown: %v", td.Err)
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if want := "0 0\n0 0\nchanged\n"; out.ExitCode != 0 || stdout.String() != want {
				t.Errorf("writing the image's /etc/hostname in the sandbox: exit %d, stdout %q (want %q), stderr %q", out.ExitCode, stdout.String(), want, stderr.String())
			}
			if data, err := os.ReadFile(target); err != nil || strings.Contains(string(data), "changed") {
				t.Errorf("the image's %s changed: %q, %v", target, data, err)
			}
			level.CheckClean(t, before)
		})
	}
}

// sandboxUIDs are the host uids (Uid's real id in /proc/PID/status) of the
// processes in s's cgroup, other than root (runsc's own parts that stay
// root are not the sandbox's).
func sandboxUIDs(t *testing.T, level *testenv.Level, s sandbox.Sandbox) map[uint32]bool {
	t.Helper()
	uids := map[uint32]bool{}
	for _, dir := range cgroups.HierarchyDirs(filepath.Join(level.CgroupParent, s.ID())) {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			status, err := os.ReadFile("/proc/" + f + "/status")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(line, "Uid:"); ok {
					uid, err := strconv.ParseUint(strings.Fields(v)[0], 10, 32)
					if err != nil {
						t.Fatal(err)
					}
					if uid != 0 {
						uids[uint32(uid)] = true
					}
				}
			}
		}
	}
	if len(uids) == 0 {
		t.Fatalf("no unprivileged process in sandbox %s's cgroup", s.ID())
	}
	t.Logf("the sandbox runs as host uids %v", uids)
	return uids
}

// writeAs opens path for writing (without changing it) as host uid and gid
// uid in a child, and returns why it could not.
func writeAs(uid uint32, path string) error {
	cmd := exec.Command("/bin/sh", "-c", `exec 3>>"$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return errors.Join(err, fmt.Errorf("%s", out))
	}
	return nil
}
