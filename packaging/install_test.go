package packaging

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// debianRoot makes a throwaway Debian 12 root for the test with mmdebstrap
// (minbase and systemd, from the host's apt sources as the images are;
// about 15 s here), with /proc mounted as dpkg's scripts expect it. Both
// go at the test's end.
func debianRoot(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	out, err := exec.Command("mmdebstrap", "--variant=minbase", "--include=systemd", "--quiet", "bookworm", root).CombinedOutput()
	if err != nil {
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	proc := filepath.Join(root, "proc")
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Fatal(err)
	}
	// Registered after TempDir's removal, so run before it.
	t.Cleanup(func() {
		if err := unix.Unmount(proc, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", proc, err)
		}
	})
	return root
}

// inRoot runs a command chrooted into root.
func inRoot(root string, args ...string) (string, error) {
	cmd := exec.Command("chroot", append([]string{root}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// rootFiles lists root's paths with their types, less /proc and dpkg's own
// records (its database and log, which an install and a purge rewrite).
func rootFiles(t *testing.T, root string) map[string]fs.FileMode {
	t.Helper()
	files := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, root)
		if rel == "/proc" || strings.HasPrefix(rel, "/var/lib/dpkg/") || rel == "/var/log/dpkg.log" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		files[rel] = d.Type()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// diffFiles says which paths one listing has and the other has not.
func diffFiles(before, after map[string]fs.FileMode) []string {
	var diff []string
	for p, m := range after {
		if bm, ok := before[p]; !ok || bm != m {
			diff = append(diff, "+ "+p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			diff = append(diff, "- "+p)
		}
	}
	slices.Sort(diff)
	return diff
}

// The .deb of this machine's architecture, installed for real into a
// throwaway Debian root: its files land where docs/install.md says, with
// the state directories made and no unit enabled; systemd-analyze accepts
// its units; its scratchrun says the release's version and runs a call
// (from the host, as its units would run it, on the host's images); a
// remove keeps the settings and state, and a purge leaves the root's files
// exactly as they were before the install, though an operator enabled a
// unit and wrote settings and state meanwhile.
func TestDebInstallIntoDebianRoot(t *testing.T) {
	dist := release(t)
	want := wantFiles(t)
	root := debianRoot(t)
	deb, err := os.ReadFile(filepath.Join(dist, artifacts(runtime.GOARCH)[2]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tmp/scratchrun.deb"), deb, 0o644); err != nil {
		t.Fatal(err)
	}
	before := rootFiles(t, root)

	out, err := inRoot(root, "dpkg", "-i", "/tmp/scratchrun.deb")
	if err != nil || !strings.Contains(out, "no service enabled") {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	for _, p := range want {
		if fi, err := os.Lstat(filepath.Join(root, p)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not installed: %v", p, err)
		}
	}
	for _, dir := range []string{"/var/lib/scratchrun", "/run/scratchrun"} {
		if fi, err := os.Stat(filepath.Join(root, dir)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("state directory %s: %v %v", dir, fi, err)
		}
	}
	envFile, _ := os.ReadFile(filepath.Join(root, "etc/scratchrun/scratchrun.env"))
	if repo, _ := os.ReadFile("../deploy/scratchrun.env"); len(repo) == 0 || !bytes.Equal(envFile, repo) {
		t.Error("/etc/scratchrun/scratchrun.env is not deploy/scratchrun.env")
	}
	if links, _ := filepath.Glob(filepath.Join(root, "etc/systemd/system/*/scratchrun*")); len(links) != 0 {
		t.Errorf("the install enabled units: %v", links)
	}

	units := []string{"scratchrun.service", "scratchrun-worker.service", "scratchrun-frontend.service"}
	verify := exec.Command("systemd-analyze", append([]string{"verify", "--root=" + root, "--man=no"}, units...)...)
	if out, err := verify.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	if out, err := inRoot(root, "/usr/bin/scratchrun", "version"); err != nil || !strings.Contains(out, releaseVersion) {
		t.Errorf("scratchrun version in the root: %v %q, want %s", err, out, releaseVersion)
	}
	// The installed binaries, with their own scratchrun-spawn and
	// scratchrun-init next to them, run a call as the installed unit would.
	out, err = engineCall(t, filepath.Join(root, "usr/bin/scratchrun"), filepath.Join(root, "usr/lib/systemd/system/scratchrun.service"),
		"--runtime", "python3.13", "--code", "print('from the package', 6 * 7)")
	if err != nil || !strings.Contains(out, "from the package 42") {
		t.Errorf("a call with the installed binaries: %v\n%s", err, out)
	}

	// An operator's doings, which a purge undoes.
	if out, err := inRoot(root, "systemctl", "enable", "scratchrun.service"); err != nil {
		t.Fatalf("systemctl enable: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(root, "etc/scratchrun/worker.env"), []byte("SCRATCHRUN_NATS=tls://nats:4222\n"), 0o600)
	os.MkdirAll(filepath.Join(root, "var/lib/scratchrun/images/bookworm-0123"), 0o755)
	os.WriteFile(filepath.Join(root, "var/lib/scratchrun/keys.db"), []byte("keys"), 0o600)

	if out, err := inRoot(root, "dpkg", "--remove", "scratchrun"); err != nil {
		t.Fatalf("dpkg --remove: %v\n%s", err, out)
	}
	for _, p := range want {
		_, err := os.Lstat(filepath.Join(root, p))
		if kept := p == "/etc/scratchrun/scratchrun.env"; kept != (err == nil) {
			t.Errorf("after remove, %s: %v (a conffile stays until purge, the rest goes)", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/scratchrun/keys.db")); err != nil {
		t.Errorf("remove took the state: %v", err)
	}
	if out, err := inRoot(root, "dpkg", "--purge", "scratchrun"); err != nil {
		t.Fatalf("dpkg --purge: %v\n%s", err, out)
	}
	if diff := diffFiles(before, rootFiles(t, root)); len(diff) != 0 {
		t.Errorf("the purge left the root changed:\n  %s", strings.Join(diff, "\n  "))
	}
}
