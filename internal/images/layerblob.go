package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"
)

// zstdMaxWindow bounds the memory a zstd layer's decoder may ask for: 128
// MiB, zstd's --long=27, the largest window image builders use.
const zstdMaxWindow = 128 << 20

// layerBlob is one layer's blob being read: the blob's own bytes, counted
// and hashed as they arrive, and the uncompressed tar stream made of them.
type layerBlob struct {
	digest v1.Hash
	size   int64
	rc     io.ReadCloser
	blob   *countingHash // over what was read of the blob
	raw    *bufio.Reader // the blob, buffered for the decompressor
	// tar is the uncompressed stream; closeTar releases its decoder.
	tar      io.Reader
	closeTar func()
}

// openLayerBlob opens l's blob itself (not the registry client's
// uncompressed view, which only a registry's blobs are verified in) and
// decompresses it by its magic number: gzip, zstd or none.
func openLayerBlob(ctx context.Context, l v1.Layer) (*layerBlob, error) {
	digest, err := l.Digest()
	if err != nil {
		return nil, err
	}
	size, err := l.Size()
	if err != nil {
		return nil, err
	}
	if digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("digest %s is not sha256", digest)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	b := &layerBlob{digest: digest, size: size, rc: rc, blob: &countingHash{h: sha256.New()}, closeTar: func() {}}
	// One byte past the size: a longer blob is then seen, and refused,
	// without reading an endless one to its end.
	b.raw = bufio.NewReaderSize(io.TeeReader(io.LimitReader(ctxReader{ctx, rc}, size+1), b.blob), 1<<20)
	magic, _ := b.raw.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(b.raw)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("gzip: %w", err)
		}
		b.tar = zr
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(b.raw, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("zstd: %w", err)
		}
		b.tar, b.closeTar = zr, zr.Close
	default:
		b.tar = b.raw
	}
	return b, nil
}

// finish reads what is left of the blob after its compressed stream and
// checks that the whole of it is what the manifest says: its size and its
// digest. The caller has read the tar stream to its end, which checks the
// compressed stream's own checksum (gzip's CRC, zstd's), or failed with
// err: a blob longer than its size is said to be, which the decompressor
// only sees cut short, is named as such.
func (b *layerBlob) finish(err error) error {
	if err == nil {
		_, err = io.Copy(io.Discard, b.raw)
	}
	if b.blob.n > b.size {
		return fmt.Errorf("corrupt: the blob is longer than the %d bytes the manifest says", b.size)
	}
	if err != nil {
		return err
	}
	if b.blob.n != b.size {
		return fmt.Errorf("corrupt: the blob has %d bytes, the manifest says %d", b.blob.n, b.size)
	}
	if got := hex.EncodeToString(b.blob.h.Sum(nil)); got != b.digest.Hex {
		return fmt.Errorf("corrupt: the blob has digest sha256:%s, the manifest says %s", got, b.digest)
	}
	return nil
}

// close releases the decoder and the blob.
func (b *layerBlob) close() error {
	b.closeTar()
	return b.rc.Close()
}
