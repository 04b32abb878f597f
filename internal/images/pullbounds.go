package images

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// Default bounds of storing one OCI image (see PullLimits). 8 GiB holds the
// largest images runtimes are made from (CUDA and data-science images run
// to 5-7 GiB unpacked); real layers unpack to 2-10 times their blob, so 100
// leaves room for sparse or highly compressible files while a blob of
// zeros (1 MiB that unpacks to 1 GiB) is refused; 1 GiB of free space is
// kept for the engine's own state and logs.
const (
	DefaultPullMaxBytes int64 = 8 << 30
	DefaultPullMaxRatio int64 = 100
	DefaultPullMinFree  int64 = 1 << 30
)

// ErrPullBound is wrapped by the error of a pull or image import that
// would pass one of its PullLimits.
var ErrPullBound = errors.New("over a bound of the pull")

// PullLimits bound how much disk storing one OCI image (pull, docker save
// archive, OCI layout) may take. A zero field takes its default. Over any
// bound the pull fails and nothing of it is kept.
type PullLimits struct {
	// MaxBytes bounds the image's extracted size: its layers' tar streams,
	// or the file contents written when those are larger (sparse files),
	// all layers together. Default DefaultPullMaxBytes.
	MaxBytes int64
	// MaxRatio bounds each layer's extracted size as a multiple of its
	// blob's size. Default DefaultPullMaxRatio.
	MaxRatio int64
	// MinFree is the free space the store's file system must keep while
	// an image is written. Default DefaultPullMinFree.
	MinFree int64
}

// withDefaults fills the zero fields.
func (l PullLimits) withDefaults() PullLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultPullMaxBytes
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = DefaultPullMaxRatio
	}
	if l.MinFree <= 0 {
		l.MinFree = DefaultPullMinFree
	}
	return l
}

// ratioFloor is the extracted size below which a layer's ratio is not
// bounded: a small layer of headers alone (empty files, whiteouts)
// compresses far better than 100 to 1 and takes nothing worth bounding.
const ratioFloor = 16 << 20

// freeCheckEvery is how much may be extracted between two looks at the
// file system's free space: often enough that the reserve is kept within
// this much, rarely enough that statfs costs nothing.
const freeCheckEvery = 32 << 20

// pullBudget counts what storing an image extracts and fails the step that
// passes a bound. A layer's extracted size is the larger of its tar
// stream (stream) and the file contents written (written), which differ
// for sparse files and for headers of empty files.
type pullBudget struct {
	limits PullLimits
	// fsDir is a directory on the store's file system, for statfs.
	fsDir string
	// done is what the layers before the current one extracted.
	done int64
	// blob is the current layer's blob size; stream and written what it
	// extracted so far.
	blob, stream, written int64
	lastFree              int64 // the extracted total at the last statfs
}

func newPullBudget(limits PullLimits, fsDir string) (*pullBudget, error) {
	b := &pullBudget{limits: limits.withDefaults(), fsDir: fsDir}
	return b, b.checkFree()
}

// startLayer begins counting a layer whose blob has size bytes.
func (b *pullBudget) startLayer(size int64) {
	b.done += max(b.stream, b.written)
	b.blob, b.stream, b.written = size, 0, 0
}

func (b *pullBudget) total() int64 { return b.done + max(b.stream, b.written) }

// addStream counts n bytes of the current layer's tar stream.
func (b *pullBudget) addStream(n int) error {
	b.stream += int64(n)
	return b.check()
}

// addWritten counts n bytes of file contents written.
func (b *pullBudget) addWritten(n int) error {
	b.written += int64(n)
	return b.check()
}

func (b *pullBudget) check() error {
	layer := max(b.stream, b.written)
	if t := b.total(); t > b.limits.MaxBytes {
		return fmt.Errorf("%w: the image extracts to more than the maximum image size of %s (MaxBytes, --max-size)", ErrPullBound, sizeText(b.limits.MaxBytes))
	}
	if layer > ratioFloor && b.blob > 0 && layer > b.blob*b.limits.MaxRatio {
		return fmt.Errorf("%w: the layer extracts to more than %d times its %s blob (MaxRatio, --max-ratio)", ErrPullBound, b.limits.MaxRatio, sizeText(b.blob))
	}
	if b.total()-b.lastFree >= freeCheckEvery {
		return b.checkFree()
	}
	return nil
}

// checkFree fails when the store's file system has less free space than
// the reserve.
func (b *pullBudget) checkFree() error {
	b.lastFree = b.total()
	var st unix.Statfs_t
	if err := unix.Statfs(b.fsDir, &st); err != nil {
		return fmt.Errorf("free space of %s: %w", b.fsDir, err)
	}
	if free := int64(st.Bavail) * st.Bsize; free < b.limits.MinFree {
		return fmt.Errorf("%w: %s has %s free, less than the reserve of %s (MinFree, --min-free)", ErrPullBound, b.fsDir, sizeText(free), sizeText(b.limits.MinFree))
	}
	return nil
}

// sizeText writes a byte count for an operator.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// budgetReader counts what is read through it with add, and fails the read
// that passes a bound.
type budgetReader struct {
	r   io.Reader
	add func(int) error
}

func (c budgetReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		if berr := c.add(n); berr != nil {
			return n, berr
		}
	}
	return n, err
}
