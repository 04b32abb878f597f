package images

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lock takes the store's exclusive lock file, which serialises builds,
// imports and prunes across processes. It polls so that ctx can cancel the
// wait, and says on progress when it has to wait.
func (s *Store) lock(ctx context.Context, progress io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.imagesDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store lock: %w", err)
	}
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, fmt.Errorf("lock store: %w", err)
		}
		if !told {
			fmt.Fprintf(progress, "waiting for another build, import or prune of %s to finish ...\n", s.root)
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for store lock: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lockToWrite takes the store lock (see lock) and then removes what
// unfinished builds and imports left (removeStaleTmp): how every step that
// writes an image begins.
func (s *Store) lockToWrite(ctx context.Context, progress io.Writer) (unlock func(), err error) {
	unlock, err = s.lock(ctx, progress)
	if err != nil {
		return nil, err
	}
	if err := s.removeStaleTmp(progress); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// editFresh runs edit holding the store lock (other processes) and s.mu
// (this one), on the store as the disk has it now (temporaries of
// unfinished builds are not in that view): how runtime and alias files are
// changed and images pruned.
func (s *Store) editFresh(edit func() error) error {
	unlock, err := s.lock(context.Background(), io.Discard)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refreshLocked(); err != nil {
		return err
	}
	return edit()
}

// removeStaleTmp deletes leftovers of builds and imports that did not
// finish. Callers hold the store lock, so no .tmp-* entry is in use.
func (s *Store) removeStaleTmp(progress io.Writer) error {
	for _, dir := range []string{s.imagesDir, s.runtimesDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("scan %s: %w", dir, err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".tmp-") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			fmt.Fprintf(progress, "removing unfinished %s\n", p)
			if err := removeTree(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeTree removes a directory tree. os.RemoveAll never follows
// symlinks; when not root, read-only directories from an image are made
// writable first.
func removeTree(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// installDir moves the finished directory tmp to final. If final exists
// (a forced rebuild, a re-import of the same tarball) the two are swapped
// atomically with RENAME_EXCHANGE, so final is never missing, and the old
// tree is then removed.
func installDir(tmp, final string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if err != unix.EEXIST {
		return fmt.Errorf("rename %s to %s: %w", tmp, final, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("swap %s into %s: %w", tmp, final, err)
	}
	// tmp now holds the replaced tree; it still starts with .tmp-, so
	// if removing fails here the next build cleans it up.
	return removeTree(tmp)
}

// ctxReader fails reads once ctx is done, to stop a long extraction.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// removeImageDir first renames an image directory to a .tmp-* name, so
// that it stops looking installed at once and an interrupted removal is
// finished by the next build, import or prune.
func removeImageDir(dir string) error {
	trash := filepath.Join(filepath.Dir(dir), ".tmp-remove-"+filepath.Base(dir))
	if err := os.Rename(dir, trash); err != nil {
		return fmt.Errorf("remove image %s: %w", dir, err)
	}
	return removeTree(trash)
}
