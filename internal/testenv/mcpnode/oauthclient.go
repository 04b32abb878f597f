package mcpnode

import (
	"bufio"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// OAuthClient is test/mcp-node/oauth-client.mjs running: the TypeScript
// SDK's OAuth client, whose stdout lines the test reads as they come.
type OAuthClient struct {
	t     testing.TB
	lines chan string
	done  chan error
	seen  []string
}

// StartOAuthClient runs the script against an MCP URL.
func StartOAuthClient(t testing.TB, mcpURL string, args ...string) *OAuthClient {
	t.Helper()
	dir := Dir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, "node", append([]string{"oauth-client.mjs", mcpURL}, args...)...)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &OAuthClient{t: t, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			n.lines <- sc.Text()
		}
		close(n.lines)
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			t.Logf("oauth-client.mjs stderr:\n%s", stderr.String())
		}
		n.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-n.done
	})
	return n
}

// Next returns the rest of the next line that starts with prefix+" ",
// failing the test on a FAIL line, on the script's end or after a minute.
func (n *OAuthClient) Next(prefix string) string {
	n.t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-n.lines:
			if !ok {
				n.t.Fatalf("oauth-client.mjs ended before %s; it said:\n%s", prefix, strings.Join(n.seen, "\n"))
			}
			n.seen = append(n.seen, l)
			if strings.HasPrefix(l, "FAIL") {
				n.t.Fatalf("oauth-client.mjs: %s", l)
			}
			if rest, ok := strings.CutPrefix(l, prefix+" "); ok {
				return rest
			}
		case <-timeout:
			n.t.Fatalf("no %s line from oauth-client.mjs within 90 s; it said:\n%s", prefix, strings.Join(n.seen, "\n"))
		}
	}
}

// Wait waits for the script to exit 0.
func (n *OAuthClient) Wait() {
	n.t.Helper()
	for l := range n.lines {
		n.seen = append(n.seen, l)
		if strings.HasPrefix(l, "FAIL") {
			n.t.Fatalf("oauth-client.mjs: %s", l)
		}
	}
	if err := <-n.done; err != nil {
		n.t.Fatalf("oauth-client.mjs: %v; it said:\n%s", err, strings.Join(n.seen, "\n"))
	}
	n.done <- nil
}

// Deliver plays the browser's last step: the authorization server's
// redirect back to the client's loopback callback.
func Deliver(t testing.TB, callback, query string) {
	t.Helper()
	resp, err := http.Get(callback + "?" + query)
	if err != nil {
		t.Fatalf("deliver the code to the client's callback: %v", err)
	}
	resp.Body.Close()
}
