package microvm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// A session's machine forked between jobs is a copy of files and memory:
// a background process of the parent's goes on in the copy with the state
// it held (a counter only its shell's memory has), files are the parent's,
// and from then on the two diverge (files, the counter, and the kernel's
// random numbers: the copy is reseeded). Both tear down clean, and no
// saved state is left on disk.
func TestSessionForkCopiesMemory(t *testing.T) {
	b := backend(t)
	img, _ := env.Image(t, "bash")
	before := level.Snapshot()
	cfg := testenv.SandboxConfig(img)
	cfg.Session = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	parent, err := b.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var child sandbox.Sandbox
	defer func() {
		for _, sb := range []sandbox.Sandbox{child, parent} {
			if sb != nil {
				if td := sb.Destroy(); !td.Purged {
					t.Errorf("teardown of %s not verified: %v", sb.ID(), td.Err)
				}
			}
		}
		level.CheckClean(t, before)
		if left := qemuProcesses(b); len(left) > 0 {
			t.Errorf("QEMU processes left: %v", left)
		}
		if b.snapshots != nil {
			if left := forkStateFiles(b.snapshots.dir, b.instance); len(left) > 0 {
				t.Errorf("saved states left: %v", left)
			}
		}
	}()
	ps, _ := sandbox.SandboxAs[sandbox.Session](parent)
	forker, ok := sandbox.SandboxAs[sandbox.Forker](parent)
	if !ok || forker.ForkKind() != "memory" {
		t.Fatalf("a microVM session is no memory Forker (%v)", ok)
	}
	c := mustRunNext(t, ps, 30*time.Second, `echo parent > /code/f; mkfifo /tmp/tick
( n=41; while :; do if read -r _ < /tmp/tick; then n=$((n+1)); echo $n > /tmp/n; fi; done ) > /dev/null 2>&1 &
echo $! > /tmp/bg.pid`)
	if c.ExitCode != 0 || c.Left != 1 {
		t.Fatalf("parent's first job: %+v, stderr %q", c.Outcome, c.stderr)
	}
	if child, err = forker.Fork(ctx, cfg); err != nil {
		t.Fatalf("fork: %v", err)
	}
	cs, ok := sandbox.SandboxAs[sandbox.Session](child)
	if !ok {
		t.Fatal("a fork has no Session")
	}
	tick := `kill -0 "$(cat /tmp/bg.pid)" && echo alive; cat /code/f; echo > /tmp/tick
for i in $(seq 200); do [ "$(cat /tmp/n 2>/dev/null)" = 42 ] && break; sleep 0.05; done; cat /tmp/n
echo %s > /code/f; head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n' > /tmp/rand`
	cc := mustRunNext(t, cs, 30*time.Second, fmt.Sprintf(tick, "child"))
	if cc.stdout != "alive\nparent\n42\n" || cc.ExitCode != 0 {
		t.Errorf("the fork's job: %+v, stdout %q, stderr %q", cc.Outcome, cc.stdout, cc.stderr)
	}
	pc := mustRunNext(t, ps, 30*time.Second, fmt.Sprintf(tick, "parent2"))
	if pc.stdout != "alive\nparent\n42\n" || pc.ExitCode != 0 {
		t.Errorf("the parent's job after the fork: %+v, stdout %q, stderr %q", pc.Outcome, pc.stdout, pc.stderr)
	}
	cf, err1 := cs.ReadFile(ctx, "/code/f", 1<<10)
	pf, err2 := ps.ReadFile(ctx, "/code/f", 1<<10)
	if err1 != nil || err2 != nil || string(cf) != "child\n" || string(pf) != "parent2\n" {
		t.Errorf("files after the fork: child %q (%v), parent %q (%v)", cf, err1, pf, err2)
	}
	cr, err1 := cs.ReadFile(ctx, "/tmp/rand", 1<<10)
	pr, err2 := ps.ReadFile(ctx, "/tmp/rand", 1<<10)
	if err1 != nil || err2 != nil || len(cr) != 32 || string(cr) == string(pr) {
		t.Errorf("random numbers after the fork: child %q (%v), parent %q (%v)", cr, err1, pr, err2)
	}
}
