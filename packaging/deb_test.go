package packaging

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// packageFiles are the files the .deb installs, where docs/install.md says.
var packageFiles = []string{
	"/usr/bin/scratchrun", "/usr/bin/scratchrun-init", "/usr/bin/scratchrun-spawn",
	"/usr/lib/systemd/system/scratchrun.service", "/usr/lib/systemd/system/scratchrun-worker.service",
	"/usr/lib/systemd/system/scratchrun-frontend.service", "/usr/lib/tmpfiles.d/scratchrun.conf",
	"/etc/scratchrun/scratchrun.env",
	"/usr/share/doc/scratchrun/examples/worker.env.example", "/usr/share/doc/scratchrun/examples/frontend.env.example",
}

// completionFiles are the shell completions, in the package when the
// built scratchrun has a completion command (release.sh asks it).
var completionFiles = []string{
	"/usr/share/bash-completion/completions/scratchrun", "/usr/share/zsh/vendor-completions/_scratchrun",
	"/usr/share/fish/vendor_completions.d/scratchrun.fish",
}

// wantFiles is packageFiles, with the completions if this scratchrun
// makes them.
func wantFiles(t *testing.T) []string {
	t.Helper()
	dir := hostBinaries(t)
	if err := exec.Command(filepath.Join(dir, "scratchrun"), "completion", "bash").Run(); err != nil {
		t.Logf("this scratchrun has no completion command (%v): no completions are expected in the package", err)
		return packageFiles
	}
	return append(slices.Clone(packageFiles), completionFiles...)
}

// dpkg-deb --info shows each architecture's package with its version,
// dependencies, maintainer scripts and conffile; --contents lists every
// file above, root's, and nothing else but their folders.
func TestDebInfoAndContents(t *testing.T) {
	dist := release(t)
	want := wantFiles(t)
	for _, arch := range arches {
		deb := filepath.Join(dist, artifacts(arch)[2])
		info, err := exec.Command("dpkg-deb", "--info", deb).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg-deb --info %s: %v\n%s", deb, err, info)
		}
		for _, line := range []string{"Package: scratchrun", "Version: " + packageVersion, "Architecture: " + arch,
			"Depends: libc6", "Recommends: mmdebstrap, ca-certificates", " postinst ", " prerm ", " postrm ", " conffiles "} {
			if !strings.Contains(string(info), line) {
				t.Errorf("%s: dpkg-deb --info has no %q:\n%s", arch, line, info)
			}
		}
		conffiles, err := exec.Command("dpkg-deb", "--info", deb, "conffiles").Output()
		if err != nil || strings.TrimSpace(string(conffiles)) != "/etc/scratchrun/scratchrun.env" {
			t.Errorf("%s: conffiles %q (%v), want the environment file alone", arch, conffiles, err)
		}
		out, err := exec.Command("dpkg-deb", "--contents", deb).Output()
		if err != nil {
			t.Fatalf("dpkg-deb --contents %s: %v", deb, err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 {
				t.Fatalf("%s: dpkg-deb --contents line %q", arch, line)
			}
			path := strings.TrimPrefix(f[5], ".")
			if f[1] != "root/root" {
				t.Errorf("%s: %s is owned by %s", arch, path, f[1])
			}
			if !strings.HasPrefix(f[0], "d") {
				got = append(got, path)
				if mode := f[0]; strings.HasPrefix(path, "/usr/bin/") != (mode == "-rwxr-xr-x") {
					t.Errorf("%s: %s has mode %s", arch, path, mode)
				}
			}
		}
		slices.Sort(got)
		sorted := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, sorted) {
			t.Errorf("%s: the package holds\n  %s\nwant\n  %s", arch, strings.Join(got, "\n  "), strings.Join(sorted, "\n  "))
		}
	}
}
