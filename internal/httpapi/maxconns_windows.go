package httpapi

// DefaultMaxConns is what the unix builds fall back to: Windows has no
// descriptor limit to take half of (its sockets are bounded by memory),
// and it serves only a desktop client's `scratchrun mcp --http`.
func DefaultMaxConns() int { return 512 }
