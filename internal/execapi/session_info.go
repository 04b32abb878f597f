package execapi

// SessionsInfo is what Info says of sessions when they are on: the
// bounds a caller plans with (when state is gone, how many it may keep).
type SessionsInfo struct {
	// IdleTTLMS is the idle TTL of a session that asks for none;
	// MaxIdleTTLMS the longest one may ask for.
	IdleTTLMS    int64 `json:"idle_ttl_ms"`
	MaxIdleTTLMS int64 `json:"max_idle_ttl_ms"`
	// MaxLifetimeMS is the longest a session lives.
	MaxLifetimeMS int64 `json:"max_lifetime_ms"`
	// PerKey is how many sessions one caller may have open (0: no bound).
	PerKey int `json:"per_key"`
	// MaxMemoryMB is the largest memory limit a session may ask for.
	MaxMemoryMB int `json:"max_memory_mb"`
}

// Info is what Info.Sessions says of sp: nil when sessions are off, so
// that a description without them is what it was before they existed.
func (sp SessionPolicy) Info() *SessionsInfo {
	if !sp.Enabled {
		return nil
	}
	return &SessionsInfo{
		IdleTTLMS: sp.IdleTTL.Milliseconds(), MaxIdleTTLMS: sp.MaxIdleTTL.Milliseconds(),
		MaxLifetimeMS: sp.MaxLifetime.Milliseconds(), PerKey: sp.PerKey, MaxMemoryMB: sp.MaxMemoryMB,
	}
}
