package pkgindex

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// Wheel makes a pure-Python wheel of project, version 1.0, holding files
// (paths relative to site-packages), with the metadata and RECORD that pip
// checks.
func Wheel(t testing.TB, project string, files map[string][]byte) []byte {
	t.Helper()
	dist := strings.ReplaceAll(project, "-", "_") + "-1.0.dist-info"
	all := map[string][]byte{
		dist + "/METADATA": []byte("Metadata-Version: 2.1\nName: " + project + "\nVersion: 1.0\n"),
		dist + "/WHEEL":    []byte("Wheel-Version: 1.0\nGenerator: scratchrun-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
	}
	for k, v := range files {
		all[k] = v
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range all {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(data))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", dist)
	f, err := zw.Create(dist + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// NpmTarball makes the tarball of npm package name, version 1.0.0, whose
// main module index.js is index.
func NpmTarball(t testing.TB, name string, index string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, file := range []struct{ name, body string }{
		{"package/package.json", fmt.Sprintf(`{"name": %q, "version": "1.0.0", "main": "index.js"}`, name)},
		{"package/index.js", index},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(file.body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(file.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
