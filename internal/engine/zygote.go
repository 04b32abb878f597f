package engine

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/engine/warm"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// Zygotes (Config.Zygote, docs/zygotes.md): a call that would take a warm
// Python sandbox from the pool gets one made on its path from its
// caller's zygote instead. Not a per-caller pool: the pool's sandboxes
// are built ahead for whoever calls next, and keying them by caller would
// keep idle sandboxes per caller (and guess who calls next); a sandbox
// forked from a zygote costs a fraction of a warm one's CPU to make, so
// it is made when the call comes, and the pool keeps none for these keys.

// zygoteServes reports whether calls of key on rt are made from zygotes:
// Python's warm kind, an image built here from the catalog (a zygote runs
// the image's interpreter outside any sandbox), network none, the light
// variant. Not the heavy one: numpy and pandas preload in a zygote (with
// OpenBLAS held to one thread, as the zygote must stay single-threaded),
// but matplotlib does not, for want of its baked caches in /root and of
// anything writable, so heavy calls stay on the warm pool.
func (e *Engine) zygoteServes(rt images.Resolved, key execapi.PoolKey) bool {
	return e.zygotes && rt.Built && rt.Runtime.Warm == "python" && key.Network == execapi.NetworkNone &&
		key.Variant == variantLight
}

// leaseZygote makes a sandbox for a call of caller from its zygote (the
// backend falls back to an ordinary warm sandbox if the zygote fails).
func (e *Engine) leaseZygote(ctx context.Context, rt images.Resolved, key execapi.PoolKey, memory int64, caller string) (*leased, error) {
	cfg, err := e.sandboxConfig(rt, key, memory, true, false)
	if err != nil {
		return nil, err
	}
	argv, err := warm.Zygote(rt.Runtime.WarmCommand)
	if err != nil {
		return nil, err
	}
	// The light variant preloads nothing (zygoteServes).
	cfg.Zygote = &sandbox.Zygote{Caller: caller, Runtime: rt.Runtime.Name, Variant: key.Variant, Argv: argv, Env: e.environment(nil, rt.Runtime)}
	return e.leaseWith(ctx, key, cfg, e.backend.Create)
}
