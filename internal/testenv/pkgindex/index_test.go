package pkgindex

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func serve(t *testing.T) (*Index, string) {
	t.Helper()
	idx := &Index{
		Wheels:   map[string][]byte{"scratchrun-hello": Wheel(t, "scratchrun-hello", map[string][]byte{"scratchrun_hello/__init__.py": []byte("GREETING = 'hi'\n")})},
		Tarballs: map[string][]byte{"scratchrun-hello": NpmTarball(t, "scratchrun-hello", "module.exports = 1;\n")},
	}
	srv := httptest.NewServer(idx)
	t.Cleanup(srv.Close)
	idx.URL = srv.URL
	return idx, srv.URL
}

// The simple index links the wheel with the hash pip checks, and the wheel
// carries the metadata and a RECORD that is true of its files.
func TestSimpleIndexServesTheWheel(t *testing.T) {
	_, url := serve(t)
	status, page := get(t, url+"/simple/scratchrun-hello")
	m := regexp.MustCompile(`href="(/files/[^"#]+)#sha256=([0-9a-f]{64})"`).FindStringSubmatch(string(page))
	if status != 200 || m == nil {
		t.Fatalf("project page: %d %s", status, page)
	}
	if m[1] != "/files/"+WheelName("scratchrun-hello") || WheelName("scratchrun-hello") != "scratchrun_hello-1.0-py3-none-any.whl" {
		t.Errorf("links %s", m[1])
	}
	status, whl := get(t, url+m[1])
	sum := sha256.Sum256(whl)
	if status != 200 || hex.EncodeToString(sum[:]) != m[2] {
		t.Fatalf("wheel: %d, sha256 %x, the page says %s", status, sum, m[2])
	}
	zr, err := zip.NewReader(bytes.NewReader(whl), int64(len(whl)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	const dist = "scratchrun_hello-1.0.dist-info/"
	if !strings.Contains(string(files[dist+"METADATA"]), "Name: scratchrun-hello\nVersion: 1.0\n") ||
		!strings.Contains(string(files[dist+"WHEEL"]), "Root-Is-Purelib: true") ||
		string(files["scratchrun_hello/__init__.py"]) != "GREETING = 'hi'\n" {
		t.Errorf("wheel files: %q", files)
	}
	lines := strings.Split(strings.TrimSuffix(string(files[dist+"RECORD"]), "\n"), "\n")
	if len(lines) != len(files) {
		t.Errorf("RECORD has %d lines for %d files:\n%s", len(lines), len(files), files[dist+"RECORD"])
	}
	for _, line := range lines {
		name, rest, _ := strings.Cut(line, ",")
		if name == dist+"RECORD" {
			if rest != "," {
				t.Errorf("RECORD's own line %q", line)
			}
			continue
		}
		s := sha256.Sum256(files[name])
		if want := "sha256=" + base64.RawURLEncoding.EncodeToString(s[:]) + "," + strconv.Itoa(len(files[name])); rest != want {
			t.Errorf("RECORD %q, want %s", line, want)
		}
	}
	for _, path := range []string{"/simple/nothing", "/files/nothing.whl", "/elsewhere"} {
		if status, _ := get(t, url+path); status != 404 {
			t.Errorf("%s: %d, want 404", path, status)
		}
	}
}

// The npm registry document names a tarball at the index's URL, with the
// checksums npm verifies, and the tarball is the package.
func TestNpmRegistryServesTheTarball(t *testing.T) {
	_, url := serve(t)
	status, body := get(t, url+"/npm/scratchrun-hello")
	var doc struct {
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Name, Version, Main string
			Dist                struct{ Tarball, Shasum, Integrity string }
		}
	}
	if err := json.Unmarshal(body, &doc); status != 200 || err != nil {
		t.Fatalf("registry document: %d %v %s", status, err, body)
	}
	v := doc.Versions["1.0.0"]
	if doc.DistTags["latest"] != "1.0.0" || v.Name != "scratchrun-hello" || v.Main != "index.js" ||
		v.Dist.Tarball != url+"/npm/scratchrun-hello/-/scratchrun-hello-1.0.0.tgz" {
		t.Fatalf("registry document: %s", body)
	}
	status, tgz := get(t, v.Dist.Tarball)
	s1, s512 := sha1.Sum(tgz), sha512.Sum512(tgz)
	if status != 200 || v.Dist.Shasum != hex.EncodeToString(s1[:]) || v.Dist.Integrity != "sha512-"+base64.StdEncoding.EncodeToString(s512[:]) {
		t.Fatalf("tarball: %d, checksums do not match %+v", status, v.Dist)
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = string(data)
	}
	var pkg struct{ Name, Version, Main string }
	if err := json.Unmarshal([]byte(files["package/package.json"]), &pkg); err != nil || pkg.Name != "scratchrun-hello" || pkg.Version != "1.0.0" ||
		files["package/index.js"] != "module.exports = 1;\n" || len(files) != 2 {
		t.Errorf("tarball files %q (%v)", files, err)
	}
	for _, path := range []string{"/npm/nothing", "/npm/scratchrun-hello/-/scratchrun-hello-2.0.0.tgz", "/npm/nothing/-/nothing-1.0.0.tgz"} {
		if status, _ := get(t, url+path); status != 404 {
			t.Errorf("%s: %d, want 404", path, status)
		}
	}
}
