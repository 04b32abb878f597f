package execapi

import "time"

// SessionPolicy is the operator's bounds for sessions, beside the Policy
// every call is held to. The zero value has sessions off; start from
// DefaultSessionPolicy.
type SessionPolicy struct {
	// Enabled turns sessions on (--sessions). Off, there are no session
	// routes or tools, and Info describes none.
	Enabled bool
	// IdleTTL is the idle TTL of a session that asks for none; MaxIdleTTL
	// the longest one may ask for.
	IdleTTL    time.Duration
	MaxIdleTTL time.Duration
	// MaxLifetime is the longest a session lives, and the lifetime of one
	// that asks for none.
	MaxLifetime time.Duration
	// PerKey bounds the sessions one caller (an API key) has open; Max
	// those open on one engine (0: no bound of this policy's).
	PerKey int
	Max    int
	// MaxMemoryMB is the largest memory limit a session may ask for
	// (0: a call's maximum): above a call's by default, as a session holds
	// its data across calls. A session that asks for none gets the
	// Policy's default, or this when it is lower.
	MaxMemoryMB int
}

// MinSessionTTL is the shortest idle TTL or lifetime a session may ask
// for: shorter, it would end between two calls of any client.
const MinSessionTTL = 10 * time.Second

// DefaultSessionPolicy is the documented defaults (off): idle TTL 10
// minutes (up to an hour), lifetime an hour, 4 open sessions per key and
// 64 per engine, 1024 MB.
func DefaultSessionPolicy() SessionPolicy {
	return SessionPolicy{
		IdleTTL:     10 * time.Minute,
		MaxIdleTTL:  time.Hour,
		MaxLifetime: time.Hour,
		PerKey:      4,
		Max:         64,
		MaxMemoryMB: 1024,
	}
}

// CheckedSession is a SessionRequest that passed ValidateSession, with the
// operator's defaults applied.
type CheckedSession struct {
	Runtime string
	// MemoryMB holds for the whole session; Timeout is each call's
	// default.
	MemoryMB int
	Timeout  time.Duration
	Network  string
	IdleTTL  time.Duration
	Lifetime time.Duration
	Env      map[string]string
}

// ValidateSession checks req against p (the limits every call is held to)
// and sp (the session bounds), and returns it with defaults applied. The
// error is a *ValidationError naming the first offending field.
func (sp SessionPolicy) ValidateSession(p Policy, req SessionRequest) (CheckedSession, error) {
	c := CheckedSession{Runtime: req.Runtime}
	if err := ValidateRuntimeName("runtime", req.Runtime); err != nil {
		return CheckedSession{}, err
	}
	var err error
	if c.Timeout, err = p.timeout(req.Limits.TimeoutMS); err != nil {
		return CheckedSession{}, err
	}
	// The session's memory is bounded by its own maximum, not a call's
	// (a call's when the policy has none).
	mp := p
	if sp.MaxMemoryMB > 0 {
		mp.MaxMemoryMB = sp.MaxMemoryMB
	}
	mp.DefaultMemoryMB = min(p.DefaultMemoryMB, mp.MaxMemoryMB)
	if c.MemoryMB, err = mp.memory(req.Limits.MemoryMB); err != nil {
		return CheckedSession{}, err
	}
	if c.Network, err = p.network(req.Network); err != nil {
		return CheckedSession{}, err
	}
	if c.Env, err = p.env(req.Env); err != nil {
		return CheckedSession{}, err
	}
	if c.IdleTTL, err = sessionTTL("idle_ttl_ms", req.IdleTTLMS, sp.IdleTTL, sp.MaxIdleTTL); err != nil {
		return CheckedSession{}, err
	}
	if c.Lifetime, err = sessionTTL("max_lifetime_ms", req.MaxLifetimeMS, sp.MaxLifetime, sp.MaxLifetime); err != nil {
		return CheckedSession{}, err
	}
	return c, nil
}

// sessionTTL is a session's duration for a request's ms (0: def), within
// MinSessionTTL and maxD.
func sessionTTL(field string, ms int, def, maxD time.Duration) (time.Duration, error) {
	if ms == 0 {
		return def, nil
	}
	minMS, maxMS := MinSessionTTL.Milliseconds(), maxD.Milliseconds()
	if int64(ms) < minMS || int64(ms) > maxMS {
		return 0, invalid(field, "is %d; it must be between %d and %d (omit it for the default %d)", ms, minMS, maxMS, def.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ValidateInSession checks req, a call into the open session s, against p,
// and returns it with the session's settings applied: the network and
// memory are the session's, so a request may repeat them but not ask for
// others (its memory limit was set at the open, for the session's life);
// its runtime is the session's when absent, and may name another (bash in
// a python3.13 session, to pip install), which the engine holds to the
// session's image; its timeout is its own within p, the session's default
// when absent; its Env is added over the session's base env.
func (p Policy) ValidateInSession(req Request, s SessionInfo, base map[string]string) (Checked, error) {
	if req.Runtime == "" {
		req.Runtime = s.Runtime
	}
	if req.Network == "" {
		req.Network = s.Network
	} else if req.Network != s.Network {
		return Checked{}, invalid("network", "is %q, but the session's network is %q for its life; omit it", req.Network, s.Network)
	}
	if req.Limits.MemoryMB != 0 && req.Limits.MemoryMB != s.Limits.MemoryMB {
		return Checked{}, invalid("limits.memory_mb", "is %d, but the session's memory limit is %d MB for its life (set when it was opened); omit it", req.Limits.MemoryMB, s.Limits.MemoryMB)
	}
	if req.Limits.TimeoutMS == 0 {
		req.Limits.TimeoutMS = s.Limits.TimeoutMS
	}
	// The call is held to the policy as any call, except for the
	// session's memory, which may be above a call's maximum.
	req.Limits.MemoryMB = 0
	if len(base) > 0 {
		env := make(map[string]string, len(base)+len(req.Env))
		for k, v := range base {
			env[k] = v
		}
		for k, v := range req.Env {
			env[k] = v
		}
		req.Env = env
	}
	c, err := p.Validate(req)
	if err != nil {
		return Checked{}, err
	}
	c.MemoryMB = s.Limits.MemoryMB
	return c, nil
}
