package imagestest

import (
	"archive/tar"
	"bytes"
	"testing"
	"time"
)

// Entry is one entry of a hand-built layer or tarball.
type Entry struct {
	Name     string
	Type     byte // tar.TypeReg, tar.TypeDir, tar.TypeSymlink, ...
	Mode     int64
	UID, GID int
	Body     string // a regular file's contents
	Link     string // a link's target
}

// ModTime is every entry's modification time, so that a layer's bytes (and
// digest) are the same however often a test builds it.
var ModTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// Tar returns a tarball holding entries, in order (device nodes are 1,3).
func Tar(t testing.TB, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:     e.Name,
			Typeflag: e.Type,
			Mode:     e.Mode,
			Uid:      e.UID,
			Gid:      e.GID,
			Linkname: e.Link,
			ModTime:  ModTime,
			Format:   tar.FormatPAX,
		}
		if e.Type == tar.TypeReg {
			hdr.Size = int64(len(e.Body))
		}
		if e.Type == tar.TypeChar || e.Type == tar.TypeBlock {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %s: %v", e.Name, err)
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
