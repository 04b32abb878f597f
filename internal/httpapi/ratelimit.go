package httpapi

import (
	"math"
	"sync"
	"time"
)

// rateLimiter keeps one token bucket per key: a key with rate N/min may start
// N runs at once and then one every 60/N seconds. Buckets live as long as the
// server (there is one per key that has made a request).
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
	rate   int // per minute, as last seen (a key's rate is fixed at creation)
}

func newRateLimiter() *rateLimiter {
	return &rateLimiter{buckets: map[string]*bucket{}, now: time.Now}
}

// take spends one token of key's bucket, or says how long until one is there.
func (l *rateLimiter) take(key string, perMinute int) (ok bool, wait time.Duration) {
	if perMinute <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: float64(perMinute), last: now, rate: perMinute}
		l.buckets[key] = b
	}
	b.rate = perMinute
	perSecond := float64(perMinute) / 60
	b.tokens = math.Min(float64(perMinute), b.tokens+now.Sub(b.last).Seconds()*perSecond)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / perSecond * float64(time.Second))
}

// refund gives back a token spent by a request that was then not run (it was
// rejected for capacity or found invalid), so only runs count.
func (l *rateLimiter) refund(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[key]; b != nil {
		b.tokens = math.Min(float64(b.rate), b.tokens+1)
	}
}
