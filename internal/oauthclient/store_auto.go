package oauthclient

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

// The values of SCRATCHRUN_OAUTH_STORE.
const (
	StoreAuto     = "auto"
	StoreKeychain = "keychain"
	StoreFile     = "file"
)

// NewStore is the store a mode names: the keychain, files in dir (DefaultDir
// when empty), or auto: the keychain while it works, files when it errors.
func NewStore(mode, dir string) (Store, error) {
	switch mode {
	case StoreKeychain:
		return KeychainStore{}, nil
	case StoreFile:
		return FileStore{Dir: dir}, nil
	case StoreAuto, "":
		if !keychainReachable(runtime.GOOS, os.Getenv, fileExists, os.Getuid()) {
			return FileStore{Dir: dir}, nil
		}
		return AutoStore{Keychain: KeychainStore{}, File: FileStore{Dir: dir}}, nil
	}
	return nil, fmt.Errorf("oauthclient: unknown store %q: want %s, %s or %s", mode, StoreAuto, StoreKeychain, StoreFile)
}

// AutoStore prefers the keychain and falls back to the file store when the
// keychain fails (no Secret Service on a headless Linux box, a locked
// keychain, an entry too big for Windows' 2560 bytes). A grant lives in one
// of the two at a time: saving to one removes it from the other, so that an
// old refresh token is never picked up after a newer one was saved.
type AutoStore struct {
	Keychain, File Store
}

// Load implements Store: the keychain's grant, else the file's.
func (s AutoStore) Load(issuer, resource string) (*Grant, error) {
	g, kerr := s.Keychain.Load(issuer, resource)
	if kerr == nil {
		return g, nil
	}
	g, ferr := s.File.Load(issuer, resource)
	if ferr == nil {
		return g, nil
	}
	if errors.Is(ferr, ErrNoGrant) {
		// The keychain's failure is no reason not to sign in again; the
		// file's refusal (a readable file) is worth reporting.
		return nil, ErrNoGrant
	}
	return nil, ferr
}

// Save implements Store.
func (s AutoStore) Save(g *Grant) error {
	kerr := s.Keychain.Save(g)
	if kerr == nil {
		return s.File.Forget(g.Resource)
	}
	if ferr := s.File.Save(g); ferr != nil {
		return fmt.Errorf("%w (and %w)", ferr, kerr)
	}
	// The keychain may hold an older grant it can no longer be asked to
	// replace; if it can be asked to drop it, it should.
	_ = s.Keychain.Forget(g.Resource)
	return nil
}

// Forget implements Store: both places, so that logout leaves nothing. A
// keychain that cannot be reached is no error here: auto mode only fell
// back to files because of it, so the grant is in the file.
func (s AutoStore) Forget(resource string) error {
	_ = s.Keychain.Forget(resource)
	return s.File.Forget(resource)
}

// keychainReachable reports whether auto mode should ask the keychain at
// all. macOS and Windows always have one. Elsewhere the Secret Service is
// on the D-Bus session bus, and with no bus to find (no
// DBUS_SESSION_BUS_ADDRESS, no $XDG_RUNTIME_DIR/bus or /run/user/UID/bus:
// an ssh session, a container, a CI runner) godbus would run dbus-launch,
// which starts a session bus daemon that outlives this process, for a
// Secret Service that is not there either. Auto mode then goes straight
// to the file.
func keychainReachable(goos string, getenv func(string) string, exists func(string) bool, uid int) bool {
	switch goos {
	case "darwin", "windows":
		return true
	}
	if a := getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" && a != "autolaunch:" {
		return true
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" && exists(filepath.Join(d, "bus")) {
		return true
	}
	return exists(filepath.Join("/run/user", strconv.Itoa(uid), "bus"))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
