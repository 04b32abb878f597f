package engine

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/engine/warm"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// Zygotes (Config.Zygote, docs/zygotes.md): a call that would take a warm
// Python sandbox from the pool gets one made from its caller's zygote
// instead: the one made for it when its caller's last call ended
// (nextSandboxes), or one made on its path. Not a per-caller pool: the
// pool's sandboxes are built ahead for whoever calls next, and keying them
// by caller would keep idle sandboxes per caller before any of its calls;
// a caller who has called gets one, for as long as it keeps calling.

// zygoteServes reports whether calls of key on rt are made from zygotes:
// Python's warm kind, an image built here from the catalog (a zygote runs
// the image's interpreter outside any sandbox), network none, either
// variant. A heavy zygote preloads what the heavy warm sandbox does, with
// OpenBLAS held to one thread (a zygote must stay single-threaded; a
// sandbox has one CPU anyway) and a writable home of its own, where
// matplotlib finds its config directory and the image's baked font cache.
func (e *Engine) zygoteServes(rt images.Resolved, key execapi.PoolKey) bool {
	return e.zygotes && rt.Built && rt.Runtime.Warm == "python" && key.Network == execapi.NetworkNone &&
		(key.Variant == variantLight || key.Variant == variantHeavy)
}

// poolKeepsWithZygotes reports whether the pool still keeps sandboxes of
// key when its calls are made from zygotes: the heavy variant's, for a
// caller's first heavy call, which would otherwise wait for its zygote's
// preloads (seconds); the light zygote starts as fast as a sandbox.
func poolKeepsWithZygotes(key execapi.PoolKey) bool { return key.Variant == variantHeavy }

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
	env := e.environment(nil, rt.Runtime)
	if pre := preloadEnv(rt.Runtime, key); pre != nil {
		env = append(append(env, pre...), "OPENBLAS_NUM_THREADS=1")
	}
	cfg.Zygote = &sandbox.Zygote{Caller: caller, Runtime: rt.Runtime.Name, Variant: key.Variant, Argv: argv, Env: env}
	return e.leaseWith(ctx, key, cfg, e.backend.Create)
}
