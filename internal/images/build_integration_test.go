package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRealBuild builds images with mmdebstrap (several minutes, needs the
// Debian mirror) and checks them from a chroot. It runs only with
// SCRATCHRUN_TEST_BUILD=1. SCRATCHRUN_TEST_ROOT picks the store root (the
// images are then left there; default: a temporary directory) and
// SCRATCHRUN_TEST_IMAGES a comma separated subset of images or runtimes.
func TestRealBuild(t *testing.T) {
	if os.Getenv("SCRATCHRUN_TEST_BUILD") != "1" {
		t.Skip("set SCRATCHRUN_TEST_BUILD=1 to build images with mmdebstrap (minutes, needs the Debian mirror)")
	}
	if !isRoot() {
		t.Skip("checking images with chroot needs root")
	}
	root := os.Getenv("SCRATCHRUN_TEST_ROOT")
	if root == "" {
		root = t.TempDir()
	}
	s, err := OpenStore(Options{Root: root, UIDBase: DefaultUIDBase})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if v := os.Getenv("SCRATCHRUN_TEST_IMAGES"); v != "" {
		names = strings.Split(v, ",")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := s.Build(ctx, names, false, os.Stderr); err != nil {
		t.Fatalf("Build: %v", err)
	}
	imgs, _ := s.selectImages(names)
	for _, img := range imgs {
		t.Run(img.Name, func(t *testing.T) {
			for _, r := range s.cat.Runtimes {
				if r.Image == img.Name {
					checkRuntime(t, s, r.Name)
				}
			}
		})
	}
}

// chrootRun runs argv inside rootfs with a clean environment. Python must
// not write .pyc files or caches into the shared image while we look.
func chrootRun(t *testing.T, rootfs string, env []string, argv ...string) (string, time.Duration) {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{rootfs, "/usr/bin/env", "-i"}, append(env, argv...)...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out), time.Since(start)
}

func checkRuntime(t *testing.T, s *Store, name string) {
	res, err := s.Resolve(name)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", name, err)
	}
	rootfs := res.RootFS
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1"}
	for k, v := range res.Runtime.Env {
		env = append(env, k+"="+v)
	}
	fi, err := os.Stat(filepath.Join(rootfs, "etc/passwd"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != res.UIDBase {
		t.Errorf("/etc/passwd not owned by uid base %d: %v", res.UIDBase, err)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "etc/hostname")); string(b) != "sandbox\n" {
		t.Errorf("/etc/hostname = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "etc/hosts")); !strings.Contains(string(b), "127.0.0.1 localhost sandbox") {
		t.Errorf("/etc/hosts = %q", b)
	}
	for _, d := range []string{"code", "tmp"} {
		if fi, err := os.Stat(filepath.Join(rootfs, d)); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
			t.Errorf("/%s: %v %v, want 1777", d, fi.Mode(), err)
		}
	}
	// An unprivileged engine copies /root into its sandboxes' HOME.
	if fi, err := os.Stat(filepath.Join(rootfs, "root")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("/root: %v %v, want 0755", fi.Mode(), err)
	}
	if lists, _ := filepath.Glob(filepath.Join(rootfs, "var/lib/apt/lists/*_Packages")); len(lists) != 0 {
		t.Errorf("apt lists left in the image: %v", lists)
	}
	switch {
	case strings.HasPrefix(name, "python"):
		const script = `import io, numpy, pandas, scipy, scipy.stats, PIL.Image, requests, matplotlib
import matplotlib.pyplot as plt
fig, ax = plt.subplots(); ax.plot(numpy.arange(5), numpy.arange(5) ** 2); ax.set_title("check")
buf = io.BytesIO(); fig.savefig(buf, format="png")
assert buf.getvalue().startswith(b"\x89PNG"), "not a png"
print(matplotlib.get_backend(), matplotlib.get_cachedir(), numpy.__version__, pandas.__version__, scipy.__version__, PIL.__version__, requests.__version__)`
		out, d1 := chrootRun(t, rootfs, env, res.Runtime.Command[0], "-c", script)
		t.Logf("%s: %s(first run %v)", name, out, d1)
		if !strings.HasPrefix(strings.ToLower(out), "agg /root/.cache/matplotlib") {
			t.Errorf("%s: backend/cache: %q", name, out)
		}
		out, d2 := chrootRun(t, rootfs, env, res.Runtime.Command[0], "-X", "importtime", "-c", "import matplotlib.pyplot")
		if strings.Contains(out, "building the font cache") || strings.Contains(out, "Duplicate key") {
			t.Errorf("%s: font cache rebuilt or bad matplotlibrc:\n%s", name, out)
		}
		_, d3 := chrootRun(t, rootfs, env, res.Runtime.Command[0], "-c", "import matplotlib.pyplot")
		t.Logf("%s: import matplotlib.pyplot took %v (importtime run %v)", name, d3, d2)
		if m, _ := filepath.Glob(filepath.Join(rootfs, "root/.cache/matplotlib/fontlist-*.json")); len(m) == 0 {
			t.Errorf("%s: no baked font cache", name)
		}
	case name == "node20":
		out, _ := chrootRun(t, rootfs, env, res.Runtime.Command[0], "--version")
		t.Logf("node --version: %s", out)
		if !strings.HasPrefix(out, "v20.") {
			t.Errorf("node version %q", out)
		}
	case name == "bash":
		out, _ := chrootRun(t, rootfs, env, res.Runtime.Command[0], "-c",
			`echo '{"a":[1,2]}' | jq -c .a; curl --version | head -n1; awk --version | head -n1; sed --version | head -n1; grep --version | head -n1; ls /etc/ssl/certs/ca-certificates.crt; echo $BASH_VERSION`)
		t.Logf("bash tools:\n%s", out)
		if !strings.HasPrefix(out, "[1,2]\n") || !strings.Contains(out, "curl ") || !strings.Contains(out, "GNU Awk") {
			t.Errorf("bash tools output: %q", out)
		}
	}
}
