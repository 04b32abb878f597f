package images

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Import extracts a root filesystem tarball (plain, gzip or bzip2; e.g.
// `docker export` output) into the store as image name, and registers a
// runtime of the same name that runs command in it. command must contain
// FilePlaceholder where the code file's path goes, and its program must
// exist in the tarball; file is the code file's name (e.g. "main.py").
// The tarball is untrusted: entries that would land outside the rootfs
// fail the import. Importing a name again replaces the runtime; the
// previous image is kept until Prune.
func (s *Store) Import(name, tarPath string, command []string, file string, env map[string]string, progress io.Writer) (err error) {
	if progress == nil {
		progress = io.Discard
	}
	if err := s.checkNewRuntimeName(name); err != nil {
		return err
	}
	r := Runtime{Name: name, Image: name, Command: slices.Clone(command), File: file, Env: maps.Clone(env)}
	if err := r.validate(); err != nil {
		return err
	}
	if tarPath == "" {
		return errors.New("tarball: path must not be empty")
	}
	absTar, err := filepath.Abs(tarPath)
	if err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	f, err := os.Open(absTar)
	if err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	defer f.Close()

	unlock, err := s.lockToWrite(context.Background(), progress)
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	fmt.Fprintf(progress, "importing %s as runtime %s (uid base %d) ...\n", absTar, name, s.uidBase())
	tmp, err := os.MkdirTemp(s.imagesDir, ".tmp-"+name+"-")
	if err != nil {
		return fmt.Errorf("create import directory: %w", err)
	}
	defer func() {
		if err != nil {
			removeTree(tmp)
		}
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return err
	}
	// The image is named by the sha256 of the tarball as given, hashed
	// while it is read.
	h := sha256.New()
	raw := bufio.NewReaderSize(io.TeeReader(f, h), 1<<20)
	tr, err := decompress(raw)
	if err != nil {
		return fmt.Errorf("tarball %s: %w", absTar, err)
	}
	stats, err := s.extractRootfs(tr, rootfs)
	if err != nil {
		return fmt.Errorf("tarball %s: %w", absTar, err)
	}
	if _, err := io.Copy(io.Discard, raw); err != nil {
		return fmt.Errorf("tarball %s: %w", absTar, err)
	}
	hash := hex.EncodeToString(h.Sum(nil))
	if err := checkProgram(rootfs, command[0]); err != nil {
		return err
	}
	if err := s.ensureMountPoints(rootfs); err != nil {
		return err
	}
	meta := imageMeta{
		Name:         name,
		RecipeHash:   hash,
		Created:      time.Now().UTC(),
		SizeBytes:    stats.Bytes,
		UIDBase:      s.uidBase(),
		Source:       SourceImport,
		BuildSeconds: time.Since(start).Seconds(),
		Tarball:      absTar,
	}
	final := filepath.Join(s.imagesDir, name+"-"+shortHash(hash))
	if err := s.finishImage(tmp, final, meta); err != nil {
		return err
	}
	// The runtime file comes last, so it never names a missing image.
	if err := writeJSONAtomic(filepath.Join(s.runtimesDir, name+".json"), r); err != nil {
		return fmt.Errorf("write runtime %s: %w", name, err)
	}
	s.mu.Lock()
	s.refreshQuietlyLocked()
	s.mu.Unlock()
	fmt.Fprintf(progress, "imported runtime %s in %.1fs: image %s, %.0f MB in %d files at %s (skipped %d device nodes/fifos)\n",
		name, meta.BuildSeconds, shortHash(hash), float64(stats.Bytes)/1e6, stats.Files, final, stats.Skipped)
	return nil
}

// decompress picks a decompressor by magic number.
func decompress(r *bufio.Reader) (io.Reader, error) {
	magic, _ := r.Peek(6)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case bytes.HasPrefix(magic, []byte("BZh")):
		return bzip2.NewReader(r), nil
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return nil, errors.New("xz-compressed tarballs are not supported: decompress it first (xz -d)")
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return nil, errors.New("zstd-compressed tarballs are not supported: decompress it first (zstd -d)")
	}
	return r, nil
}

// checkProgram makes sure the runtime's program exists in the rootfs,
// resolving it as the sandbox would (symlinks relative to the rootfs).
func checkProgram(rootfs, program string) error {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(root, program, &how)
	if err != nil {
		return fmt.Errorf("command: program %q is not in the tarball: %w", program, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("command: stat %q: %w", program, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return fmt.Errorf("command: %q in the tarball is not an executable file", program)
	}
	return nil
}

// ensureMountPoints creates the directories the sandbox needs if the
// tarball lacks them: /code and /tmp (world-writable, sticky) for code and
// scratch files, and /proc, /dev, /sys to mount on. Existing directories
// are left as they are; anything else there (a symlink, a file) is replaced
// by a directory: the sandbox mounts its own file systems on these paths,
// and a symlink would send the mount (and the program's working directory)
// elsewhere.
func (s *Store) ensureMountPoints(rootfs string) error {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	for _, d := range []struct {
		name string
		mode uint32
	}{{"code", 0o1777}, {"tmp", 0o1777}, {"proc", 0o555}, {"dev", 0o755}, {"sys", 0o555}} {
		var st unix.Stat_t
		if err := unix.Fstatat(root, d.name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Unlinkat(root, d.name, 0); err != nil {
				return fmt.Errorf("replace /%s, which is not a directory: %w", d.name, err)
			}
		}
		err := unix.Mkdirat(root, d.name, 0o700)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return fmt.Errorf("create /%s: %w", d.name, err)
		}
		fd, err := unix.Openat(root, d.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /%s: %w", d.name, err)
		}
		if s.shift.Chown {
			err = unix.Fchown(fd, s.shift.MapID(0), s.shift.MapID(0))
		}
		if err == nil {
			// diskMode: world-writable only to the sandbox, as
			// every directory the extractor writes.
			err = unix.Fchmod(fd, s.shift.DiskMode(d.mode))
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("set up /%s: %w", d.name, err)
		}
	}
	return nil
}
