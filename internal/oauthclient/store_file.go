package oauthclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// FileStore keeps each grant in DIR/<sha256 of the resource>.json, the
// directory 0700 and the file 0600, written to a temporary file and renamed
// so that a crash leaves the old grant or the new one, never half of one.
// A file that group or others may read is refused rather than used: a
// refresh token someone else could have copied is not one to trust. On
// Windows the modes mean nothing; the user profile's ACL (%AppData%) is what
// keeps the file the user's.
type FileStore struct {
	// Dir is the directory of the files (DefaultDir when empty).
	Dir string
}

// DefaultDir is where FileStore keeps grants: os.UserConfigDir()/scratchrun/oauth
// ($XDG_CONFIG_HOME/scratchrun/oauth or ~/.config/scratchrun/oauth on
// Linux, ~/Library/Application Support/scratchrun/oauth on macOS,
// %AppData%\scratchrun\oauth on Windows).
func DefaultDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("oauthclient: no directory for the stored sign-in: %w", err)
	}
	return filepath.Join(base, "scratchrun", "oauth"), nil
}

func (s FileStore) dir() (string, error) {
	if s.Dir != "" {
		return s.Dir, nil
	}
	return DefaultDir()
}

func (s FileStore) path(resource string) (string, error) {
	dir, err := s.dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, entryName(resource)+".json"), nil
}

// Load implements Store.
func (s FileStore) Load(issuer, resource string) (*Grant, error) {
	path, err := s.path(resource)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoGrant
	}
	if err != nil {
		return nil, fmt.Errorf("oauthclient: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("oauthclient: %w", err)
	}
	if err := checkPrivate(path, info); err != nil {
		return nil, err
	}
	var g Grant
	if err := json.NewDecoder(f).Decode(&g); err != nil {
		return nil, fmt.Errorf("oauthclient: %s: %w", path, err)
	}
	return match(&g, issuer, resource)
}

// checkPrivate refuses a file that anyone but its owner may read or write.
func checkPrivate(path string, info fs.FileInfo) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("oauthclient: %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("oauthclient: %s has mode %04o: group or others may read the refresh token in it; "+
			"remove it (scratchrun logout) and sign in again", path, perm)
	}
	return nil
}

// Save implements Store.
func (s FileStore) Save(g *Grant) error {
	path, err := s.path(g.Resource)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("oauthclient: %w", err)
	}
	// MkdirAll leaves an existing directory's mode alone; one that others
	// can list would show whose servers the user signs in to.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("oauthclient: %w", err)
	}
	data, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	// CreateTemp makes the file 0600 from the start: the token is never
	// in a file others could open, not even for a moment.
	tmp, err := os.CreateTemp(dir, ".grant-*.tmp")
	if err != nil {
		return fmt.Errorf("oauthclient: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("oauthclient: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("oauthclient: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("oauthclient: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("oauthclient: %w", err)
	}
	return nil
}

// Forget implements Store.
func (s FileStore) Forget(resource string) error {
	path, err := s.path(resource)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("oauthclient: %w", err)
	}
	return nil
}
