package netpolicy_test

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/networld"
)

// egressCall runs one egress call that fetches the internet host.
func egressCall(t *testing.T, e *env) string {
	t.Helper()
	res, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkEgress,
		Limits: execapi.Limits{TimeoutMS: 20000}, Code: targets("tcp internet 198.51.100.10 80")}, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	return outcomes(t, res.Stdout)["internet"][0]
}

// Two engines with egress in one network namespace (two one-shot `exec`s at
// once, or one beside a server) both run egress calls; one closing does not
// break the other; after both close, no table, interface, namespace or lock
// file is left. (The second used to be refused: "another ScratchRun engine
// owns network egress".)
func TestTwoEnginesShareEgress(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	networld.Build(t)
	before := leakcheck.Take(leakcheck.Options{})
	lockFile := ownLockFile(t)

	a := newNamedEgressEngine(t, "-a")
	b := newNamedEgressEngine(t, "-b")
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = egressCall(t, []*env{a, b}[i%2])
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != "ok:hello from the internet" {
			t.Errorf("call %d (engine %c) beside the other engine: %q", i, "ab"[i%2], g)
		}
	}

	if err := a.eng.Close(); err != nil {
		t.Fatalf("close the first engine: %v", err)
	}
	if !tableInstalled(t, a.mgr.Config().Table) {
		t.Fatal("the first engine out removed the policy the second still uses")
	}
	if g := egressCall(t, b); g != "ok:hello from the internet" {
		t.Errorf("the second engine after the first closed: %q", g)
	}
	// A third engine may join the one still running (same policy) ...
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	third, err := netpolicy.New(cfg, nil)
	if err != nil {
		t.Fatalf("a third engine with the same policy: %v", err)
	}
	must(t, third.Close())
	if g := egressCall(t, b); g != "ok:hello from the internet" {
		t.Errorf("the second engine after a third came and went: %q", g)
	}

	if err := b.eng.Close(); err != nil {
		t.Fatal(err)
	}
	if tableInstalled(t, cfg.Table) {
		t.Error("the last engine out left the table")
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Errorf("lock file %s left behind (%v)", lockFile, err)
	}
	if left := leakcheck.WaitClean(before, leakcheck.Options{}, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Slot indexes are claimed across engines: two engines holding slots at
// once never get the same interface name or address.
func TestEnginesNeverShareASlot(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	cfg.PoolSize = 0
	var mgrs []*netpolicy.Manager
	for range 2 {
		m, err := netpolicy.New(cfg, nil)
		must(t, err)
		mgrs = append(mgrs, m)
	}
	seen := map[netip.Addr]bool{}
	var slots []func()
	for i := range 6 {
		m := mgrs[i%2]
		s, err := m.Acquire(context.Background())
		must(t, err)
		if seen[s.Address] {
			t.Errorf("address %s handed out twice", s.Address)
		}
		seen[s.Address] = true
		slots = append(slots, func() { must(t, m.Release(s)) })
	}
	for _, release := range slots {
		release()
	}
	for _, m := range mgrs {
		must(t, m.Close())
	}
	if n := countPrefix("sr-"); n != 0 {
		t.Errorf("%d sandbox interfaces left", n)
	}
}

// holderEnv makes the test binary, started again by a test, hold egress
// (policy, one slot) until killed.
const holderEnv = "SCRATCHRUN_NETTEST_HOLDER"

// holdEgress is that child's whole job.
func holdEgress() {
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	m, err := netpolicy.New(cfg, nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s, err := m.Acquire(context.Background())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("holding", s.Address)
	select {}
}

// An engine killed with SIGKILL leaves its table, lock file and perhaps
// interfaces; the next engine cleans them, and when it closes nothing is
// left.
func TestEngineAfterKillCleansUp(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	before := leakcheck.Take(leakcheck.Options{})
	self, err := os.Executable()
	must(t, err)
	child := exec.Command(self)
	child.Env = append(os.Environ(), holderEnv+"=1")
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := child.StdoutPipe()
	must(t, err)
	must(t, child.Start())
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "holding") {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("holder: %q", line)
	}
	must(t, child.Process.Kill())
	child.Wait()
	table := netpolicy.DefaultConfig().Table
	if !tableInstalled(t, table) {
		t.Fatal("the killed engine's table is not there: nothing to clean up")
	}

	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	cfg.PoolSize = 1
	m, err := netpolicy.New(cfg, nil)
	must(t, err)
	s, err := m.Acquire(context.Background())
	must(t, err)
	must(t, m.Release(s))
	must(t, m.Close())
	if tableInstalled(t, table) {
		t.Error("table left after the restarted engine closed")
	}
	if _, err := os.Stat(ownLockFile(t)); !os.IsNotExist(err) {
		t.Errorf("lock file left (%v)", err)
	}
	if left := leakcheck.WaitClean(before, leakcheck.Options{}, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// Lock files of namespaces no engine uses any more are removed by the next
// engine that starts, whichever namespace it is in.
func TestUnheldLockFilesAreSwept(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	dir := netpolicy.DefaultConfig().LockDir
	must(t, os.MkdirAll(dir, 0o755))
	stale := filepath.Join(dir, "egress-netns-1.lock")
	must(t, os.WriteFile(stale, []byte("table scratchrun\n"), 0o600))
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	m, err := netpolicy.New(cfg, nil)
	must(t, err)
	defer m.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		os.Remove(stale)
		t.Errorf("an unheld lock file was not removed (%v)", err)
	}
	if _, err := os.Stat(ownLockFile(t)); err != nil {
		t.Errorf("the running engine's own lock file went: %v", err)
	}
}

// ownLockFile is the lock file of this (sealed) network namespace.
func ownLockFile(t *testing.T) string {
	var st unix.Stat_t
	must(t, unix.Stat("/proc/thread-self/ns/net", &st))
	return filepath.Join(netpolicy.DefaultConfig().LockDir, fmt.Sprintf("egress-netns-%d.lock", st.Ino))
}

func tableInstalled(t *testing.T, name string) bool {
	conn, err := nftables.New()
	must(t, err)
	tables, err := conn.ListTables()
	must(t, err)
	for _, tb := range tables {
		if tb.Name == name {
			return true
		}
	}
	return false
}
