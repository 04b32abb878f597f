package oauthclient

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zalando/go-keyring"
)

// keychainService is the service name grants are kept under in the OS
// keychain (macOS Keychain, Windows Credential Manager, the Secret Service
// on Linux); each grant's account is its entry name.
const keychainService = "scratchrun-oauth"

// KeychainStore keeps grants in the OS keychain through go-keyring: the
// macOS Keychain (by /usr/bin/security, no cgo), the Windows Credential
// Manager, or the Secret Service over D-Bus on Linux and the BSDs (which a
// headless machine usually lacks: AutoStore then falls back to files).
type KeychainStore struct{}

// Load implements Store.
func (KeychainStore) Load(issuer, resource string) (*Grant, error) {
	text, err := keyring.Get(keychainService, entryName(resource))
	if errors.Is(err, keyring.ErrNotFound) {
		return nil, ErrNoGrant
	}
	if err != nil {
		return nil, fmt.Errorf("oauthclient: the OS keychain: %w", err)
	}
	var g Grant
	if err := json.Unmarshal([]byte(text), &g); err != nil {
		return nil, fmt.Errorf("oauthclient: the OS keychain's entry for %s: %w", resource, err)
	}
	return match(&g, issuer, resource)
}

// Save implements Store.
func (KeychainStore) Save(g *Grant) error {
	data, err := json.Marshal(g)
	if err != nil {
		return err
	}
	if err := keyring.Set(keychainService, entryName(g.Resource), string(data)); err != nil {
		return fmt.Errorf("oauthclient: the OS keychain: %w", err)
	}
	return nil
}

// Forget implements Store.
func (KeychainStore) Forget(resource string) error {
	err := keyring.Delete(keychainService, entryName(resource))
	if err != nil && !errors.Is(err, keyring.ErrNotFound) {
		return fmt.Errorf("oauthclient: the OS keychain: %w", err)
	}
	return nil
}
