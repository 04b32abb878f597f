package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// maxSessions bounds the sessions kept: only the operator signs in, so a
// few browsers at most; beyond it the least recently used goes.
const maxSessions = 64

// session is one signed-in browser.
type session struct {
	// csrf is the token every state-changing request of this session
	// carries (synchronizer pattern): a page of another site can make the
	// browser send the cookie (not with SameSite=Strict, but older
	// browsers), never read this.
	csrf    string
	created time.Time
	seen    time.Time
}

// sessions are kept in memory, by the SHA-256 of their id, so that the
// lookup's timing says nothing about ids, and a memory dump holds none.
// Each server has its own: behind a load balancer the console needs sticky
// sessions, or one server.
type sessions struct {
	idle, max time.Duration
	now       func() time.Time

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

func newSessions(idle, max time.Duration, now func() time.Time) *sessions {
	return &sessions{idle: idle, max: max, now: now, byID: map[[sha256.Size]byte]*session{}}
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its id (the cookie's value).
func (s *sessions) create() (string, session) {
	id := randomToken()
	now := s.now()
	sess := &session{csrf: randomToken(), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	for len(s.byID) >= maxSessions {
		var oldest [sha256.Size]byte
		var seen time.Time
		for k, v := range s.byID {
			if seen.IsZero() || v.seen.Before(seen) {
				oldest, seen = k, v.seen
			}
		}
		delete(s.byID, oldest)
	}
	s.byID[sha256.Sum256([]byte(id))] = sess
	return id, *sess
}

// lookup returns the live session of id and marks it used; an expired one
// is ended.
func (s *sessions) lookup(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	key := sha256.Sum256([]byte(id))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[key]
	if !ok {
		return session{}, false
	}
	if s.expired(sess, now) {
		delete(s.byID, key)
		return session{}, false
	}
	sess.seen = now
	return *sess, true
}

// end ends the session of id (signing out).
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(id)))
}

func (s *sessions) expired(sess *session, now time.Time) bool {
	return now.Sub(sess.seen) >= s.idle || now.Sub(sess.created) >= s.max
}

func (s *sessions) sweepLocked(now time.Time) {
	for k, v := range s.byID {
		if s.expired(v, now) {
			delete(s.byID, k)
		}
	}
}
