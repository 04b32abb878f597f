package packaging

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// releaseVersion is the version the tests build: a tag's shape with a
// "-" the package version must turn into "+".
const (
	releaseVersion = "v25.1.0-test.1"
	packageVersion = "25.1.0+test.1"
)

var (
	// The installed binaries' calls use a state directory and cgroup
	// parent of this test run's own, so that the leak check at the end
	// sees only their sandboxes.
	env = testenv.New("packaging")
	lvl = env.Level("namespaces", nil)

	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := env.Run(m)
	if releaseDir != "" {
		// The release and the host's binaries extracted beside it.
		os.RemoveAll(filepath.Dir(releaseDir))
	}
	os.Exit(code)
}

// release runs scripts/release.sh once for the package's tests and
// returns the folder it wrote.
func release(t *testing.T) string {
	t.Helper()
	testenv.SkipIfShort(t, "builds a release for two architectures (minutes) and needs Debian's cross compiler")
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "scratchrun-release-test-")
		if err != nil {
			releaseErr = err
			return
		}
		releaseDir = filepath.Join(dir, "dist")
		cmd := exec.Command("../scripts/release.sh", releaseVersion)
		cmd.Env = append(os.Environ(), "DIST="+releaseDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			releaseErr = errors.New("scripts/release.sh: " + err.Error() + "\n" + string(out))
		}
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

var arches = []string{"amd64", "arm64"}

// artifacts are the files release.sh makes, by architecture.
func artifacts(arch string) []string {
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]
	base := "scratchrun_" + releaseVersion + "_linux_" + arch
	return []string{base + ".tar.gz", base + ".cdx.json", "scratchrun_" + packageVersion + "_" + arch + ".deb",
		"scratchrun-" + packageVersion + "-1." + rpmArch + ".rpm"}
}

// clientPlatforms are the desktop OSes whose tarball holds scratchrun alone,
// the client (cmd/scratchrun's client_build_test.go builds the same list).
var clientPlatforms = []struct{ goos, goarch string }{{"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}

// clientTarball is the tarball's base name for a desktop platform.
func clientTarball(goos, goarch string) string {
	return "scratchrun_" + releaseVersion + "_" + goos + "_" + goarch
}

// Every artifact of both architectures is there and in SHA256SUMS, and
// sha256sum -c (what docs/install.md tells a user to run) verifies them.
func TestReleaseChecksums(t *testing.T) {
	dist := release(t)
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			listed = append(listed, f[1])
		}
	}
	for _, arch := range arches {
		for _, name := range artifacts(arch) {
			if !slices.Contains(listed, name) {
				t.Errorf("SHA256SUMS does not list %s: %v", name, listed)
			}
		}
	}
	for _, name := range []string{"server.json", bundleName} {
		if !slices.Contains(listed, name) {
			t.Errorf("SHA256SUMS does not list %s: %v", name, listed)
		}
	}
	for _, p := range clientPlatforms {
		if name := clientTarball(p.goos, p.goarch) + ".tar.gz"; !slices.Contains(listed, name) {
			t.Errorf("SHA256SUMS does not list %s: %v", name, listed)
		}
	}
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = dist
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
	// A changed byte is caught: the check is not vacuous.
	deb := filepath.Join(dist, artifacts("arm64")[2])
	data, _ := os.ReadFile(deb)
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "SHA256SUMS"), sums, 0o644)
	for _, name := range listed {
		src := filepath.Join(dist, name)
		if name == filepath.Base(deb) {
			data[len(data)/2] ^= 1
			os.WriteFile(filepath.Join(bad, name), data, 0o644)
			continue
		}
		os.Symlink(src, filepath.Join(bad, name))
	}
	cmd = exec.Command("sha256sum", "--quiet", "-c", "SHA256SUMS")
	cmd.Dir = bad
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), filepath.Base(deb)+": FAILED") {
		t.Errorf("a corrupt .deb passed sha256sum -c: %v %s", err, out)
	}
}

// The release's server.json is the one TestServerJSON validates, for the
// release's version and its bundle.
func TestReleaseServerJSON(t *testing.T) {
	dist := release(t)
	data, err := os.ReadFile(filepath.Join(dist, "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := serverJSON(t, releaseVersion, filepath.Join(dist, bundleName)); !bytes.Equal(data, want) {
		t.Errorf("dist/server.json\n%s\nwant\n%s", data, want)
	}
}

// Each tarball holds the three binaries in a folder of its name, for its
// architecture; the Go ones are static; the host's scratchrun says the
// version it was built as. The arm64 ones are only read, not run.
func TestReleaseTarballs(t *testing.T) {
	dist := release(t)
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, arch := range arches {
		base := "scratchrun_" + releaseVersion + "_linux_" + arch
		files := untar(t, filepath.Join(dist, base+".tar.gz"))
		var names []string
		for name := range files {
			names = append(names, name)
		}
		slices.Sort(names)
		want := []string{base + "/scratchrun", base + "/scratchrun-init", base + "/scratchrun-spawn"}
		if !slices.Equal(names, want) {
			t.Errorf("%s holds %v, want %v", base, names, want)
			continue
		}
		for _, name := range want {
			f, err := elf.NewFile(bytes.NewReader(files[name]))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			interp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
			if f.Machine != machine[arch] || f.Class != elf.ELFCLASS64 {
				t.Errorf("%s is for %v %v, want %v", name, f.Machine, f.Class, machine[arch])
			}
			// CGO_ENABLED=0: the Go binaries need no libc; the C helper
			// links with the target's glibc.
			if static := !strings.HasSuffix(name, "-spawn"); static == interp {
				t.Errorf("%s: program interpreter %v, want %v", name, interp, !static)
			}
		}
	}
	if out := hostBinary(t, "version"); !strings.Contains(out, releaseVersion) {
		t.Errorf("scratchrun version says %q, want %s", out, releaseVersion)
	}
}

// Each desktop tarball holds scratchrun alone (scratchrun.exe on Windows),
// built for its OS and architecture.
func TestReleaseClientTarballs(t *testing.T) {
	dist := release(t)
	for _, p := range clientPlatforms {
		base := clientTarball(p.goos, p.goarch)
		exe := map[string]string{"windows": ".exe"}[p.goos]
		files := untar(t, filepath.Join(dist, base+".tar.gz"))
		data, ok := files[base+"/scratchrun"+exe]
		if len(files) != 1 || !ok {
			t.Errorf("%s holds %d files, want %s/scratchrun%s alone", base, len(files), base, exe)
			continue
		}
		if got := executableFor(data); got != p.goos+"/"+p.goarch {
			t.Errorf("%s/scratchrun%s is for %s, want %s/%s", base, exe, got, p.goos, p.goarch)
		}
	}
}

// executableFor says which OS/architecture a Mach-O or PE binary is for.
func executableFor(data []byte) string {
	if f, err := macho.NewFile(bytes.NewReader(data)); err == nil {
		return map[macho.Cpu]string{macho.CpuAmd64: "darwin/amd64", macho.CpuArm64: "darwin/arm64"}[f.Cpu]
	}
	if f, err := pe.NewFile(bytes.NewReader(data)); err == nil && f.Machine == pe.IMAGE_FILE_MACHINE_AMD64 {
		return "windows/amd64"
	}
	return "unknown"
}

// hostBinary runs the release's scratchrun of this machine's architecture
// with args, returning its output.
func hostBinary(t *testing.T, args ...string) string {
	t.Helper()
	dir := hostBinaries(t)
	out, _ := exec.Command(filepath.Join(dir, "scratchrun"), args...).CombinedOutput()
	return string(out)
}

var (
	hostOnce sync.Once
	hostDir  string
)

// hostBinaries extracts the release's binaries of this machine's
// architecture into a folder of the test run's and returns it.
func hostBinaries(t *testing.T) string {
	t.Helper()
	dist := release(t)
	hostOnce.Do(func() {
		base := "scratchrun_" + releaseVersion + "_linux_" + runtime.GOARCH
		hostDir = filepath.Join(filepath.Dir(dist), "host")
		os.MkdirAll(hostDir, 0o755)
		for name, data := range untar(t, filepath.Join(dist, base+".tar.gz")) {
			os.WriteFile(filepath.Join(hostDir, filepath.Base(name)), data, 0o755)
		}
	})
	return hostDir
}

// untar reads a .tar.gz's regular files.
func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = data
		}
	}
}

// cycloneDX is what the test reads of a CycloneDX BOM.
type cycloneDX struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component struct {
			Name, Version string
		}
	}
	Components []struct {
		Type, Name, Version, PURL string
	}
}

// The SBOM of each architecture is CycloneDX JSON naming scratchrun as
// its application and the modules linked into it (not the tools that only
// build the release, nor the test-only modules).
func TestReleaseSBOM(t *testing.T) {
	dist := release(t)
	for _, arch := range arches {
		path := filepath.Join(dist, "scratchrun_"+releaseVersion+"_linux_"+arch+".cdx.json")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var bom cycloneDX
		if err := json.Unmarshal(data, &bom); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if bom.BOMFormat != "CycloneDX" || bom.SpecVersion == "" || bom.Metadata.Component.Name != "github.com/scratchrun/scratchrun" {
			t.Errorf("%s: format %q %q, component %+v", arch, bom.BOMFormat, bom.SpecVersion, bom.Metadata.Component)
		}
		has := map[string]string{}
		for _, c := range bom.Components {
			has[c.Name] = c.Version
		}
		for _, dep := range []string{"github.com/nats-io/nats.go", "github.com/google/go-containerregistry", "golang.org/x/sys", "std"} {
			if has[dep] == "" {
				t.Errorf("%s: the SBOM does not list %s", arch, dep)
			}
		}
		for _, notShipped := range []string{"github.com/goreleaser/nfpm/v2", "github.com/CycloneDX/cyclonedx-gomod", "github.com/chromedp/chromedp"} {
			if _, ok := has[notShipped]; ok {
				t.Errorf("%s: the SBOM lists %s, which scratchrun does not link", arch, notShipped)
			}
		}
	}
}

// The .rpm nfpm makes alongside is an RPM of each architecture (its lead's
// magic and name); no machine here installs it.
func TestReleaseRPM(t *testing.T) {
	dist := release(t)
	for _, arch := range arches {
		data, err := os.ReadFile(filepath.Join(dist, artifacts(arch)[3]))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 96 || !bytes.Equal(data[:4], []byte{0xed, 0xab, 0xee, 0xdb}) || !bytes.HasPrefix(data[10:76], []byte("scratchrun-"+packageVersion)) {
			t.Errorf("%s: not an RPM of scratchrun %s", arch, packageVersion)
		}
	}
}
