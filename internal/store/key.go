package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"
)

// KeyPrefix starts every key, as the hosted service's keys do.
const KeyPrefix = "sr_live_"

// Defaults of a new key's limits, where its creator gives none (`scratchrun
// keys create`, the console).
const (
	DefaultRatePerMin  = 120
	DefaultConcurrency = 4
)

// keyRandomBytes is the entropy of a key's secret part.
const keyRandomBytes = 32

// displayPrefixLen is how much of a key is kept for display (KeyPrefix plus a
// few characters): enough for a person to tell keys apart, far too little to
// guess the rest.
const displayPrefixLen = len(KeyPrefix) + 4

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Key is an API key as stored: everything but its secret.
type Key struct {
	ID string
	// Name is the operator's label; unique among keys that are not revoked.
	Name string
	// Prefix is the start of the secret, for display ("sr_live_Ab3x").
	Prefix string
	// RatePerMin is how many runs the key may start per minute.
	RatePerMin int
	// Concurrency is how many of the key's requests may be in flight at once.
	Concurrency int
	Created     time.Time
	// Revoked is the zero time while the key is active.
	Revoked time.Time
}

// Active reports whether the key has not been revoked.
func (k Key) Active() bool { return k.Revoked.IsZero() }

// NewKey is what CreateKey needs.
type NewKey struct {
	Name        string
	RatePerMin  int
	Concurrency int
}

func (nk NewKey) check() error {
	if !namePattern.MatchString(nk.Name) {
		return &KeyFieldError{Field: FieldName, Value: fmt.Sprintf("%q", nk.Name), Problem: "use 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit"}
	}
	return LimitChange{RatePerMin: nk.RatePerMin, Concurrency: nk.Concurrency}.check(true)
}

// Fields of a key that a KeyFieldError names.
const (
	FieldName        = "name"
	FieldRate        = "rate"
	FieldConcurrency = "concurrency"
)

// KeyFieldError is a key's field refused by CreateKey or SetLimits, so that
// a front end can point at the field without reading the message.
type KeyFieldError struct {
	// Field is FieldName, FieldRate or FieldConcurrency.
	Field string
	// Value is the value refused, as the message shows it ("" for none).
	Value   string
	Problem string
}

// Error reads "name \"x y\": use ...", "rate 0/min: must be positive".
func (e *KeyFieldError) Error() string {
	if e.Value == "" {
		return e.Problem
	}
	return e.Field + " " + e.Value + ": " + e.Problem
}

// LimitChange is what SetLimits changes; a zero field is left as it is.
type LimitChange struct {
	RatePerMin  int
	Concurrency int
}

// check refuses limits that are not positive; all requires both (a new
// key), else at least one.
func (c LimitChange) check(all bool) error {
	if c.RatePerMin < 0 || all && c.RatePerMin == 0 {
		return &KeyFieldError{Field: FieldRate, Value: fmt.Sprintf("%d/min", c.RatePerMin), Problem: "must be positive"}
	}
	if c.Concurrency < 0 || all && c.Concurrency == 0 {
		return &KeyFieldError{Field: FieldConcurrency, Value: fmt.Sprint(c.Concurrency), Problem: "must be positive"}
	}
	if c.RatePerMin == 0 && c.Concurrency == 0 {
		return &KeyFieldError{Field: FieldRate, Problem: "no limit to change: give a rate, a concurrency or both"}
	}
	return nil
}

// newKeyID returns a key's public id.
func newKeyID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("create key id: %w", err)
	}
	return "key_" + hex.EncodeToString(b), nil
}

// newSecret returns KeyPrefix and 32 random bytes in base62 (43 characters).
func newSecret() (string, error) {
	b := make([]byte, keyRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("create key: %w", err)
	}
	s := new(big.Int).SetBytes(b).Text(62)
	// Fixed width, so every key has the same shape.
	const width = 43 // ceil(256 / log2(62))
	return KeyPrefix + strings.Repeat("0", width-len(s)) + s, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// plausibleSecret reports whether s could be a key at all, so that garbage
// is refused without a query.
func plausibleSecret(s string) bool {
	return strings.HasPrefix(s, KeyPrefix) && len(s) <= 128
}
