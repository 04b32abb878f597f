package execapi

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// SessionIDPrefix starts every session id, so that one is told from other
// ids (keys, requests) in logs and by people.
const SessionIDPrefix = "ses_"

// sessionIDEncoding is base32 in lower case without padding: 128 bits are
// 26 characters, safe in a URL path and a file name.
var sessionIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// sessionIDLength is the length of an id: the prefix and 26 characters.
var sessionIDLength = len(SessionIDPrefix) + sessionIDEncoding.EncodedLen(16)

// NewSessionID returns a fresh session id of 128 random bits from
// crypto/rand: unguessable, so that an id alone reveals nothing of who
// holds it (ownership is checked besides, on every use).
func NewSessionID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return SessionIDPrefix + sessionIDEncoding.EncodeToString(b[:])
}

// IsSessionID reports whether id has the shape NewSessionID gives. A front
// end answers an id of another shape as it answers an unknown one
// (ErrSessionNotFound), without asking the engine.
func IsSessionID(id string) bool {
	rest, ok := strings.CutPrefix(id, SessionIDPrefix)
	if !ok || len(id) != sessionIDLength {
		return false
	}
	_, err := sessionIDEncoding.DecodeString(rest)
	return err == nil
}
