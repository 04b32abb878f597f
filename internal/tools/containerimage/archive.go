package main

import (
	"archive/tar"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// refNameAnnotation names an image in an OCI layout's index: podman load
// tags the image it loads from an archive with it.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// writeArchive writes img as an OCI image layout holding it alone, named
// ref, tarred into out (written beside it and renamed into place, so that
// a failed build leaves no partial archive under the name).
func writeArchive(img v1.Image, ref string, mtime time.Time, out string) (err error) {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".containerimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: ref})); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "archive.tar")
	if err := tarDir(filepath.Join(dir, "layout"), tmp, mtime); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// tarDir tars the tree at root into file, its entries in lexical order
// with one time and root as owner, so that the same layout gives the same
// archive.
func tarDir(root, file string, mtime time.Time) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
