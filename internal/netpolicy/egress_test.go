package netpolicy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/networld"
)

type env struct {
	eng     *engine.Engine
	mgr     *netpolicy.Manager
	backend *namespaces.Backend
}

func newEgressEngine(t *testing.T) *env { return newNamedEgressEngine(t, "") }

// newNamedEgressEngine makes an engine of its own (state directory, backend,
// network manager) named by suffix, so that a test can run several, as
// several engine processes on one host would.
func newNamedEgressEngine(t *testing.T, suffix string) *env {
	return newConfiguredEgressEngine(t, suffix, func(*netpolicy.Config) {})
}

// newConfiguredEgressEngine is newNamedEgressEngine with the policy changed
// by configure.
func newConfiguredEgressEngine(t *testing.T, suffix string, configure func(*netpolicy.Config)) *env {
	t.Helper()
	pid := os.Getpid()
	stateDir := fmt.Sprintf("/run/scratchrun-nettest-%d%s", pid, suffix)
	cgroupParent := fmt.Sprintf("scratchrun-nettest-%d%s", pid, suffix)
	store, err := images.OpenStore(images.Options{Root: "/var/lib/scratchrun", UIDBase: images.DefaultUIDBase})
	if err != nil {
		t.Fatal(err)
	}
	backend, err := namespaces.New(namespaces.Options{StateDir: stateDir, CgroupParent: cgroupParent})
	if err != nil {
		os.RemoveAll(stateDir)
		t.Fatal(err)
	}
	// Registered first, run last: even when a step below fails.
	t.Cleanup(func() {
		backend.Close()
		os.RemoveAll(stateDir)
	})
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	configure(&cfg)
	mgr, err := netpolicy.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgr.Close(); err != nil {
			t.Errorf("close network manager: %v", err)
		}
	})
	ecfg := engine.DefaultConfig()
	ecfg.Policy.AllowEgress = true
	ecfg.Network = mgr
	eng, err := engine.New(ecfg, store, backend)
	if err != nil {
		t.Fatal(err)
	}
	return &env{eng: eng, mgr: mgr, backend: backend}
}

// probe is Python that tries each target and prints one line per target:
// name, outcome (ok:<body> or the errno name) and milliseconds taken.
const probe = `import errno, socket, sys, time, urllib.request
def tcp(name, host, port):
    t = time.monotonic()
    try:
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        body = s.recv(4096).decode(errors="replace").split("\r\n\r\n", 1)[-1]
        out = "ok:" + body
    except OSError as e:
        out = errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
    print(name, out, int((time.monotonic() - t) * 1000), flush=True)
def udp(name, host, port):
    t = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    try:
        s.connect((host, port)); s.send(b"x"); s.recv(100); out = "ok"
    except OSError as e:
        out = errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
    print(name, out, int((time.monotonic() - t) * 1000), flush=True)
for line in sys.argv[1:] if len(sys.argv) > 1 else TARGETS:
    kind, name, host, port = line.split()
    (tcp if kind == "tcp" else udp)(name, host, int(port))
`

func targets(lines ...string) string {
	quoted := make([]string, len(lines))
	for i, l := range lines {
		quoted[i] = fmt.Sprintf("%q", l)
	}
	return "TARGETS = [" + strings.Join(quoted, ", ") + "]\n" + probe
}

// outcomes parses probe output into name -> (outcome, ms).
func outcomes(t *testing.T, stdout string) map[string][2]string {
	out := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 {
			out[f[0]] = [2]string{strings.Join(f[1:len(f)-1], " "), f[len(f)-1]}
		}
	}
	return out
}

func TestEgressPolicy(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	networld.Build(t)
	// A service bound on the engine's host, on every address.
	hostSvc, err := net.Listen("tcp", "0.0.0.0:8081")
	must(t, err)
	defer hostSvc.Close()
	go http.Serve(hostSvc, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "HOST") }))

	// Sanity: from the engine's host, the private and metadata hosts ARE
	// reachable, so what stops sandboxes is the policy, not the topology.
	for _, a := range []netip.Addr{networld.Private, networld.Metadata, networld.Internet} {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(a, 80).String(), 2*time.Second)
		if err != nil {
			t.Fatalf("world broken: host cannot reach %s: %v", a, err)
		}
		c.Close()
	}

	e := newEgressEngine(t)
	before := leakcheck.Take(leakcheck.Options{})

	// A running sandbox that others try to reach.
	victimAddr := make(chan string, 1)
	victimDone := make(chan execapi.Result, 1)
	go func() {
		var got strings.Builder
		sent := false
		res, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkEgress,
			Limits: execapi.Limits{TimeoutMS: 20000},
			Code: "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.connect(('198.51.100.10', 80))\nprint('addr', s.getsockname()[0], flush=True)\n" +
				"l = socket.socket(); l.bind(('0.0.0.0', 9000)); l.listen()\nl.settimeout(6)\ntry:\n    c, _ = l.accept(); print('ACCEPTED')\nexcept OSError: print('nobody came')\n"},
			func(ev execapi.Event) {
				// Output arrives in chunks of any size: wait for the whole line.
				if ev.Kind != execapi.EventStdout || sent {
					return
				}
				got.Write(ev.Data)
				if line, _, ok := strings.Cut(got.String(), "\n"); ok && strings.HasPrefix(line, "addr ") {
					sent = true
					victimAddr <- strings.TrimPrefix(line, "addr ")
				}
			})
		if err != nil {
			res.Note = err.Error()
		}
		victimDone <- res
	}()
	var victim string
	select {
	case victim = <-victimAddr:
	case res := <-victimDone:
		t.Fatalf("victim sandbox ended early: %+v", res)
	case <-time.After(30 * time.Second):
		t.Fatal("victim sandbox never printed its address")
	}

	slot0Gateway := "10.203.0.1"
	res, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkEgress,
		Limits: execapi.Limits{TimeoutMS: 30000},
		Code: targets(
			"tcp internet-by-addr 198.51.100.10 80",
			"tcp internet-by-name internet.test 80",
			"tcp private 10.1.2.3 80",
			"tcp private-by-name private.test 80",
			"tcp metadata 169.254.169.254 80",
			"tcp smtp 198.51.100.10 25",
			"tcp host-uplink "+networld.Uplink.String()+" 8081",
			"tcp host-gateway "+slot0Gateway+" 8081",
			"tcp other-sandbox "+victim+" 9000",
			"udp private-udp 10.1.2.3 53",
			"udp metadata-udp 169.254.169.254 53",
		)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := outcomes(t, res.Stdout)
	t.Logf("probe results:\n%s%s", res.Stdout, res.Stderr)
	want := map[string]string{
		"internet-by-addr": "ok:hello from the internet",
		"internet-by-name": "ok:hello from the internet",
	}
	for name, outcome := range want {
		if got[name][0] != outcome {
			t.Errorf("%s: got %q, want %q", name, got[name][0], outcome)
		}
	}
	for _, name := range []string{"private", "private-by-name", "metadata", "smtp", "host-uplink", "host-gateway", "other-sandbox", "private-udp", "metadata-udp"} {
		r, ok := got[name]
		if !ok {
			t.Errorf("%s: no result", name)
			continue
		}
		if strings.HasPrefix(r[0], "ok") || r[0] == "timeout" || r[0] == "TimeoutError" {
			t.Errorf("%s: got %q; want a fast refusal", name, r[0])
		}
		// Generous: a refusal answers in milliseconds; a silent drop would
		// sit out the 10 s socket timeout.
		if ms, _ := strconv.Atoi(r[1]); ms >= 3000 {
			t.Errorf("%s: refusal took %d ms; want a reject, not a hang", name, ms)
		}
	}
	if v := <-victimDone; !strings.Contains(v.Stdout, "nobody came") {
		t.Errorf("victim sandbox: %q %q", v.Stdout, v.Note)
	}

	// network "none" reaches nothing, not even the internet host.
	none, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkNone,
		Code: targets("tcp internet 198.51.100.10 80", "udp resolver 198.51.100.53 53")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range outcomes(t, none.Stdout) {
		if r[0] != "ENETUNREACH" {
			t.Errorf("network none: %s got %q, want ENETUNREACH", name, r[0])
		}
	}

	// No IPv6 at all inside an egress sandbox.
	v6, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkEgress,
		Code: "import socket\nprint(repr(open('/proc/net/if_inet6').read()))\ntry:\n    socket.create_connection(('2001:db8::1', 80), timeout=5)\nexcept OSError as e: print(type(e).__name__, e.errno)\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v6.Stdout, "''\n") || strings.Contains(v6.Stdout, "TimeoutError") {
		t.Errorf("IPv6 inside an egress sandbox: %q %q", v6.Stdout, v6.Stderr)
	}

	// A second engine in the same namespace with another policy is refused,
	// rather than run under rules it did not ask for.
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	cfg.Blocked = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	if _, err := netpolicy.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "different policy") {
		t.Errorf("second manager with another policy: %v, want a refusal", err)
	}

	if err := e.mgr.Close(); err != nil {
		t.Fatal(err)
	}
	if left := leakcheck.WaitClean(before, leakcheck.Options{}, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// The operator's extra allowed and blocked destinations apply.
func TestOperatorAllowAndBlockLists(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	networld.Build(t)
	pid := os.Getpid()
	store, err := images.OpenStore(images.Options{Root: "/var/lib/scratchrun", UIDBase: images.DefaultUIDBase})
	must(t, err)
	stateDir := fmt.Sprintf("/run/scratchrun-nettest2-%d", pid)
	backend, err := namespaces.New(namespaces.Options{StateDir: stateDir, CgroupParent: fmt.Sprintf("scratchrun-nettest2-%d", pid)})
	must(t, err)
	defer os.RemoveAll(stateDir)
	defer backend.Close()
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	cfg.Allowed = []netip.Prefix{netip.PrefixFrom(networld.Private, 32)}
	cfg.Blocked = []netip.Prefix{netip.PrefixFrom(networld.Internet, 32)}
	mgr, err := netpolicy.New(cfg, nil)
	must(t, err)
	defer mgr.Close()
	ecfg := engine.DefaultConfig()
	ecfg.Policy.AllowEgress, ecfg.Policy.NetworkDefault, ecfg.Network = true, execapi.NetworkEgress, mgr
	eng, err := engine.New(ecfg, store, backend)
	must(t, err)
	res, err := eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13",
		Code: targets("tcp private 10.1.2.3 80", "tcp metadata 169.254.169.254 80", "tcp internet 198.51.100.10 80")}, nil)
	must(t, err)
	got := outcomes(t, res.Stdout)
	if got["private"][0] != "ok:PRIVATE" || got["metadata"][0] != "ECONNREFUSED" || got["internet"][0] != "ECONNREFUSED" {
		t.Errorf("allow/block lists not applied (default network egress):\n%s%s", res.Stdout, res.Stderr)
	}
}

// After Close, no veth, namespace or rule of the policy is left.
func TestCloseLeavesNothing(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	before := leakcheck.Take(leakcheck.Options{})
	cfg := netpolicy.DefaultConfig()
	cfg.DNS = []netip.Addr{networld.Resolver}
	cfg.PoolSize = 3
	mgr, err := netpolicy.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := mgr.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countPrefix("sr-") < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := countPrefix("sr-"); n != 4 {
		t.Errorf("%d sandbox interfaces, want 1 acquired + 3 ready", n)
	}
	must(t, mgr.Release(s))
	must(t, mgr.Close())
	if left := leakcheck.WaitClean(before, leakcheck.Options{}, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	conn, err := nftables.New()
	must(t, err)
	tables, err := conn.ListTables()
	must(t, err)
	for _, tb := range tables {
		if tb.Name == cfg.Table {
			t.Errorf("table %s still installed", tb.Name)
		}
	}
}

func countPrefix(prefix string) int {
	ifaces, _ := net.Interfaces()
	n := 0
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, prefix) {
			n++
		}
	}
	return n
}
