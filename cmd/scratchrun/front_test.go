package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// `scratchrun serve --metrics-addr`: the API's /metrics needs a key once
// keys exist (it answered anyone, although the README said every endpoint
// was behind keys); the metrics listener serves /metrics alone without one,
// for Prometheus; and it is refused beyond loopback unless the operator says
// so.
func TestServeMetricsAddr(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	db := filepath.Join(t.TempDir(), "keys.db")
	key := createKey(t, db, "metrics")
	p := startServe(t, "--db", db, "--metrics-addr", "127.0.0.1:0")
	metricsURL := p.waitLog(t, regexp.MustCompile(`metrics \(no key\) at (http://127\.0\.0\.1:\d+)/metrics`))

	if s, _, err := httpCall(http.MethodGet, p.url+"/metrics", "", ""); err != nil || s != http.StatusUnauthorized {
		t.Errorf("API /metrics without a key: %d %v", s, err)
	}
	if s, body, err := httpCall(http.MethodGet, p.url+"/metrics", key, ""); err != nil || s != 200 || !strings.Contains(body, "scratchrun_capacity") {
		t.Errorf("API /metrics with the key: %d %v", s, err)
	}
	if s, body, err := httpCall(http.MethodGet, metricsURL+"/metrics", "", ""); err != nil || s != 200 || !strings.Contains(body, "scratchrun_capacity") {
		t.Errorf("metrics listener without a key: %d %v", s, err)
	}
	if s, _, err := httpCall(http.MethodGet, metricsURL+"/v1/runtimes", "", ""); err != nil || s != http.StatusNotFound {
		t.Errorf("the metrics listener serves more than /metrics: /v1/runtimes %d %v", s, err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if s, _, err := httpCall(http.MethodGet, p.url+path, "", ""); err != nil || s != 200 {
			t.Errorf("%s without a key: %d %v", path, s, err)
		}
	}
	p.stop(t)

	r := scratchrun(t, t.TempDir(), "", "serve", "--addr", "127.0.0.1:0", "--db", db, "--metrics-addr", "0.0.0.0:0")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--allow-public-metrics") {
		t.Errorf("--metrics-addr 0.0.0.0:0: exit %d %q, want exit 2 naming --allow-public-metrics", r.code, r.stderr)
	}
	r = scratchrun(t, t.TempDir(), "", "serve", "--addr", "127.0.0.1:0", "--db", db, "--max-conns", "-1")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--max-conns") {
		t.Errorf("--max-conns -1: exit %d %q", r.code, r.stderr)
	}
}

// `scratchrun mcp --http` shares serve's bounded server: a client without
// the token that sends a head and stalls gets its 401 at once and is
// disconnected (the 401 never came: net/http waited for the body), a
// foreign Origin is refused with 403 as MCP requires, and connections beyond
// --max-conns wait until one closes.
func TestMCPHTTPIsBounded(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	const token = "a-long-enough-token-0123456789"
	cmd := exec.Command(binary, "mcp", "--http", "127.0.0.1:0", "--max-conns", "3")
	cmd.Env = append(os.Environ(), "SCRATCHRUN_MCP_TOKEN="+token, "SCRATCHRUN_POOL_FLOOR=0")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	serving := regexp.MustCompile(`at http://(127\.0\.0\.1:\d+)/mcp`)
	var addr string
	for deadline := time.Now().Add(60 * time.Second); addr == ""; {
		if m := serving.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("mcp --http did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	io.WriteString(stalled, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{")
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, _ := bufio.NewReader(stalled).ReadString('\n')
	if !strings.Contains(status, "401") {
		t.Errorf("a stalled client without the token got %q, want a 401 at once", strings.TrimSpace(status))
	}
	if _, err := io.Copy(io.Discard, stalled); err != nil {
		t.Errorf("the stalled client's connection was not closed after its 401: %v", err)
	}

	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign Origin: %v %v, want 403", statusOf(resp), err)
	} else {
		resp.Body.Close()
	}

	// Three connections held (nothing sent) fill the cap of 3.
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/mcp")
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case s := <-answered:
		t.Fatalf("a fourth connection was answered (%d) with the cap of 3 full", s)
	case <-time.After(500 * time.Millisecond): // a server without a cap answers in milliseconds
	}
	held[0].Close()
	select {
	case s := <-answered:
		if s != http.StatusUnauthorized {
			t.Errorf("the fourth connection, once one closed: %d, want 401 (no token)", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fourth connection was not served after one closed")
	}
}

func statusOf(resp *http.Response) any {
	if resp == nil {
		return nil
	}
	return resp.StatusCode
}
