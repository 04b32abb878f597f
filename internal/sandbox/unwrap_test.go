package sandbox_test

import (
	"context"
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
)

// wrapped is a backend wrapper that says what it wraps.
type wrapped struct{ sandbox.Backend }

func (w wrapped) Unwrap() sandbox.Backend { return w.Backend }

// opaque wraps without saying so: what it wraps stays hidden.
type opaque struct{ sandbox.Backend }

// selfWrapped says it wraps itself.
type selfWrapped struct{ sandbox.Backend }

func (s *selfWrapped) Unwrap() sandbox.Backend { return s }

// wrappedSandbox is a sandbox wrapper that says what it wraps.
type wrappedSandbox struct{ sandbox.Sandbox }

func (w wrappedSandbox) Unwrap() sandbox.Sandbox { return w.Sandbox }

// An optional interface is found through any number of wrappers that
// say what they wrap, and not through one that does not; a wrapper that
// wraps itself ends the walk.
func TestOptionalInterfacesThroughWrappers(t *testing.T) {
	fake := &sandboxtest.Backend{}
	if mb, ok := sandbox.BackendAs[sandbox.MemoryBudget](wrapped{wrapped{fake}}); !ok || mb != sandbox.MemoryBudget(fake) {
		t.Errorf("through two wrappers: %v, %v", mb, ok)
	}
	if _, ok := sandbox.BackendAs[sandbox.MemoryBudget](wrapped{opaque{fake}}); ok {
		t.Error("found through a wrapper that does not unwrap")
	}
	if _, ok := sandbox.BackendAs[sandbox.Emulation](wrapped{fake}); ok {
		t.Error("found an interface the backend does not implement")
	}
	if _, ok := sandbox.BackendAs[sandbox.MemoryBudget](&selfWrapped{}); ok {
		t.Error("found in a wrapper of itself")
	}
	sb, err := fake.Create(context.Background(), sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	if _, ok := sandbox.SandboxAs[sandbox.CPUMeter](wrappedSandbox{sb}); !ok {
		t.Error("a wrapped sandbox's CPU meter not found")
	}
}
