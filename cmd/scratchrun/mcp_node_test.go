package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/mcpnode"
)

// Real MCP clients no one on the team wrote, against the real binary: the
// official TypeScript SDK (test/mcp-node/client.mjs) over stdio and over
// Streamable HTTP, and the MCP Inspector's CLI mode. They come from the npm
// registry (test/mcp-node/package-lock.json); node and npm must be installed
// (scripts/test.sh runs `npm ci`; a missing node fails these tests).

// nodeProject returns test/mcp-node with its dependencies installed.
func nodeProject(t *testing.T) string { return mcpnode.Dir(t) }

// runNode runs a command in the node project with the test's environment
// (state directory and cgroup parent of this test run) and a time bound.
func runNode(t *testing.T, dir string, extraEnv []string, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestNodeSDKClientOverStdio(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := nodeProject(t)
	out, errOut, err := runNode(t, dir, nil, "node", "client.mjs", "stdio", binary)
	if err != nil || !strings.HasPrefix(out, "ok: stdio") {
		t.Fatalf("node client over stdio: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	t.Log(strings.TrimSpace(out))
}

func TestNodeSDKClientOverStreamableHTTP(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := nodeProject(t)
	const token = "node-client-test-token-0123456789"
	url, stopServer := startMCPHTTP(t, token)
	out, errOut, err := runNode(t, dir, nil, "node", "client.mjs", "http", url, token)
	if err != nil || !strings.HasPrefix(out, "ok: http") {
		t.Fatalf("node client over Streamable HTTP: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	t.Log(strings.TrimSpace(out))
	// Without the token the same client is turned away.
	out, _, err = runNode(t, dir, nil, "node", "client.mjs", "http", url)
	if err == nil || strings.HasPrefix(out, "ok:") {
		t.Errorf("client without the token succeeded: %s", out)
	}
	if code := stopServer(); code != 0 {
		t.Errorf("scratchrun mcp --http exited %d after SIGTERM", code)
	}
}

func TestMCPInspectorCLI(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := nodeProject(t)
	env := []string{"MCP_CATALOG_PATH=" + filepath.Join(t.TempDir(), "catalog.json")}
	serverEnv := []string{"-e", "SCRATCHRUN_STATE_DIR=" + stateDir, "-e", "SCRATCHRUN_CGROUP_PARENT=" + cgroupParent}
	inspector := append([]string{"--no-install", "@modelcontextprotocol/inspector", "--cli"}, serverEnv...)

	args := append(append([]string{}, inspector...), binary, "mcp", "--method", "tools/call", "--tool-name", "scratchrun_exec",
		"--tool-arg", "runtime=python3.13", "--tool-arg", "code=import sys; print(6*7); print(sys.version_info[:2])")
	out, errOut, err := runNode(t, dir, env, "npx", args...)
	if err != nil {
		t.Fatalf("inspector tools/call: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		IsError           bool           `json:"isError"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("inspector output is not a tool result: %v\n%s", err, out)
	}
	if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "exit_code: 0") ||
		!strings.Contains(res.Content[0].Text, "42\n(3, 13)") || res.StructuredContent["stdout"] != "42\n(3, 13)\n" {
		t.Errorf("inspector tools/call result:\n%s", out)
	}

	// The inspector's portability check of the tool's schemas.
	args = append(append([]string{}, inspector...), binary, "mcp", "--method", "tools/list", "--strict")
	out, errOut, err = runNode(t, dir, env, "npx", args...)
	if err != nil || !strings.Contains(out, "scratchrun_exec") {
		t.Errorf("inspector tools/list --strict: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
}

var listeningLine = regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/mcp)`)

// startMCPHTTP starts `scratchrun mcp --http 127.0.0.1:0` with a token and
// flags, and returns its URL and a function that stops it with SIGTERM and
// returns its exit status.
func startMCPHTTP(t *testing.T, token string, flags ...string) (string, func() int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"mcp", "--http", "127.0.0.1:0"}, flags...)...)
	cmd.Env = append(os.Environ(), "SCRATCHRUN_MCP_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	exited := make(chan int, 1)
	go func() {
		cmd.Wait()
		exited <- cmd.ProcessState.ExitCode()
	}()
	stop := sync.OnceValue(func() int {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case code := <-exited:
			return code
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("scratchrun mcp --http did not exit after SIGTERM")
			return <-exited
		}
	})
	select {
	case url := <-found:
		t.Cleanup(func() { stop() })
		return url, stop
	case code := <-exited:
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("scratchrun mcp --http exited %d before listening:\n%s", code, log.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("scratchrun mcp --http did not report its address")
	}
	return "", nil
}
