//go:build hostile

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

func vmRSSKiB(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// 500 calls at four times the server's capacity: every call gets a result or
// a 429 with Retry-After, none hangs, the server's memory stays bounded, and
// nothing is left afterwards.
func TestHostileLoadFourTimesCapacity(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	t.Setenv("SCRATCHRUN_POOL_FLOOR", "1")
	srv := startServe(t, "--db", filepath.Join(t.TempDir(), "load.db"), "--capacity", "2", "--queue-wait", "500ms")
	pid := srv.cmd.Process.Pid
	rssStart := vmRSSKiB(pid)

	const calls, clients = 500, 8
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		bad    []string
		wg     sync.WaitGroup
		next   int
	)
	client := &http.Client{Timeout: 60 * time.Second}
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= calls {
					return
				}
				body := fmt.Sprintf(`{"runtime": "bash", "code": "echo %d"}`, i)
				resp, err := client.Post(srv.url+"/v1/exec", "application/json", strings.NewReader(body))
				mu.Lock()
				if err != nil {
					bad = append(bad, fmt.Sprintf("call %d: %v", i, err))
				} else {
					counts[resp.StatusCode]++
					if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
						bad = append(bad, fmt.Sprintf("call %d: 429 without Retry-After", i))
					}
					if resp.StatusCode != 200 && resp.StatusCode != 429 {
						bad = append(bad, fmt.Sprintf("call %d: status %d", i, resp.StatusCode))
					}
					resp.Body.Close()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("500 calls in %s: %v; server RSS %d KiB -> %d KiB", time.Since(start).Round(time.Millisecond), counts, rssStart, vmRSSKiB(pid))
	for _, b := range bad {
		t.Error(b)
	}
	if counts[200]+counts[429] != calls || counts[200] == 0 {
		t.Errorf("answers %v for %d calls", counts, calls)
	}
	if rss := vmRSSKiB(pid); rss > rssStart+256*1024 {
		t.Errorf("server RSS grew from %d KiB to %d KiB", rssStart, rss)
	}
	srv.stop(t)
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left after the load: %v", left)
	}
}

// kill -9 of the server in the middle of 20 runs, some with network egress:
// its sandboxes die with it, and the next server cleans every leftover
// (cgroups, the nftables table, network slots) at start and serves normally.
// Both servers run in one network namespace of the test's own, with no route
// anywhere.
func TestHostileServerKilledMidRunsRestartsClean(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	holder := exec.Command("unshare", "--net", "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	netns := fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid)
	inNS := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--net=" + netns, "--"}, args...)...)
	}
	// unshare has joined its new namespace once /proc shows one that is not
	// ours; loopback comes up there before anything is started in it.
	waitForNetNS(t, holder.Process.Pid)
	if out, err := inNS("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("loopback in the test's namespace: %v %s", err, out)
	}
	links := func() string {
		out, _ := inNS("ip", "-o", "link").CombinedOutput()
		return string(out)
	}
	nftTable := func() bool {
		return inNS("nft", "list", "table", "inet", "scratchrun").Run() == nil
	}

	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "crash.db")
	var logs strings.Builder
	var servers []*exec.Cmd
	defer func() {
		for _, s := range servers {
			if s.ProcessState == nil {
				s.Process.Kill()
				s.Wait()
			}
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	}()
	start := func() *exec.Cmd {
		cmd := inNS(binary, "serve", "--addr", "127.0.0.1:8799", "--db", db, "--capacity", "8", "--allow-egress")
		cmd.Env = append(os.Environ(), "SCRATCHRUN_DNS=192.0.2.53", "SCRATCHRUN_POOL_FLOOR=1", "SCRATCHRUN_POOL_MAX=1")
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, cmd)
		return cmd
	}
	// The server's loopback is inside the namespace: talk to it from there.
	call := func(body string) (string, error) {
		out, err := inNS("curl", "-s", "-m", "60", "-H", "Content-Type: application/json", "-d", body, "http://127.0.0.1:8799/v1/exec").CombinedOutput()
		return string(out), err
	}
	waitUp := func() {
		deadline := time.Now().Add(60 * time.Second)
		for inNS("curl", "-sf", "-m", "2", "http://127.0.0.1:8799/healthz").Run() != nil {
			if time.Now().After(deadline) {
				t.Fatal("server did not come up")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("nft (Debian package nftables, installed by scripts/install.sh) is needed to inspect the table")
	}

	srv := start()
	waitUp()
	// The runs sleep with an argument of their network's, so that the host's
	// /proc tells which user code is running: cgroups cannot (warm
	// sandboxes have them before any call).
	sleeps := map[string]string{"egress": "20.1", "none": "20.2"}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		network := "none"
		if i%2 == 0 {
			network = "egress"
		}
		go func() {
			defer wg.Done()
			call(fmt.Sprintf(`{"runtime": "bash", "code": "sleep %s", "network": %q, "limits": {"timeout_ms": 25000}}`, sleeps[network], network))
		}()
	}
	var egress, none []int
	deadline := time.Now().Add(60 * time.Second)
	for len(egress) < 2 || len(none) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("runs never started: %d with egress and %d without are running", len(egress), len(none))
		}
		time.Sleep(50 * time.Millisecond)
		egress, none = processesRunning("sleep", sleeps["egress"]), processesRunning("sleep", sleeps["none"])
	}
	// User code with egress runs only with its policy in place: the table,
	// and its slot's interface with an address and a default route.
	if !strings.Contains(links(), "sr-") || !nftTable() {
		t.Fatalf("egress not in place while runs with egress run (table there: %v):\n%s", nftTable(), links())
	}
	for _, pid := range egress {
		route, err := exec.Command("nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", pid), "--", "ip", "-4", "route", "show", "default").CombinedOutput()
		if err == nil && !strings.Contains(string(route), "default via") {
			t.Fatalf("a run with egress (pid %d) runs in a namespace with no default route: %s", pid, route)
		}
	}
	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	wg.Wait()

	// Restart: the new server sweeps and serves.
	srv2 := start()
	waitUp()
	out, err := call(`{"runtime": "bash", "code": "echo after", "network": "egress"}`)
	if err != nil || !strings.Contains(out, `"stdout":"after\n"`) {
		t.Fatalf("call after restart: %v %s", err, out)
	}
	srv2.Process.Signal(syscall.SIGTERM)
	if err := srv2.Wait(); err != nil {
		t.Errorf("second server: %v", err)
	}
	if l := links(); strings.Contains(l, "sr-") {
		t.Errorf("sandbox interfaces left:\n%s", l)
	}
	if nftTable() {
		t.Error("nftables table left after shutdown")
	}
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left after crash and restart: %v", left)
	}
}

// processesRunning lists the host's processes whose command line is exactly
// args.
func processesRunning(args ...string) []int {
	want := strings.Join(args, "\x00") + "\x00"
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && string(cmdline) == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitForNetNS waits until process pid is in a network namespace other than
// this process's (unshare has run).
func waitForNetNS(t *testing.T, pid int) {
	t.Helper()
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && theirs != ours {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never entered a network namespace of its own", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
