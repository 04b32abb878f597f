package engine

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// IdleSandbox is one sandbox built as the warm pool builds one and never
// given a job: what `scratchrun bench --create` measures the cost of.
type IdleSandbox struct {
	e *Engine
	l *leased
}

// CreateIdle builds a sandbox of runtime (no network) as the pool does:
// with the runtime's interpreter pre-started (its light variant) when warm
// is set and the runtime has a warm start, at normal CPU weight, outside
// admission (the caller measures, it does not serve).
func (e *Engine) CreateIdle(ctx context.Context, runtime string, warm bool) (*IdleSandbox, error) {
	rt, err := e.store.Resolve(runtime)
	if err != nil {
		return nil, err
	}
	key := execapi.PoolKey{Runtime: rt.Runtime.Name, Network: execapi.NetworkNone}
	if warm && rt.Runtime.Warm != "" {
		key.Variant = variantLight
	}
	l, err := e.lease(ctx, rt, key, int64(e.cfg.Policy.MaxMemoryMB)<<20, warm, false)
	if err != nil {
		return nil, err
	}
	return &IdleSandbox{e: e, l: l}, nil
}

// ID is the sandbox's id (its cgroup's name).
func (s *IdleSandbox) ID() string { return s.l.sb.ID() }

// Destroy tears the sandbox down as a call's end does.
func (s *IdleSandbox) Destroy() sandbox.Teardown { return s.e.release(s.l) }
