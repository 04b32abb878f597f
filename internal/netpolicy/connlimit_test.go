package netpolicy_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/networld"
)

// connectionsProbe is Python that opens HOLD connections to the internet
// host and keeps them all open, then opens and at once closes CHURN more,
// and prints how many of each got through and how the others failed.
const connectionsProbe = `import errno, socket, time
def attempt():
    try:
        return socket.create_connection(("198.51.100.10", 80), timeout=5), "ok"
    except OSError as e:
        return None, errno.errorcode.get(e.errno, type(e).__name__)
def report(name, results):
    ok = [s for s, _ in results if s]
    failed = {}
    for s, how in results:
        if not s: failed[how] = failed.get(how, 0) + 1
    print(name, len(ok), sorted(failed.items()), flush=True)
    return ok
held = report("held", [attempt() for _ in range(HOLD)])
start = time.monotonic()
churned = []
for _ in range(CHURN):
    s, how = attempt()
    if s: s.close()
    churned.append((s, how))
report("churned", churned)
print("seconds", time.monotonic() - start)
for s in held: s.close()
`

// runConnections runs connectionsProbe in an egress sandbox of e.
func runConnections(t *testing.T, e *env, hold, churn int) string {
	t.Helper()
	code := fmt.Sprintf("HOLD, CHURN = %d, %d\n", hold, churn) + connectionsProbe
	res, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkEgress,
		Limits: execapi.Limits{TimeoutMS: 30000}, Code: code}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("probe exited %d: %s %s %s", res.ExitCode, res.Stdout, res.Stderr, res.Note)
	}
	out, _, _ := strings.Cut(strings.TrimSpace(res.Stdout), "\nseconds ")
	return out
}

// One sandbox may hold only so many connections: beyond that a new one is
// refused at once (it never takes a place in the host's conntrack table),
// and a sandbox given the same slot later starts with its whole allowance.
func TestConnectionLimitPerSandbox(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	networld.Build(t)
	e := newConfiguredEgressEngine(t, "-conns", func(c *netpolicy.Config) {
		c.MaxConnections, c.NewConnectionsPerSecond, c.PoolSize = 12, 1000, 0
	})
	want := "held 12 [('ECONNREFUSED', 8)]\nchurned 0 [('ECONNREFUSED', 3)]"
	for _, call := range []string{"first", "second"} {
		if got := runConnections(t, e, 20, 3); got != want {
			t.Errorf("%s sandbox:\n%s\nwant\n%s", call, got, want)
		}
	}
	// Slots are released just after their call, off its path.
	deadline := time.Now().Add(10 * time.Second)
	for trackedFrom(t, "10.203.") > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := trackedFrom(t, "10.203."); n != 0 {
		t.Errorf("%d conntrack entries of finished sandboxes are left in the host's table", n)
	}
}

// One sandbox may open only so many connections a second: a burst beyond
// twice the rate is refused at once, however briefly each connection lives.
func TestConnectionRatePerSandbox(t *testing.T) {
	testenv.SkipIfShort(t, "runs in network namespaces of its own, as root")
	networld.Build(t)
	const rate, burst, tries = 2, 4, 40
	e := newConfiguredEgressEngine(t, "-rate", func(c *netpolicy.Config) {
		c.MaxConnections, c.NewConnectionsPerSecond, c.PoolSize = 1000, rate, 0
	})
	code := fmt.Sprintf("HOLD, CHURN = 0, %d\n", tries) + connectionsProbe
	res, err := e.eng.Exec(context.Background(), execapi.Request{Runtime: "python3.13", Network: execapi.NetworkEgress,
		Limits: execapi.Limits{TimeoutMS: 30000}, Code: code}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ok, refused int
	var seconds float64
	if _, err := fmt.Sscanf(res.Stdout, "held 0 []\nchurned %d [('ECONNREFUSED', %d)]\nseconds %g", &ok, &refused, &seconds); err != nil {
		t.Fatalf("probe said %q %q: %v", res.Stdout, res.Stderr, err)
	}
	// The burst passes at once, then the rate while the attempts go on
	// (measured inside the sandbox); the rest is refused.
	allowed := burst + int(math.Ceil(rate*seconds)) + 1
	if ok < burst || ok > allowed || ok+refused != tries {
		t.Errorf("%d connections opened in %.1f s: %d through, %d refused; want %d to %d through, the rest refused",
			tries, seconds, ok, refused, burst, allowed)
	}
}

// trackedFrom counts the host's conntrack entries whose original source
// address starts with prefix.
func trackedFrom(t *testing.T, prefix string) int {
	t.Helper()
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range flows {
		if strings.HasPrefix(f.Forward.SrcIP.String(), prefix) {
			n++
		}
	}
	return n
}
