package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/scratchrun/scratchrun/client"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// containerImageEnv names the OCI archive scripts/container-image.sh
// wrote; scripts/test.sh builds one and sets it.
const containerImageEnv = "SCRATCHRUN_CONTAINER_IMAGE"

// containerRuntime is the runtime the container's call runs.
const containerRuntime = "python3.13"

// Bounds of the waits below: the engine's start (its spawner and warm
// pool), a drain with nothing in flight, podman's own teardown.
const (
	readyWait = 90 * time.Second
	drainWait = 60 * time.Second
	cleanWait = 30 * time.Second
)

// The container image runs as the DaemonSet runs it, under Debian's
// podman: privileged, the host's cgroups, a state directory and the
// host's image cache (read-only here: the test must not write the host's
// images) mounted at the DaemonSet's paths, the image's own entrypoint. It
// serves one call on loopback, drains and exits 0 on SIGTERM, and once the
// container and the image are removed nothing is left: no sandbox, mount,
// cgroup, namespace or interface of the engine's, no container, no process
// in the mount namespace podman ran in, no cgroup of podman's.
func TestContainerImageServesUnderPodman(t *testing.T) {
	testenv.SkipIfShort(t, "runs the container image under podman, as root, on the installed images")
	if os.Geteuid() != 0 {
		t.Fatal("needs root: podman runs the image privileged, as the DaemonSet does")
	}
	archive := os.Getenv(containerImageEnv)
	if archive == "" {
		t.Fatalf("%s is not set: build the image with `scripts/container-image.sh VERSION OUT` and set it to OUT (scripts/test.sh does)", containerImageEnv)
	}
	testenv.New("deploy").Store(t, containerRuntime)
	pod := readManifests(t).daemonSets["scratchrun-worker"].Spec.Template.Spec
	p := newPodman(t)

	state := filepath.Join(p.dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// host path -> the container's path, as the DaemonSet's hostPath
	// volumes (checked below against it).
	mounts := map[string]string{
		"/var/lib/scratchrun": testenv.DataDir() + ":/var/lib/scratchrun:ro",
		"/sys/fs/cgroup":      "/sys/fs/cgroup:/sys/fs/cgroup",
		"/run/scratchrun":     state + ":/run/scratchrun",
	}
	worker := container(t, pod.Containers, "worker")
	for _, v := range pod.Volumes {
		if v.HostPath != nil && slices.ContainsFunc(worker.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name }) {
			if _, ok := mounts[v.HostPath.Path]; !ok {
				t.Errorf("the DaemonSet's worker mounts the host's %s; this test does not", v.HostPath.Path)
			}
		}
	}
	if len(worker.Command) != 0 {
		t.Errorf("the DaemonSet's worker overrides the image's entrypoint with %v; this test runs the image's", worker.Command)
	}

	// The engine's sandboxes' cgroups are the host's (as the DaemonSet's
	// mount of /sys/fs/cgroup makes them), under a parent of this test's;
	// the container's own are under another of this test's.
	engineLeak := leakcheck.Options{CgroupParent: fmt.Sprintf("scratchrun-deploy-%d", os.Getpid()),
		MountMarkers: []string{p.dir, testenv.DataDir()}}
	podmanLeak := leakcheck.Options{CgroupParent: engineLeak.CgroupParent + "-podman"}
	engineBefore, podmanBefore := leakcheck.Take(engineLeak), leakcheck.Take(podmanLeak)

	image := loadImage(t, p, archive)
	checkImageConfig(t, p, image)
	nofile, nproc := hardLimit(t, unix.RLIMIT_NOFILE, 1024), hardLimit(t, unix.RLIMIT_NPROC, 1024)
	ulimits := []string{"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile, nofile), "--ulimit", fmt.Sprintf("nproc=%d:%d", nproc, nproc)}
	// The init container's `scratchrun images build` runs mmdebstrap.
	version := append(append([]string{"run", "--rm", "--pull=never", "--network=none"}, ulimits...), "--entrypoint", "mmdebstrap", image, "--version")
	if out := p.run(t, version...); !strings.HasPrefix(out, "mmdebstrap ") {
		t.Errorf("mmdebstrap --version in the image: %q", out)
	}

	addr := freeLoopbackAddr(t)
	args := append([]string{"run", "--name", "scratchrun-deploy-test", "--pull=never", "--privileged"}, ulimits...)
	args = append(args,
		// The host's network, and the server on its loopback only.
		"--network=host", "--cgroup-parent=/"+podmanLeak.CgroupParent,
		"-e", "SCRATCHRUN_CGROUP_PARENT="+engineLeak.CgroupParent)
	for _, m := range mounts {
		args = append(args, "-v", m)
	}
	args = append(args, image, "serve", "--addr", addr, "--db", "/tmp/scratchrun.db")
	run := p.command(args...)
	var output bytes.Buffer
	run.Stdout, run.Stderr = &output, &output
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.try("rm", "--force", "--time", "0", "scratchrun-deploy-test")
			<-exited
			p.try("rmi", "--force", image)
		}
		if t.Failed() {
			t.Logf("the container's output:\n%s", output.String())
		}
	})
	base := "http://" + addr
	waitReady(t, base, exited)
	// Read once the server is up: by then unshare has made the namespace
	// and exec'd podman in it.
	mountNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", run.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if self, _ := os.Readlink("/proc/self/ns/mnt"); self == mountNS {
		t.Fatalf("podman runs in the test's own mount namespace %s", self)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := client.New(base, "").Run(ctx, client.Request{Runtime: containerRuntime, Code: "print(6 * 7)"})
	if err != nil || res.ExitCode != 0 || res.Stdout != "42\n" {
		t.Fatalf("the call: %v, exit %d, stdout %q, stderr %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}

	// SIGTERM to the container's process, as the kubelet's runtime sends
	// it: the engine drains and exits 0, and podman run returns its code.
	pid, err := strconv.Atoi(strings.TrimSpace(p.run(t, "inspect", "--format", "{{.State.Pid}}", "scratchrun-deploy-test")))
	if err != nil || pid <= 1 {
		t.Fatalf("the container's pid: %d, %v", pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the container did not exit 0 after SIGTERM: %v", err)
		}
	case <-time.After(drainWait):
		t.Fatalf("the container did not exit within %s of SIGTERM", drainWait)
	}
	if !strings.Contains(output.String(), "drained") {
		t.Errorf("the server did not say it drained")
	}
	stopped = true
	if code := strings.TrimSpace(p.run(t, "inspect", "--format", "{{.State.ExitCode}}", "scratchrun-deploy-test")); code != "0" {
		t.Errorf("podman says the container exited %s", code)
	}
	p.run(t, "rm", "scratchrun-deploy-test")
	if left := strings.TrimSpace(p.run(t, "ps", "--all", "--quiet")); left != "" {
		t.Errorf("containers left after rm: %s", left)
	}
	p.run(t, "rmi", image)
	if left := strings.TrimSpace(p.run(t, "images", "--quiet")); left != "" {
		t.Errorf("images left after rmi: %s", left)
	}

	if left := waitNamespaceGone(mountNS); left != "" {
		t.Errorf("a process is still in the mount namespace podman ran in (its storage mounts live as long): %s", left)
	}
	if err := removePodmanParent(podmanLeak.CgroupParent); err != nil {
		t.Error(err)
	}
	for _, check := range []struct {
		o      leakcheck.Options
		before leakcheck.Snapshot
	}{{engineLeak, engineBefore}, {podmanLeak, podmanBefore}} {
		if left := leakcheck.WaitClean(check.before, check.o, cleanWait); len(left) > 0 {
			t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
		}
	}
}

// loadImage loads the archive into p's storage and returns the image's
// name.
func loadImage(t *testing.T, p *podman, archive string) string {
	t.Helper()
	out := p.run(t, "load", "--input", archive)
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "Loaded image: "); ok {
			return strings.TrimSpace(name)
		}
	}
	t.Fatalf("podman load named no image: %q", out)
	return ""
}

// checkImageConfig wants the entrypoint and default command the
// DaemonSet and docs/server.md rely on, and the OCI labels.
func checkImageConfig(t *testing.T, p *podman, image string) {
	t.Helper()
	var cfg []struct {
		Config struct {
			Entrypoint []string
			Cmd        []string
			Labels     map[string]string
		}
	}
	if err := json.Unmarshal([]byte(p.run(t, "image", "inspect", image)), &cfg); err != nil || len(cfg) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	c := cfg[0].Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/scratchrun"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %v, command %v: want scratchrun, serve", c.Entrypoint, c.Cmd)
	}
	for _, l := range []string{"version", "revision", "source", "created"} {
		if c.Labels["org.opencontainers.image."+l] == "" {
			t.Errorf("no label org.opencontainers.image.%s: %v", l, c.Labels)
		}
	}
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// hardLimit is want, or the hard limit of resource when lower: nothing
// here may raise a hard limit (no CAP_SYS_RESOURCE), and podman's
// defaults are above this machine's.
func hardLimit(t *testing.T, resource int, want uint64) uint64 {
	t.Helper()
	var r unix.Rlimit
	if err := unix.Getrlimit(resource, &r); err != nil {
		t.Fatal(err)
	}
	return min(want, r.Max)
}

// waitReady waits until the server answers /readyz with 200, failing t
// when the container exits first or readyWait passes.
func waitReady(t *testing.T, base string, exited <-chan error) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyWait)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("the container exited before it was ready: %v", err)
		default:
		}
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the server was not ready within %s", readyWait)
}

// waitNamespaceGone waits until no process is in the mount namespace ns
// and returns one that still is ("" when none).
func waitNamespaceGone(ns string) string {
	deadline := time.Now().Add(cleanWait)
	for {
		left := ""
		procs, _ := filepath.Glob("/proc/[0-9]*/ns/mnt")
		for _, p := range procs {
			if link, err := os.Readlink(p); err == nil && link == ns {
				cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(p)), "cmdline"))
				left = filepath.Dir(filepath.Dir(p)) + " " + strings.ReplaceAll(string(cmdline), "\x00", " ")
				break
			}
		}
		if left == "" || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removePodmanParent removes the cgroup parent the container ran under,
// in every hierarchy, with the group podman keeps conmon in below it
// (podman leaves both; its container's own group it removes, and a group
// still holding one fails the removal).
func removePodmanParent(parent string) error {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	if d := "/sys/fs/cgroup/" + parent; dirExists(d) {
		dirs = append(dirs, d)
	}
	deadline := time.Now().Add(cleanWait)
	for _, dir := range dirs {
		for _, d := range []string{filepath.Join(dir, "conmon"), dir} {
			for {
				err := os.Remove(d)
				if err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
					entries, _ := filepath.Glob(filepath.Join(d, "*", "cgroup.procs"))
					return fmt.Errorf("remove podman's cgroup %s: %v (groups in it: %v)", d, err, entries)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
