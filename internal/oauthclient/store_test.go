package oauthclient

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"
)

func testGrant(resource, refresh string) *Grant {
	return &Grant{Issuer: "https://as.example", Resource: resource, ClientID: "client-1",
		TokenURL: "https://as.example/token", RefreshToken: refresh, Scopes: []string{"mcp"}}
}

// A saved grant is in a 0600 file in a 0700 directory, named by the
// resource and nothing else, and no temporary file is left next to it.
func TestFileStoreKeepsGrantPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes mean nothing on Windows: the profile's ACL protects the file")
	}
	dir := filepath.Join(t.TempDir(), "oauth")
	if err := os.MkdirAll(dir, 0o755); err != nil { // an existing, too-open directory
		t.Fatal(err)
	}
	s := FileStore{Dir: dir}
	g := testGrant("https://mcp.example/mcp", "r1")
	if err := s.Save(g); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, mode %v; want 0700", err, info.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != entryName(g.Resource)+".json" {
		t.Fatalf("directory holds %v (%v); want only %s.json", entries, err, entryName(g.Resource))
	}
	info, err := os.Stat(filepath.Join(dir, entries[0].Name()))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	got, err := s.Load(g.Issuer, g.Resource)
	if err != nil || got.RefreshToken != "r1" || got.ClientID != "client-1" || got.TokenURL != g.TokenURL {
		t.Fatalf("Load = %+v, %v", got, err)
	}
}

// A grant file that group or others may read is refused, not used.
func TestFileStoreRefusesReadableFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes mean nothing on Windows")
	}
	s := FileStore{Dir: t.TempDir()}
	g := testGrant("https://mcp.example/mcp", "r1")
	if err := s.Save(g); err != nil {
		t.Fatal(err)
	}
	path, _ := s.path(g.Resource)
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(g.Issuer, g.Resource)
		if err == nil || errors.Is(err, ErrNoGrant) || !strings.Contains(err.Error(), "others may read") {
			t.Errorf("mode %04o: Load = %+v, %v; want a refusal", mode, got, err)
		}
	}
}

// Save replaces the file by renaming a new one over it: a reader holding
// the old file (another scratchrun mcp mid-read) sees the old grant whole,
// never a truncated or half-written one.
func TestFileStoreReplacesByRename(t *testing.T) {
	dir := t.TempDir()
	s := FileStore{Dir: dir}
	g := testGrant("https://mcp.example/mcp", "r1")
	if err := s.Save(g); err != nil {
		t.Fatal(err)
	}
	path, _ := s.path(g.Resource)
	old := filepath.Join(t.TempDir(), "old")
	if err := os.Link(path, old); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	g.RefreshToken = "r2"
	if err := s.Save(g); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(old); !strings.Contains(string(data), `"r1"`) {
		t.Errorf("the file was rewritten in place, not replaced: the old inode now holds %s", data)
	}
	if got, err := s.Load(g.Issuer, g.Resource); err != nil || got.RefreshToken != "r2" {
		t.Errorf("Load after the second Save = %+v, %v", got, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// A grant is only found for its resource and its issuer: a server whose
// authorization server changed signs in again (and registers again).
func TestStoresKeyByIssuerAndResource(t *testing.T) {
	keyring.MockInit()
	for name, s := range map[string]Store{
		"file":     FileStore{Dir: t.TempDir()},
		"keychain": KeychainStore{},
		"auto":     AutoStore{Keychain: KeychainStore{}, File: FileStore{Dir: t.TempDir()}},
	} {
		t.Run(name, func(t *testing.T) {
			a := testGrant("https://a.example/mcp", "ra")
			b := testGrant("https://b.example/mcp", "rb")
			for _, g := range []*Grant{a, b} {
				if err := s.Save(g); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := s.Load(a.Issuer, a.Resource); err != nil || got.RefreshToken != "ra" {
				t.Errorf("Load(a) = %+v, %v", got, err)
			}
			if got, err := s.Load(b.Issuer, b.Resource); err != nil || got.RefreshToken != "rb" {
				t.Errorf("Load(b) = %+v, %v", got, err)
			}
			if got, err := s.Load("https://other-as.example", a.Resource); !errors.Is(err, ErrNoGrant) {
				t.Errorf("Load at another issuer = %+v, %v; want ErrNoGrant", got, err)
			}
			if got, err := s.Load(a.Issuer, "https://c.example/mcp"); !errors.Is(err, ErrNoGrant) {
				t.Errorf("Load of another resource = %+v, %v; want ErrNoGrant", got, err)
			}
			if err := s.Forget(a.Resource); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Load(a.Issuer, a.Resource); !errors.Is(err, ErrNoGrant) {
				t.Errorf("Load after Forget: %v; want ErrNoGrant", err)
			}
			if got, err := s.Load(b.Issuer, b.Resource); err != nil || got.RefreshToken != "rb" {
				t.Errorf("Forget(a) touched b: %+v, %v", got, err)
			}
			if err := s.Forget("https://never.example/mcp"); err != nil {
				t.Errorf("Forget of nothing: %v", err)
			}
		})
	}
}

// With no keychain (a headless Linux box has no Secret Service), auto
// keeps the grant in the file; with one, in the keychain, and the file an
// earlier fallback wrote goes, so that its older refresh token is never
// picked up again.
func TestAutoStoreFallsBackToFile(t *testing.T) {
	dir := t.TempDir()
	s := AutoStore{Keychain: KeychainStore{}, File: FileStore{Dir: dir}}
	g := testGrant("https://mcp.example/mcp", "r1")

	keyring.MockInitWithError(errors.New("org.freedesktop.DBus.Error.ServiceUnknown: no secret service"))
	if err := s.Save(g); err != nil {
		t.Fatalf("Save without a keychain: %v", err)
	}
	if got, err := (FileStore{Dir: dir}).Load(g.Issuer, g.Resource); err != nil || got.RefreshToken != "r1" {
		t.Fatalf("the file holds %+v, %v", got, err)
	}
	if got, err := s.Load(g.Issuer, g.Resource); err != nil || got.RefreshToken != "r1" {
		t.Fatalf("Load without a keychain = %+v, %v", got, err)
	}

	keyring.MockInit()
	g.RefreshToken = "r2"
	if err := s.Save(g); err != nil {
		t.Fatal(err)
	}
	if got, err := (KeychainStore{}).Load(g.Issuer, g.Resource); err != nil || got.RefreshToken != "r2" {
		t.Errorf("the keychain holds %+v, %v", got, err)
	}
	if _, err := (FileStore{Dir: dir}).Load(g.Issuer, g.Resource); !errors.Is(err, ErrNoGrant) {
		t.Errorf("the fallback file is still there: %v", err)
	}

	// Too big for the keychain (Windows takes 2560 bytes): the file.
	keyring.MockInitWithError(keyring.ErrSetDataTooBig)
	if err := s.Save(g); err != nil {
		t.Fatal(err)
	}
	if got, err := (FileStore{Dir: dir}).Load(g.Issuer, g.Resource); err != nil || got.RefreshToken != "r2" {
		t.Errorf("after ErrSetDataTooBig the file holds %+v, %v", got, err)
	}
	if err := s.Forget(g.Resource); err != nil {
		t.Errorf("Forget without a keychain: %v", err)
	}
	if _, err := (FileStore{Dir: dir}).Load(g.Issuer, g.Resource); !errors.Is(err, ErrNoGrant) {
		t.Errorf("Forget left the file: %v", err)
	}
}

// Auto mode asks the keychain only where one can be reached without
// starting a D-Bus daemon (dbus-launch) that would outlive the process.
func TestKeychainReachable(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	none := func(string) bool { return false }
	for _, c := range []struct {
		name   string
		goos   string
		getenv func(string) string
		exists func(string) bool
		want   bool
	}{
		{"macOS", "darwin", env(), none, true},
		{"Windows", "windows", env(), none, true},
		{"a desktop session", "linux", env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"), none, true},
		{"autolaunch only", "linux", env("DBUS_SESSION_BUS_ADDRESS", "autolaunch:"), none, false},
		{"XDG_RUNTIME_DIR's bus", "linux", env("XDG_RUNTIME_DIR", "/run/user/1000"), func(p string) bool { return p == "/run/user/1000/bus" }, true},
		{"the uid's bus", "freebsd", env(), func(p string) bool { return p == "/run/user/1000/bus" }, true},
		{"ssh, container, CI", "linux", env("XDG_RUNTIME_DIR", "/run/user/1000"), none, false},
	} {
		if got := keychainReachable(c.goos, c.getenv, c.exists, 1000); got != c.want {
			t.Errorf("%s: %v; want %v", c.name, got, c.want)
		}
	}
}

func TestNewStoreModes(t *testing.T) {
	auto := "oauthclient.AutoStore"
	if !keychainReachable(runtime.GOOS, os.Getenv, fileExists, os.Getuid()) {
		auto = "oauthclient.FileStore"
	}
	for mode, want := range map[string]string{"": auto, "auto": auto, "keychain": "oauthclient.KeychainStore", "file": "oauthclient.FileStore"} {
		s, err := NewStore(mode, t.TempDir())
		if err != nil {
			t.Fatalf("NewStore(%q): %v", mode, err)
		}
		if got := typeName(s); got != want {
			t.Errorf("NewStore(%q) is %s; want %s", mode, got, want)
		}
	}
	if _, err := NewStore("vault", ""); err == nil {
		t.Error("NewStore(vault) accepted an unknown mode")
	}
}
