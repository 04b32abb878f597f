package namespaces

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// A namespaces session forks by its files: between jobs, a new session
// sandbox is created with the caller's configuration and the parent's
// writable state is copied into it (treecopy.go): the root's overlay upper
// layer (which init keeps open on initproto.UpperFD, since no path reaches
// it after pivot_root), /tmp, /code, /dev/shm, and an unprivileged
// engine's private /root. Processes and kernels are not copied: the
// child's start afresh. Files are as they were while the copy ran (a
// background process of the parent may write meanwhile). The copy is
// written by a process in the child's cgroup (forkcopier.go), and counts
// in the child's memory as its own files would.

var _ sandbox.Forker = (*nsSession)(nil)

// ForkKind implements sandbox.Forker.
func (s *nsSession) ForkKind() string { return execapi.ForkFiles }

// Fork implements sandbox.Forker. The copy is bounded by the child's own
// limits (cfg's writable and tmp sizes and inode count): a parent that
// holds more fails the fork, and the child is destroyed.
func (s *nsSession) Fork(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	cfg.Session = true
	var child sandbox.Sandbox
	err := s.conn.Quiet(func() error {
		sb, err := s.backend.Create(ctx, cfg)
		if err != nil {
			return err
		}
		c, ok := sb.(*nsSession)
		if !ok {
			sb.Destroy()
			return errors.New("fork: the new sandbox is not a session")
		}
		if err := copySession(ctx, s, c, cfg); err != nil {
			if td := c.Destroy(); !td.Purged {
				err = fmt.Errorf("%w (and its teardown: %v)", err, td.Err)
			}
			return fmt.Errorf("fork: %w", err)
		}
		if c.group != nil {
			// The copier's refused threads, if any, are not the
			// first job's.
			c.forks = c.group.PidsLimitHits()
		}
		child = c
		return nil
	})
	return child, err
}

// writable is one of a session's writable trees: its path in the sandbox
// (empty for the root's overlay layer) and the limit of what it may hold.
type writable struct {
	path  string
	bytes int64
}

func writables(cfg sandbox.Config, rootless bool) []writable {
	w := []writable{{"", cfg.WritableBytes}, {"tmp", cfg.TmpBytes}, {"code", cfg.TmpBytes}, {"dev/shm", cfg.TmpBytes}}
	if rootless {
		// The private copy of /root (CopyHome) lives in the staging
		// file system, as the upper layer does.
		w = append(w, writable{"root", cfg.WritableBytes})
	}
	return w
}

// copySession copies parent's writable trees into child's.
func copySession(ctx context.Context, parent, child *nsSession, cfg sandbox.Config) error {
	rootless := parent.backend.rootless
	var roots []*treeCopy
	defer func() {
		for _, r := range roots {
			r.close()
		}
	}()
	pproc, err := openInit(parent)
	if err != nil {
		return err
	}
	defer unix.Close(pproc)
	cproc, err := openInit(child)
	if err != nil {
		return err
	}
	defer unix.Close(cproc)
	psrc, err := unix.Openat(pproc, "root", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer unix.Close(psrc)
	cdst, err := unix.Openat(cproc, "root", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the new sandbox's root: %w", err)
	}
	defer unix.Close(cdst)
	for _, w := range writables(cfg, rootless) {
		src, dst := -1, -1
		if w.path == "" {
			src, err = unix.Openat(pproc, fmt.Sprintf("fd/%d", initproto.UpperFD), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err == nil {
				dst, err = unix.Dup(cdst)
			}
		} else {
			src, err = openBeneath(psrc, w.path)
			if err == nil {
				dst, err = openBeneath(cdst, w.path)
			}
		}
		if err != nil {
			if src >= 0 {
				unix.Close(src)
			}
			return fmt.Errorf("open /%s: %w", w.path, err)
		}
		roots = append(roots, &treeCopy{src: src, dst: dst, overlay: w.path == "", name: "/" + w.path,
			bytesLeft: w.bytes, inodesLeft: cfg.MaxInodes})
	}
	// Written by a process in the child's cgroup, so that the child's
	// memory counts the copy (forkcopier.go).
	return copyInGroup(ctx, child.group, rootless, roots)
}

// openInit opens the /proc directory of s's init, checking after the open
// that the pid it named was still that init's (a pid is not reused while
// the process lives).
func openInit(s *nsSession) (int, error) {
	if s.init == nil {
		return -1, errors.New("the sandbox has no init")
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d", s.init.Pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the sandbox's init: %w", err)
	}
	if s.init.Exited() {
		unix.Close(fd)
		return -1, sandbox.ErrSessionEnded
	}
	return fd, nil
}

// openBeneath opens the directory path below root, following no link.
func openBeneath(root int, path string) (int, error) {
	return unix.Openat2(root, path, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
}
