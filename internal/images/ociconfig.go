package images

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// ociConfig is what the store keeps of an OCI image's config. Of it, only
// Env reaches the sandbox, as the runtime's environment (under the
// operator's --env and each request's env): setting variables weakens
// nothing; and the runtime spec in its RuntimeLabel fills what the
// operator did not say of the runtime (it is checked as the operator's
// flags are). The rest is recorded and reported, not applied:
//   - User: code runs as the sandbox's root, as in every runtime (an
//     unprivileged uid on the host, with Docker's capabilities minus
//     NET_RAW, confined by the user namespace); files the image gives its
//     user stay readable and writable to it. Switching users would need the
//     sandbox's init to change uid, which it does not do.
//   - WorkingDir: code runs in /tmp, as the contract says for every
//     runtime, so that relative paths land where return_files can name them.
//   - Entrypoint and Cmd: the runtime's command replaces them.
//   - Exposed ports, volumes, healthchecks and labels mean nothing to a
//     sandbox that runs one program and is destroyed.
type ociConfig struct {
	Env        map[string]string `json:"env,omitempty"`
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	// Runtime is the runtime spec the image carries (RuntimeLabel), if
	// any: a pull by digest of a stored image needs it without the
	// network.
	Runtime *imageSpec `json:"runtime,omitempty"`
	// Catalog is the catalog mark the image carries (CatalogLabel), if
	// any: an image stored as a catalog image was checked against it;
	// one stored by digest passes it on when pushed again.
	Catalog *catalogMark `json:"catalog,omitempty"`
}

// configMeta extracts what the store keeps of cfg. Variables that could not
// be set (no "=", an empty name, a NUL) are dropped.
func configMeta(cfg *v1.ConfigFile) ociConfig {
	c := ociConfig{
		User:       cfg.Config.User,
		WorkingDir: cfg.Config.WorkingDir,
		Entrypoint: cfg.Config.Entrypoint,
		Cmd:        cfg.Config.Cmd,
	}
	for _, kv := range cfg.Config.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			continue
		}
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		c.Env[k] = v
	}
	return c
}

// notTaken says, one line each, what of the config is not applied.
func (c ociConfig) notTaken() []string {
	var out []string
	if c.User != "" && c.User != "0" && c.User != "root" && c.User != "0:0" && c.User != "root:root" {
		out = append(out, fmt.Sprintf("User %q is not applied: code runs as the sandbox's root (an unprivileged uid on the host)", c.User))
	}
	if c.WorkingDir != "" && c.WorkingDir != "/tmp" {
		out = append(out, fmt.Sprintf("WorkingDir %q is not applied: code runs in /tmp", c.WorkingDir))
	}
	if len(c.Entrypoint) > 0 || len(c.Cmd) > 0 {
		out = append(out, "Entrypoint and Cmd are not used: the runtime's --command runs the code")
	}
	return out
}

// identityFiles are the files every image gets in /etc, as built images get
// them from commonHooks: a fixed identity rather than whatever the image's
// builder left (docker leaves these empty and mounts its own), and no
// resolver (networked sandboxes get theirs from the egress setup).
var identityFiles = []struct{ name, body string }{
	{"hosts", "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n"},
	{"hostname", "sandbox\n"},
	{"resolv.conf", ""},
}

// ensureIdentity writes identityFiles into rootfs/etc, replacing a file or
// symlink there, never following one.
func (s *Store) ensureIdentity(rootfs string) error {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if err := unix.Mkdirat(root, "etc", 0o755); err == nil {
		if err := s.ownAt(root, "etc", 0o755); err != nil {
			return err
		}
	} else if err != unix.EEXIST {
		return fmt.Errorf("create /etc: %w", err)
	}
	etc, err := unix.Openat(root, "etc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /etc (a symlink?): %w", err)
	}
	defer unix.Close(etc)
	for _, f := range identityFiles {
		// One that is right already is kept as it is, its mtime too: an
		// image pushed from the store and pulled back is the same tree,
		// and pushes again to the same digest.
		if s.identityIsRight(etc, f.name, f.body) {
			continue
		}
		if err := unix.Unlinkat(etc, f.name, 0); err != nil && err != unix.ENOENT {
			return fmt.Errorf("replace /etc/%s: %w", f.name, err)
		}
		fd, err := unix.Openat(etc, f.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("write /etc/%s: %w", f.name, err)
		}
		_, err = unix.Write(fd, []byte(f.body))
		if err == nil && s.shift.Chown {
			err = unix.Fchown(fd, s.shift.MapID(0), s.shift.MapID(0))
		}
		if err == nil {
			err = unix.Fchmod(fd, 0o644)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("write /etc/%s: %w", f.name, err)
		}
	}
	return nil
}

// identityIsRight reports whether etc/name is a regular file holding body,
// with the mode and owner ensureIdentity gives it.
func (s *Store) identityIsRight(etc int, name, body string) bool {
	fd, err := unix.Openat(etc, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o7777 != 0o644 || st.Size != int64(len(body)) {
		return false
	}
	if s.shift.Chown && (int(st.Uid) != s.shift.MapID(0) || int(st.Gid) != s.shift.MapID(0)) {
		return false
	}
	buf := make([]byte, len(body)+1)
	n, _ := unix.Read(fd, buf)
	return n == len(body) && string(buf[:n]) == body
}

// ownAt gives name (in dirfd) to the image's root with mode.
func (s *Store) ownAt(dirfd int, name string, mode uint32) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if s.shift.Chown {
		if err := unix.Fchown(fd, s.shift.MapID(0), s.shift.MapID(0)); err != nil {
			return err
		}
	}
	return unix.Fchmod(fd, mode)
}

// treeSize is the size of the regular files under dir, each inode counted
// once (layers replace files, so what was extracted overstates it).
func treeSize(dir string) (int64, error) {
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return total, nil
}
