package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// mcp-remote (from npm, the version the README names), the fallback for
// clients that take neither a command nor OAuth, signs in through the
// built-in authorization server: it registers, prints where to sign in,
// and once the person has consented in a real browser it proxies stdio
// to /mcp and the tool runs.
func TestMCPRemoteSignsInWithBuiltInOAuth(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, a browser and node")
	remote, err := filepath.Abs("../../packaging/mcpb/node_modules/.bin/mcp-remote")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(remote); err != nil {
		t.Fatalf("mcp-remote is not installed (npm ci in packaging/mcpb; scripts/test.sh does): %v", err)
	}
	db := filepath.Join(t.TempDir(), "keys.db")
	apiKey := createKey(t, db, "remote-user")
	srv := startServeEnv(t, []string{"SCRATCHRUN_OAUTH=builtin"}, "--db", db)

	cmd := exec.Command(remote, srv.url+"/mcp")
	// Its tokens go to a folder of the test's; the browser is the test's.
	cmd.Env = append(os.Environ(), "MCP_REMOTE_CONFIG_DIR="+t.TempDir(), "BROWSER=true")
	errR, errW := io.Pipe()
	cmd.Stderr = errW
	signIn := make(chan string, 1)
	var mu sync.Mutex
	var said strings.Builder
	go func() {
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		asked := false // the URL follows the request, on its line or the next
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			said.WriteString(line + "\n")
			mu.Unlock()
			if _, rest, ok := strings.Cut(line, "Please authorize this client by visiting:"); ok {
				asked, line = true, rest
			}
			if u := strings.TrimSpace(line); asked && strings.HasPrefix(u, "http") {
				asked = false
				select {
				case signIn <- u:
				default:
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type connected struct {
		cs  *mcp.ClientSession
		err error
	}
	conn := make(chan connected, 1)
	go func() {
		client := mcp.NewClient(&mcp.Implementation{Name: "mcp-remote-oauth-test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		conn <- connected{cs, err}
	}()
	stderr := func() string { mu.Lock(); defer mu.Unlock(); return said.String() }

	var authURL string
	select {
	case authURL = <-signIn:
	case c := <-conn:
		t.Fatalf("mcp-remote connected (%v) without asking to sign in:\n%s", c.err, stderr())
	case <-time.After(90 * time.Second):
		t.Fatalf("mcp-remote did not ask to sign in within 90 s:\n%s", stderr())
	}
	if !strings.HasPrefix(authURL, srv.url+"/oauth/authorize?") {
		t.Fatalf("mcp-remote sends the person to %s", authURL)
	}
	b := startBrowser(t, 1000, 800)
	b.do("consent for mcp-remote", chromedp.Navigate(authURL), chromedp.WaitVisible(chromedp.CSS("#api_key")),
		chromedp.SendKeys(chromedp.CSS("#api_key"), apiKey), chromedp.Click(chromedp.CSS("#allow")))
	var c connected
	select {
	case c = <-conn:
	case <-time.After(90 * time.Second):
		t.Fatalf("mcp-remote did not connect within 90 s of consent:\n%s", stderr())
	}
	if c.err != nil {
		t.Fatalf("mcp-remote: %v\n%s", c.err, stderr())
	}
	defer c.cs.Close()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo remote-$((6*7))"}})
	if err != nil || res.IsError {
		t.Fatalf("tool call through mcp-remote: %v %+v\n%s", err, res, stderr())
	}
	var text strings.Builder
	for _, content := range res.Content {
		if tc, ok := content.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !strings.Contains(text.String(), "remote-42") {
		t.Fatalf("the result does not carry the run's output: %s", text.String())
	}
	b.stop()
}
