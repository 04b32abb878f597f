package namespaces

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sessiontest"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// fork forks ss into a session of cfg, destroyed (before the parent) when t
// ends.
func fork(t *testing.T, ss sandbox.Session, cfg sandbox.Config) (sandbox.Session, error) {
	t.Helper()
	f, ok := sandbox.SandboxAs[sandbox.Forker](ss.(sandbox.Sandbox))
	if !ok || f.ForkKind() != "files" {
		t.Fatalf("a namespaces session is no files Forker: %v", ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := f.Fork(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if td := sb.Destroy(); !td.Purged {
			t.Errorf("the fork's teardown not verified: %v", td.Err)
		}
	})
	child, ok := sandbox.SandboxAs[sandbox.Session](sb)
	if !ok {
		t.Fatal("a fork is no session")
	}
	return child, nil
}

// A fork by files has the parent's writable state as it was (the root's
// layer with its removals, /tmp, /code, /dev/shm,
// owners and modes, links as links however far out they point) but none
// of its processes, no fifo and no set-id bit; after it the two diverge.
// A parent too large for the new sandbox's limits fails the fork, and
// leaves nothing behind.
func TestSessionForkCopiesFiles(t *testing.T) {
	_, ss := openSession(t, "bash")
	setup := sessiontest.Run(t, ss, 20*time.Second, `set -e
echo parent > /code/a; mkdir -p /tmp/d/e; printf '\000\001\377' > /tmp/d/e/bin; echo shm > /dev/shm/s
echo new > /etc/newfile; rm /etc/debian_version; mkdir -p /opt/x; echo x > /opt/x/f
ln -s /proc/1/root /tmp/escape; ln -s ../../../../../etc/passwd /code/up; mkfifo /tmp/fifo
echo s > /tmp/suid; chmod 4755 /tmp/suid; echo n > /tmp/nobody; chown 65534:65534 /tmp/nobody; chmod 640 /tmp/nobody
sleep 1000 &`)
	if setup.ExitCode != 0 {
		t.Fatalf("the parent's files: %+v, stderr %q", setup.Outcome, setup.Stderr)
	}
	img, _ := env.Image(t, "bash")
	cfg := testenv.SandboxConfig(img)
	child, err := fork(t, ss, cfg)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	want := "parent\n0001ff\nshm\nnew\ngone\nx\n/proc/1/root\n../../../../../etc/passwd\nno-fifo\n755\n65534:65534:640\n0\n"
	check := `cat /code/a; od -An -tx1 /tmp/d/e/bin | tr -d ' \n'; echo; cat /dev/shm/s /etc/newfile; [ -e /etc/debian_version ] || echo gone
cat /opt/x/f; readlink /tmp/escape; readlink /code/up; [ -e /tmp/fifo ] || echo no-fifo
stat -c %a /tmp/suid; stat -c %u:%g:%a /tmp/nobody; for p in /proc/[0-9]*; do cat $p/comm; done | grep -c '^sleep$' || true`
	if c := sessiontest.Run(t, child, 20*time.Second, check); c.Stdout != want {
		t.Errorf("the fork has:\n%s\nwant:\n%s\nstderr %q", c.Stdout, want, c.Stderr)
	}
	sessiontest.Run(t, child, 20*time.Second, `echo child > /code/a; echo c > /tmp/only-child`)
	sessiontest.Run(t, ss, 20*time.Second, `echo p > /tmp/only-parent`)
	if c := sessiontest.Run(t, ss, 20*time.Second, `cat /code/a; ls /tmp/only-child /tmp/only-parent 2>/dev/null`); c.Stdout != "parent\n/tmp/only-parent\n" {
		t.Errorf("the parent after the fork: %q", c.Stdout)
	}
	if c := sessiontest.Run(t, child, 20*time.Second, `cat /code/a; ls /tmp/only-child /tmp/only-parent 2>/dev/null`); c.Stdout != "child\n/tmp/only-child\n" {
		t.Errorf("the fork after it: %q", c.Stdout)
	}

	sessiontest.Run(t, ss, 20*time.Second, `head -c 3000000 /dev/zero > /tmp/big`)
	small := cfg
	small.TmpBytes = 1 << 20
	if _, err := fork(t, ss, small); !errors.Is(err, errForkTooLarge) || !strings.Contains(err.Error(), "/tmp/big") {
		t.Errorf("a fork over the new sandbox's limits: %v", err)
	}
	if !ss.Alive() {
		t.Error("the parent is not alive after its forks")
	}
}

// A fork's copy counts in the new sandbox's memory: one whose memory limit
// is below what the parent's files hold fails (the copier, not the engine,
// is what the limit kills), as does one with too few processes for the
// copier's threads; either leaves nothing behind (openSession's cleanup
// checks), and the parent keeps its files and runs on.
func TestSessionForkBeyondTheChildsMemoryFails(t *testing.T) {
	_, ss := openSession(t, "bash")
	if r := sessiontest.Run(t, ss, 20*time.Second, `head -c 48m /dev/zero > /tmp/big && echo ok`); r.Stdout != "ok\n" {
		t.Fatalf("the parent's files: %+v, stderr %q", r.Outcome, r.Stderr)
	}
	img, _ := env.Image(t, "bash")
	cfg := testenv.SandboxConfig(img)
	cfg.MemoryBytes = 24 << 20 // the sizes (128 MB) would let it in
	_, err := fork(t, ss, cfg)
	t.Logf("the fork: %v", err)
	if !errors.Is(err, errForkTooLarge) || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("a fork beyond the new sandbox's memory: %v", err)
	}
	// The copier's threads count in the new sandbox's processes.
	few := testenv.SandboxConfig(img)
	few.MaxPids = 2
	if _, err := fork(t, ss, few); err == nil || !strings.Contains(err.Error(), "process limit") {
		t.Errorf("a fork into a sandbox of %d processes: %v", few.MaxPids, err)
	}
	if !ss.Alive() {
		t.Fatal("the parent is not alive after the forks")
	}
	if r := sessiontest.Run(t, ss, 20*time.Second, `stat -c %s /tmp/big`); r.Stdout != "50331648\n" {
		t.Errorf("the parent after the fork: %q", r.Stdout)
	}
}
