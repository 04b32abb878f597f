package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// syncBuffer collects a child's stderr for reading while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestMCPFlagsRefuseUnsafeSetups(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := t.TempDir()
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"mcp", "--http", "0.0.0.0:8765"}, "SCRATCHRUN_MCP_TOKEN"},
		{nil, []string{"mcp", "--http", ":8765"}, "no token"},
		{nil, []string{"mcp", "--http", "127.0.0.1:8765", "--token", "short"}, "at least 16"},
		{nil, []string{"mcp", "--token", "a-long-enough-token-123"}, "only applies with --http"},
		{nil, []string{"mcp", "--http", "nonsense"}, "HOST:PORT"},
		{nil, []string{"mcp", "extra"}, "unexpected argument"},
		{[]string{"SCRATCHRUN_API_KEY=sr_test_key", "SCRATCHRUN_API_URL=ftp://example"}, []string{"mcp"}, "SCRATCHRUN_API_URL"},
	}
	for _, c := range cases {
		cmd := exec.Command(binary, c.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), c.env...)
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: exit %d, output %q; want exit 2 mentioning %q", c.args, code, out, c.want)
		}
		if strings.Contains(string(out), "sr_test_key") {
			t.Errorf("%v: output shows the API key: %q", c.args, out)
		}
	}
}

// stdioSession starts `scratchrun mcp` as a desktop client does and connects
// the Go SDK's client to it.
func stdioSession(t *testing.T, env []string, opts *mcp.ClientOptions) (*mcp.ClientSession, *exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(binary, "mcp")
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to scratchrun mcp: %v (stderr %q)", err, stderr.String())
	}
	return cs, cmd, stderr
}

// A desktop client that quits (closes stdin) while code runs: the server
// kills the sandbox, waits for its teardown and exits cleanly, leaving
// nothing behind. It is driven with raw JSON-RPC lines (the Go SDK's client
// would wait for the call before closing), which also shows that stdout
// carries nothing but protocol messages.
func TestMCPStdioClientQuitsMidRun(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	cmd := exec.Command(binary, "mcp")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()

	send := func(msg string) {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatalf("write %s: %v", msg, err)
		}
	}
	lines := make(chan map[string]any, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["jsonrpc"] != "2.0" {
				t.Errorf("stdout carried a line that is not JSON-RPC: %q", sc.Text())
				continue
			}
			lines <- m
		}
		close(lines)
	}()
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"scratchrun_exec","_meta":{"progressToken":"p"},` +
		`"arguments":{"runtime":"bash","code":"echo in flight; sleep 25","timeout_ms":30000}}}`)
	deadline := time.After(30 * time.Second)
	for running := false; !running; {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("stdout closed early (stderr %q)", stderr.String())
			}
			if m["method"] == "notifications/progress" {
				params, _ := m["params"].(map[string]any)
				msg, _ := params["message"].(string)
				running = strings.Contains(msg, "in flight")
			}
		case <-deadline:
			t.Fatalf("the run never showed progress (stderr %q)", stderr.String())
		}
	}
	start := time.Now()
	stdin.Close()
	select {
	case <-exited:
	case <-time.After(20 * time.Second): // the program would run 25 s more
		t.Fatalf("scratchrun mcp still running %v after stdin closed", time.Since(start))
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("scratchrun mcp exited %d after stdin closed (stderr %q)", code, stderr.String())
	}
	t.Logf("scratchrun mcp exited %v after stdin closed", time.Since(start))
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// Remote mode with the server down: the binary still starts and serves the
// tool; a call is a tool error that names the URL, and the key shows nowhere.
func TestMCPRemoteServerDown(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	const key = "sr_live_this-key-must-never-show-0123456789"
	cs, _, stderr := stdioSession(t, []string{"SCRATCHRUN_API_KEY=" + key, "SCRATCHRUN_API_URL=" + url, "SCRATCHRUN_DEBUG=1"}, nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 || !strings.Contains(tools.Tools[0].Description, url) {
		t.Fatalf("tools/list with the server down: %v %+v", err, tools)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "scratchrun_exec",
		Arguments: map[string]any{"runtime": "bash", "code": "echo hi"}})
	if err != nil || !res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	msg := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(msg, "Cannot reach the ScratchRun server at "+url) {
		t.Errorf("tool error %q does not name the URL", msg)
	}
	cs.Close()
	if strings.Contains(msg+tools.Tools[0].Description+stderr.String(), key) {
		t.Errorf("the API key shows in a message or log")
	}
}
