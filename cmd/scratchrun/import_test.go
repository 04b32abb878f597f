package main

import (
	"archive/tar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// worldReadableTempDir is a temp dir that a sandbox's unprivileged uid (or
// another user) can traverse.
func worldReadableTempDir(t *testing.T) string {
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	return dir
}

// tinyRootfs writes a tarball holding bash and cat with their libraries: the
// smallest image an operator might import.
func tinyRootfs(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	defer tw.Close()
	added := map[string]bool{}
	addDir := func(name string) {
		parts := strings.Split(strings.Trim(name, "/"), "/")
		for i := range parts {
			dir := strings.Join(parts[:i+1], "/") + "/"
			if !added[dir] {
				added[dir] = true
				tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755})
			}
		}
	}
	addFile := func(host, name string) {
		data, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		addDir(filepath.Dir(name))
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data))})
		tw.Write(data)
	}
	libPattern := regexp.MustCompile(`(/[^ ]+\.so[^ ]*)`)
	for _, bin := range []string{"/bin/bash", "/bin/cat"} {
		addFile(bin, strings.TrimPrefix(bin, "/"))
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, lib := range libPattern.FindAllString(string(out), -1) {
			if !added[lib] {
				added[lib] = true
				addFile(lib, strings.TrimPrefix(lib, "/"))
			}
		}
	}
	for _, d := range []string{"tmp", "proc", "dev", "code", "root", "etc"} {
		addDir(d)
	}
}

// An operator imports a rootfs tarball as a new runtime and runs code in it.
func TestImagesImportAddsARuntime(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := worldReadableTempDir(t)
	tarPath := filepath.Join(dir, "rootfs.tar")
	tinyRootfs(t, tarPath)
	data := filepath.Join(dir, "data")
	t.Setenv("SCRATCHRUN_DATA_DIR", data)
	r := scratchrun(t, dir, "", "images", "import", "tinybash", tarPath, "--command", "/bin/bash {file}", "--file", "main.sh")
	if r.code != 0 {
		t.Fatalf("import: exit %d stderr %q", r.code, r.stderr)
	}
	r = scratchrun(t, dir, "", "exec", "--runtime", "tinybash", "--code", "echo imported; cat /tmp/in", "--file", "/tmp/in=x")
	if r.code != 0 || r.stdout != "imported\nx" {
		t.Fatalf("exec in imported runtime: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = scratchrun(t, dir, "", "images", "import", "tinybash2", tarPath, "--command", "/bin/bash", "--file", "main.sh")
	if r.code == 0 || !strings.Contains(r.stderr, "{file}") {
		t.Errorf("import without {file}: exit %d stderr %q", r.code, r.stderr)
	}
}

// An ordinary user (as a desktop MCP client starts it) runs code too, and is
// told once what cannot be enforced.
func TestRunsAsOrdinaryUser(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to another user")
	}
	const nobody = 65534
	cmd := exec.Command(binary, "exec", "--runtime", "bash", "--code", "id -u; echo hi > /tmp/x; cat /tmp/x")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	defer os.RemoveAll(filepath.Join(os.TempDir(), "scratchrun-65534"))
	out, err := cmd.Output()
	if err != nil || string(out) != "0\nhi\n" {
		t.Fatalf("as nobody: %v stdout %q stderr %q", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "NOT enforced") {
		t.Errorf("stderr %q does not state what cannot be enforced", stderr.String())
	}
}
