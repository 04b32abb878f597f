package main

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"testing"
	"time"
)

// packed is a zip as a packer writes one: entries of their own times
// (with the extended timestamp Go's writer adds for Modified), modes, one
// stored and one deflated.
func packed(t *testing.T, when time.Time) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for i, e := range []struct {
		name   string
		mode   fs.FileMode
		method uint16
		data   string
	}{
		{"manifest.json", 0o644, zip.Deflate, `{"name": "x"}`},
		{"server/scratchrun", 0o755, zip.Deflate, "binary bytes binary bytes binary bytes"},
		{"icon.png", 0o600, zip.Store, "\x89PNG"},
	} {
		fh := &zip.FileHeader{Name: e.name, Method: e.method, Modified: when.Add(time.Duration(i) * time.Hour)}
		fh.SetMode(e.mode)
		f, err := w.CreateHeader(fh)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(e.data))
	}
	w.SetComment("packed")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Two packings of the same files at different moments come out the same
// bytes once stamped, and what they hold (names, order, modes, contents,
// the comment) is what was packed, every entry at the given time.
func TestStamp(t *testing.T) {
	epoch := time.Date(2026, 3, 4, 5, 6, 8, 0, time.UTC)
	a, err := stamp(packed(t, time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)), epoch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := stamp(packed(t, time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC)), epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two packings differ once stamped")
	}
	r, err := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Comment != "packed" {
		t.Errorf("comment %q", r.Comment)
	}
	want := []struct {
		name string
		mode fs.FileMode
		data string
	}{{"manifest.json", 0o644, `{"name": "x"}`}, {"server/scratchrun", 0o755, "binary bytes binary bytes binary bytes"}, {"icon.png", 0o600, "\x89PNG"}}
	if len(r.File) != len(want) {
		t.Fatalf("%d entries, want %d", len(r.File), len(want))
	}
	for i, f := range r.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc) // checks the CRC too
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if f.Name != want[i].name || f.Mode() != want[i].mode || string(data) != want[i].data {
			t.Errorf("entry %d: %s %v %q, want %+v", i, f.Name, f.Mode(), data, want[i])
		}
		if !f.Modified.Equal(epoch) {
			t.Errorf("%s: time %v, want %v", f.Name, f.Modified, epoch)
		}
	}
}

// A file that is not a zip is refused, not rewritten.
func TestStampRefusesNonZip(t *testing.T) {
	if _, err := stamp([]byte("not a zip archive at all"), time.Unix(0, 0)); err == nil {
		t.Error("stamped a file that is not a zip")
	}
}
