package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slack is what a bound may be exceeded by on this machine before a test
// calls it broken: scheduling on a loaded 2-core VM, not a design margin.
const slack = 5 * time.Second

// slowConn is a raw client connection that sends a request head (and maybe
// part of a body) and then holds, as an attacker's would.
type slowConn struct {
	name string
	conn net.Conn
}

func dialSlow(t *testing.T, url, name, head string) *slowConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatalf("%s: dial: %v", name, err)
	}
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatalf("%s: write: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &slowConn{name: name, conn: conn}
}

// closedWithin reads what the server sends until it closes the connection
// and reports the status line (if any) and how long the close took; a
// connection still open at the bound fails the test.
func (s *slowConn) closedWithin(t *testing.T, bound time.Duration) (status string, took time.Duration) {
	t.Helper()
	start := time.Now()
	s.conn.SetReadDeadline(start.Add(bound))
	r := bufio.NewReader(s.conn)
	line, _ := r.ReadString('\n')
	_, err := io.Copy(io.Discard, r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("%s: still open %v after it stalled (status %q)", s.name, bound, strings.TrimSpace(line))
	}
	return strings.TrimSpace(line), time.Since(start)
}

// Clients that send a head and then stall (a huge Content-Length and one
// byte, a trickle that never ends, headers never finished) cannot hold the
// server: with no key they get their 401 at once and the connection closes;
// otherwise the connection is closed at the configured body or header
// deadline. Meanwhile /healthz and keyed calls are answered. Before, the
// 401 was never written (net/http drained the body with no deadline) and
// ~20,000 such connections took the server offline.
func TestStalledClientsAreCutOff(t *testing.T) {
	const bodyTimeout, headerTimeout = 1500 * time.Millisecond, 1500 * time.Millisecond
	ts := startServer(t, serverOptions{mcp: true, conns: ConnLimits{BodyTimeout: bodyTimeout, HeaderTimeout: headerTimeout}, fake: scripted()})
	_, key := ts.key("alice", 1000, 4)
	host := strings.TrimPrefix(ts.URL, "http://")
	head := func(method, path, auth string, length int, extra string) string {
		h := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, host, length)
		if auth != "" {
			h += "Authorization: Bearer " + auth + "\r\n"
		}
		return h + "\r\n" + extra
	}
	const perKind = 6
	var unkeyed, keyed, headless, healthz []*slowConn
	for i := range perKind {
		unkeyed = append(unkeyed, dialSlow(t, ts.URL, fmt.Sprintf("unkeyed POST /v1/exec #%d", i), head("POST", "/v1/exec", "", 200000, "{")))
		unkeyed = append(unkeyed, dialSlow(t, ts.URL, fmt.Sprintf("unkeyed POST /mcp #%d", i), head("POST", "/mcp", "", 200000, "{")))
		keyed = append(keyed, dialSlow(t, ts.URL, fmt.Sprintf("keyed half body #%d", i), head("POST", "/v1/exec", key, 200000, `{"runtime": "bash", `)))
		headless = append(headless, dialSlow(t, ts.URL, fmt.Sprintf("unfinished headers #%d", i), "POST /v1/exec HTTP/1.1\r\nHost: "+host+"\r\n"))
		healthz = append(healthz, dialSlow(t, ts.URL, fmt.Sprintf("GET /healthz with a body it never sends #%d", i), head("GET", "/healthz", "", 200000, "x")))
	}
	// One keyed client trickles a byte at a time and never finishes.
	trickle := dialSlow(t, ts.URL, "keyed trickle", head("POST", "/v1/exec", key, 200000, "{"))
	stopTrickle := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
				if _, err := trickle.conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	defer func() { close(stopTrickle); wg.Wait() }()

	// While all of them hold: the server answers others.
	if a, err := ts.do(context.Background(), http.MethodGet, "/healthz", "", nil, nil); err != nil || a.status != http.StatusOK {
		t.Errorf("/healthz while stalled clients hold: %v %d", err, a.status)
	}
	if a := ts.post(key, `{"runtime": "bash", "code": "echo served"}`); a.status != http.StatusOK || !strings.Contains(string(a.body), "served") {
		t.Errorf("keyed call while stalled clients hold: %d %s", a.status, a.body)
	}

	for _, c := range unkeyed {
		if status, took := c.closedWithin(t, slack); !strings.Contains(status, "401") || took > slack {
			t.Errorf("%s: %q after %v, want a 401 and a close at once", c.name, status, took)
		}
	}
	for _, c := range append(append(keyed, headless...), healthz...) {
		c.closedWithin(t, max(bodyTimeout, headerTimeout)+slack)
	}
	trickle.closedWithin(t, bodyTimeout+slack)
	if t.Failed() {
		return
	}
	// And after them the server is whole.
	if a := ts.post(key, `{"runtime": "bash", "code": "echo still"}`); a.status != http.StatusOK {
		t.Errorf("keyed call after the stalled clients: %d %s", a.status, a.body)
	}
}

// Connections beyond the cap wait (in the kernel's accept queue) and are
// served as soon as one closes: the server never holds more at once.
// Before, there was no cap at all.
func TestConnectionCap(t *testing.T) {
	const limit = 4
	ts := startServer(t, serverOptions{conns: ConnLimits{MaxConns: limit, HeaderTimeout: time.Minute}, fake: scripted()})
	var held []net.Conn
	for range limit {
		// Connected, not a byte sent: each holds a connection until the
		// header timeout, a minute here.
		c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	answered := make(chan answer, 1)
	go func() {
		a, _ := ts.do(context.Background(), http.MethodGet, "/healthz", "", nil, nil)
		answered <- a
	}()
	// A negative can only be watched for a while: a server without a cap
	// answers within milliseconds.
	select {
	case a := <-answered:
		t.Fatalf("/healthz answered (%d) with %d connections held and a cap of %d", a.status, limit, limit)
	case <-time.After(500 * time.Millisecond):
	}
	held[0].Close()
	select {
	case a := <-answered:
		if a.status != http.StatusOK {
			t.Errorf("/healthz after a connection closed: %d", a.status)
		}
	case <-time.After(slack):
		t.Fatal("/healthz not answered after one held connection closed")
	}
}

// The default cap follows the descriptor limit: half of it, within bounds.
func TestDefaultMaxConns(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	want := int(min(max(lim.Cur/2, 16), 4096))
	if got := DefaultMaxConns(); got != want {
		t.Errorf("DefaultMaxConns() = %d with RLIMIT_NOFILE %d, want %d", got, lim.Cur, want)
	}
}
