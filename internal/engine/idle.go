package engine

import (
	"context"
	"fmt"

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

// CreateIdleZygote makes a sandbox of runtime (no network, light variant)
// from the zygote of the caller with no name, as a caller's next sandbox is
// made (zygote_next.go), and never gives it a job; the zygote starts with
// the first one. It is an error when this engine makes no such sandbox from
// zygotes (zygotes off, or a runtime they do not serve).
func (e *Engine) CreateIdleZygote(ctx context.Context, runtime string) (*IdleSandbox, error) {
	rt, err := e.store.Resolve(runtime)
	if err != nil {
		return nil, err
	}
	key := execapi.PoolKey{Runtime: rt.Runtime.Name, Network: execapi.NetworkNone, Variant: variantLight}
	if !e.zygoteServes(rt, key) {
		return nil, fmt.Errorf("this engine makes no %s sandbox from a zygote (is the zygote setting on?)", rt.Runtime.Name)
	}
	l, err := e.leaseZygote(ctx, rt, key, int64(e.cfg.Policy.MaxMemoryMB)<<20, "")
	if err != nil {
		return nil, err
	}
	return &IdleSandbox{e: e, l: l}, nil
}
