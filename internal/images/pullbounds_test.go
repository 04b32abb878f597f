package images

import (
	"archive/tar"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
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
