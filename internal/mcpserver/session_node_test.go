package mcpserver

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/mcpnode"
)

// sessionNodeScript drives the session tools with the official TypeScript
// SDK (test/mcp-node's, from the npm registry): its client parses the tool
// list with its own schemas and checks each structuredContent against the
// tool's output schema, which our Go client does not.
const sessionNodeScript = `
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const fail = (m) => { console.error("FAIL: " + m); process.exit(1); };
const client = new Client({ name: "scratchrun-sessions-test", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[1])));
const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort().join(",");
if (names !== "scratchrun_exec,scratchrun_session_close,scratchrun_session_open,scratchrun_session_run") fail("tools: " + names);
const open = await client.callTool({ name: "scratchrun_session_open", arguments: { runtime: "python3.13" } });
if (open.isError) fail("open: " + JSON.stringify(open.content));
const id = open.structuredContent.session_id;
await client.callTool({ name: "scratchrun_session_run", arguments: { session_id: id, code: "set x=1" } });
const run = await client.callTool({ name: "scratchrun_session_run",
  arguments: { session_id: id, code: "png /tmp/c.png", return_files: ["/tmp/c.png"] } });
if (run.isError || run.content[1]?.type !== "image" || run.structuredContent.session.interpreter !== "kept") fail("run: " + JSON.stringify(run));
const close = await client.callTool({ name: "scratchrun_session_close", arguments: { session_id: id } });
if (close.isError || close.structuredContent.state_purged !== true) fail("close: " + JSON.stringify(close));
const after = await client.callTool({ name: "scratchrun_session_run", arguments: { session_id: id, code: "get x" } });
if (!after.isError) fail("run after close: " + JSON.stringify(after));
await client.close();
console.log("ok: sessions");
`

// The official TypeScript SDK's client accepts the session tools' list
// and every result of open, run (with an image) and close.
func TestSessionToolsWithTypeScriptSDK(t *testing.T) {
	testenv.SkipIfShort(t, "runs node")
	dir := mcpnode.Dir(t)
	srv := httptest.NewServer(HTTPHandler(newFakeSessions(true), Options{}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--input-type=module", "-e", sessionNodeScript, srv.URL)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: sessions") {
		t.Fatalf("TypeScript SDK client: %v\n%s", err, out)
	}
}
