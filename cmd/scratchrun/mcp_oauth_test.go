package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/oauthclient/oauthtest"
)

// oauthSession starts `scratchrun mcp` (this test binary as the command)
// as a desktop client does, with env, and connects the SDK's client to it.
func oauthSession(t *testing.T, env []string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = append(append(os.Environ(), asCLIEnv+"=1"), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to scratchrun mcp: %v (stderr %q)", err, stderr.String())
	}
	return cs, stderr
}

func callEcho(t *testing.T, cs *mcp.ClientSession, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools/list: %v %+v (stderr %q)", err, tools, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
		t.Fatalf("echo: %v %+v (stderr %q)", err, res, stderr.String())
	}
}

// `scratchrun mcp` with SCRATCHRUN_API_URL and no key is the server's
// tools, signed in with OAuth: the first run signs in through the browser
// ($BROWSER, here curl following the redirects) and prints the stable
// sign-in line; the grant is a 0600 file in SCRATCHRUN_OAUTH_DIR; the next
// run needs no browser; `scratchrun logout` forgets it.
func TestMCPSignsInWithOAuth(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl to stand for the browser")
	}
	ts := oauthtest.NewServer(t)
	dir := filepath.Join(t.TempDir(), "oauth")
	env := []string{"SCRATCHRUN_API_URL=" + ts.URL, "SCRATCHRUN_API_KEY=", "SCRATCHRUN_OAUTH_STORE=file", "SCRATCHRUN_OAUTH_DIR=" + dir}

	cs, stderr := oauthSession(t, append(env, "BROWSER="+curl+" -sfL -o /dev/null"))
	callEcho(t, cs, stderr)
	cs.Close()
	if !strings.Contains(stderr.String(), "scratchrun mcp: sign in at "+ts.URL+"/authorize?") {
		t.Errorf("stderr lacks the sign-in line: %q", stderr.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("grant files %v; want one", files)
	}
	if info, err := os.Stat(files[0]); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("grant file: %v %v; want mode 0600", err, info.Mode())
	}

	// `false` as the browser: any sign-in would fail.
	cs, stderr = oauthSession(t, append(env, "BROWSER=false"))
	callEcho(t, cs, stderr)
	cs.Close()
	if strings.Contains(stderr.String(), "sign in at") || len(ts.Registrations()) != 1 {
		t.Errorf("the second run signed in again (%d registrations): %q", len(ts.Registrations()), stderr.String())
	}

	r := asCLI(t, env, "logout")
	if r.code != 0 || !strings.Contains(r.stderr, ts.URL+"/mcp") {
		t.Errorf("logout: exit %d, %q", r.code, r.stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 0 {
		t.Errorf("logout left %v", files)
	}
}

// The sign-in's settings are checked before anything starts.
func TestMCPOAuthSettingsRefused(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"SCRATCHRUN_API_URL=https://srv.example"}, []string{"mcp", "--http", "127.0.0.1:0"}, "for stdio"},
		{[]string{"SCRATCHRUN_API_URL=https://srv.example", "SCRATCHRUN_OAUTH_CLIENT_METADATA_URL=http://app.example/client.json", "SCRATCHRUN_OAUTH_CALLBACK_PORT=8976"}, []string{"mcp"}, "https with a path"},
		{[]string{"SCRATCHRUN_API_URL=https://srv.example", "SCRATCHRUN_OAUTH_CLIENT_METADATA_URL=https://app.example/client.json"}, []string{"mcp"}, "SCRATCHRUN_OAUTH_CALLBACK_PORT"},
		{[]string{"SCRATCHRUN_API_URL=https://srv.example", "SCRATCHRUN_OAUTH_STORE=vault"}, []string{"mcp"}, "SCRATCHRUN_OAUTH_STORE"},
		{[]string{"SCRATCHRUN_API_URL=https://srv.example", "SCRATCHRUN_OAUTH_CALLBACK_PORT=70000"}, []string{"mcp"}, "SCRATCHRUN_OAUTH_CALLBACK_PORT"},
		{[]string{"SCRATCHRUN_API_URL="}, []string{"logout"}, "name the server"},
		{nil, []string{"logout", "ftp://srv.example"}, "not an http(s) URL"},
		{nil, []string{"logout", "https://a.example", "https://b.example"}, "unexpected argument"},
	} {
		r := asCLI(t, append([]string{"SCRATCHRUN_API_KEY=", "SCRATCHRUN_OAUTH_DIR=" + t.TempDir()}, c.env...), c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v %v: exit %d, %q; want exit 2 mentioning %q", c.env, c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestMCPEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"https://srv.example":           "https://srv.example/mcp",
		"https://srv.example/":          "https://srv.example/mcp",
		"https://srv.example/mcp":       "https://srv.example/mcp",
		"https://srv.example/sr/":       "https://srv.example/sr/mcp",
		"http://127.0.0.1:8722?x=1#top": "http://127.0.0.1:8722/mcp",
	} {
		if got, err := mcpEndpoint(in); err != nil || got != want {
			t.Errorf("mcpEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
