package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// noise is n bytes that do not compress, the same in every run.
func noise(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// A pull that would pass one of its bounds fails with an error that names
// the bound, and keeps nothing: before the bounds, a 64 KiB blob of zeros
// unpacked to 64 MiB and every other image was taken whatever its size.
func TestPullBounds(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	reg.Push("bomb:1", imagestest.Image(t, "linux/amd64", v1.Config{},
		append(slices.Clone(programLayer), imagestest.Entry{Name: "zeros", Type: tar.TypeReg, Mode: 0o644, Body: strings.Repeat("\x00", 64<<20)})))
	big := func(name string) []imagestest.Entry {
		return []imagestest.Entry{{Name: name, Type: tar.TypeReg, Mode: 0o644, Body: noise(3 << 20)}}
	}
	reg.Push("big:1", imagestest.Image(t, "linux/amd64", v1.Config{}, append(slices.Clone(programLayer), big("a")...), big("b")))
	s := openTestStore(t)
	var st unix.Statfs_t
	if err := unix.Statfs(s.imagesDir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize

	for _, c := range []struct {
		ref    string
		limits PullLimits
		want   []string
	}{
		{reg.Ref("bomb:1"), PullLimits{}, []string{"layer 1/1", "more than 100 times its", "MaxRatio"}},
		{reg.Ref("big:1"), PullLimits{MaxBytes: 5 << 20}, []string{"layer 2/2", "maximum image size of 5.0 MiB", "MaxBytes"}},
		{reg.Ref("big:1"), PullLimits{MinFree: free + 1<<40}, []string{"less than the reserve of", "MinFree"}},
	} {
		err := s.Pull(context.Background(), c.ref, specNamed("bounded"), ImageSelect{Limits: c.limits}, nil)
		if !errors.Is(err, ErrPullBound) {
			t.Errorf("pull %s with %+v: err = %v, want ErrPullBound", c.ref, c.limits, err)
		}
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("pull %s with %+v: err = %v, want it to mention %q", c.ref, c.limits, err, w)
			}
		}
		if done, tmp := ociDirs(t, s); len(done) != 0 || len(tmp) != 0 {
			t.Errorf("pull %s left images %v, unfinished %v", c.ref, done, tmp)
		}
		if _, err := s.Resolve("bounded"); !errors.Is(err, ErrUnknownRuntime) {
			t.Errorf("pull %s: the runtime was registered: %v", c.ref, err)
		}
	}
	// Within its bounds the same image is taken.
	if err := s.Pull(context.Background(), reg.Ref("big:1"), specNamed("bounded"), ImageSelect{Limits: PullLimits{MaxBytes: 8 << 20}}, nil); err != nil {
		t.Errorf("pull within the bounds: %v", err)
	}
}

// A layout's blob that is longer than its digest says, or differs from it
// after its compressed stream, is refused: the client never checks a
// layout's blobs, and reading a layer only to its tar's end checked
// neither the digest nor what followed.
func TestImportRefusesBlobsThatDifferFromTheirDigest(t *testing.T) {
	img := imagestest.Image(t, "linux/amd64", v1.Config{}, programLayer)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := layers[0].Digest()
	for _, c := range []struct {
		name   string
		change func(blob []byte) []byte
		want   string
	}{
		// gzip reads on into a second member, which adds nothing to the
		// tar: only the digest tells.
		{"an empty gzip member appended", func(b []byte) []byte { return append(b, gzipBytes(t, nil)...) }, "the blob is longer than"},
		// Same length, same tar: gzip does not check its header.
		{"the gzip header's time changed", func(b []byte) []byte { b[4] ^= 1; return b }, "the blob has digest"},
		{"a byte of the gzip trailer changed", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, "layer 1/1"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "layout")
			p, err := layout.Write(dir, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.AppendImage(img); err != nil {
				t.Fatal(err)
			}
			blobPath := filepath.Join(dir, "blobs", "sha256", digest.Hex)
			blob, err := os.ReadFile(blobPath)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, blobPath, c.change(blob))
			s := openTestStore(t)
			err = s.ImportImage(context.Background(), dir, specNamed("tampered"), ImageSelect{}, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("import: err = %v, want it to mention %q", err, c.want)
			}
			if done, tmp := ociDirs(t, s); len(done) != 0 || len(tmp) != 0 {
				t.Errorf("import left images %v, unfinished %v", done, tmp)
			}
		})
	}
}

// sparseTar is a tar holding programLayer and a PAX 1.0 sparse file (as GNU
// tar writes them; archive/tar writes none) of size bytes, all a hole but
// its last byte: a few hundred bytes that unpack to size.
func sparseTar(t *testing.T, size int64) []byte {
	t.Helper()
	var out bytes.Buffer
	base := imagestest.Tar(t, programLayer)
	out.Write(base[:len(base)-1024]) // without the end-of-archive blocks
	block := func(name string, typ byte, size int) {
		var h [512]byte
		copy(h[0:], name)
		copy(h[100:], "0000644\x00")
		copy(h[108:], "0000000\x00")
		copy(h[116:], "0000000\x00")
		copy(h[124:], fmt.Sprintf("%011o\x00", size))
		copy(h[136:], fmt.Sprintf("%011o\x00", imagestest.ModTime.Unix()))
		h[156] = typ
		copy(h[257:], "ustar\x0000")
		copy(h[148:], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
		out.Write(h[:])
	}
	pad := func() { out.Write(make([]byte, (512-out.Len()%512)%512)) }
	record := func(k, v string) string {
		rec := " " + k + "=" + v + "\n"
		n := len(rec)
		for len(strconv.Itoa(n))+len(rec) != n {
			n = len(strconv.Itoa(n)) + len(rec)
		}
		return strconv.Itoa(n) + rec
	}
	pax := record("GNU.sparse.major", "1") + record("GNU.sparse.minor", "0") +
		record("GNU.sparse.name", "sparse") + record("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	block("PaxHeaders/sparse", tar.TypeXHeader, len(pax))
	out.WriteString(pax)
	pad()
	// The data: the sparse map (one 1-byte segment at the end), padded to
	// a block, then that byte.
	sparseMap := fmt.Sprintf("1\n%d\n1\n", size-1)
	block("GNUSparseFile.0/sparse", tar.TypeReg, 512+1)
	out.WriteString(sparseMap)
	pad()
	out.WriteByte('x')
	pad()
	out.Write(make([]byte, 1024))
	return out.Bytes()
}

// A sparse entry's holes are written as zeros: the bounds count what is
// written, not the (tiny) tar stream.
func TestPullBoundsCountSparseFilesAsWritten(t *testing.T) {
	data := sparseTar(t, 256<<20)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	reg := imagestest.NewRegistry(t)
	reg.Push("sparse:1", img)
	s := openTestStore(t)
	err = s.Pull(context.Background(), reg.Ref("sparse:1"), specNamed("sparse"), ImageSelect{Limits: PullLimits{MaxBytes: 64 << 20, MaxRatio: 1 << 40}}, nil)
	if !errors.Is(err, ErrPullBound) || !strings.Contains(err.Error(), "MaxBytes") {
		t.Errorf("sparse layer of 256 MiB under a 64 MiB bound: err = %v", err)
	}
	if done, tmp := ociDirs(t, s); len(done) != 0 || len(tmp) != 0 {
		t.Errorf("left images %v, unfinished %v", done, tmp)
	}
	// Within the bound the file is there, whole.
	if err := s.Pull(context.Background(), reg.Ref("sparse:1"), specNamed("sparse"), ImageSelect{Limits: PullLimits{MaxBytes: 512 << 20, MaxRatio: 1 << 40}}, nil); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
	res, err := s.Resolve("sparse")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(res.RootFS, "sparse")); err != nil || fi.Size() != 256<<20 {
		t.Errorf("sparse file: %v, %v", fi, err)
	}
}
