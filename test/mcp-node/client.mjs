// A real MCP client that no one on the ScratchRun team wrote — the official
// TypeScript SDK — against `scratchrun mcp`: it lists the tools, checks the
// scratchrun_exec schema, runs Python that saves a matplotlib chart and checks
// that an image block holding a real PNG comes back. The SDK also validates
// structuredContent against the tool's declared output schema.
//
//   node client.mjs stdio /path/to/scratchrun
//   node client.mjs http http://127.0.0.1:8765/mcp TOKEN
//
// Exits 0 and prints "ok: ..." on success; prints what is wrong and exits 1
// otherwise. Environment variables (SCRATCHRUN_STATE_DIR and friends) pass
// through to the stdio server.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function fail(msg) {
  console.error(`FAIL (${mode}): ${msg}`);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) fail(msg);
}

const [mode, target, token] = process.argv.slice(2);
let transport;
if (mode === "stdio" && target) {
  transport = new StdioClientTransport({
    command: target,
    args: ["mcp"],
    env: { ...process.env },
    stderr: "inherit",
  });
} else if (mode === "http" && target) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  console.error("usage: node client.mjs stdio BINARY | node client.mjs http URL [TOKEN]");
  process.exit(2);
}

const client = new Client({ name: "scratchrun-node-test", version: "1.0.0" });
try {
  await client.connect(transport);

  const { tools } = await client.listTools();
  check(tools.length === 1 && tools[0].name === "scratchrun_exec", `tools/list: ${JSON.stringify(tools.map((t) => t.name))}`);
  const tool = tools[0];
  const props = tool.inputSchema.properties ?? {};
  const params = Object.keys(props).sort().join(",");
  check(params === "code,env,files,files_base64,memory_mb,network,return_files,runtime,timeout_ms", `parameters: ${params}`);
  // The newest Python comes first: it is the recommended default.
  check(Array.isArray(props.runtime.enum) && props.runtime.enum[0] === "python3.13", `runtime enum: ${JSON.stringify(props.runtime.enum)}`);
  check(tool.annotations?.readOnlyHint === false && tool.annotations?.destructiveHint === false, `annotations: ${JSON.stringify(tool.annotations)}`);
  check(tool.outputSchema?.type === "object", "no output schema");

  let progressCount = 0;
  const result = await client.callTool(
    {
      name: "scratchrun_exec",
      arguments: {
        runtime: "python3.13",
        code: [
          "import matplotlib.pyplot as plt",
          "fig, ax = plt.subplots()",
          "ax.plot([0, 1, 2, 3], [0, 1, 4, 9], marker='o')",
          "ax.set_title('squares from node')",
          "fig.savefig('/tmp/chart.png')",
          "print('chart saved')",
        ].join("\n"),
        return_files: ["/tmp/chart.png"],
      },
    },
    undefined,
    { timeout: 120000, onprogress: () => progressCount++ },
  );
  check(!result.isError, `tool error: ${JSON.stringify(result.content)}`);
  const text = result.content.find((c) => c.type === "text");
  check(text && text.text.includes("exit_code: 0") && text.text.includes("chart saved"), `text block: ${text?.text}`);
  const image = result.content.find((c) => c.type === "image");
  check(image, `no image block in ${JSON.stringify(result.content.map((c) => c.type))}`);
  check(image.mimeType === "image/png", `image MIME type ${image.mimeType}`);
  const png = Buffer.from(image.data, "base64");
  check(png.length > 1000 && png.subarray(0, 8).equals(PNG_MAGIC), `image data is not a PNG (${png.length} bytes, starts ${png.subarray(0, 8).toString("hex")})`);
  const sc = result.structuredContent;
  check(sc && sc.exit_code === 0 && sc.state_purged === true, `structuredContent: ${JSON.stringify(sc)}`);
  check(sc.files?.["/tmp/chart.png"]?.returned_as === "image", `structuredContent.files: ${JSON.stringify(sc.files)}`);

  // A bad argument is a tool error naming the field, not a protocol error.
  const bad = await client.callTool({ name: "scratchrun_exec", arguments: { runtime: "python3.13", code: "print(1)", timeout_ms: 999999 } });
  check(bad.isError === true && bad.content[0].text.includes("timeout_ms"), `bad timeout_ms: ${JSON.stringify(bad)}`);

  // Cancelling a call gets no response, as the MCP specification requires
  // (this SDK reports a late one as "a response for an unknown message ID"),
  // and the next call is served.
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message ?? e));
  const abort = new AbortController();
  const cancelled = await client
    .callTool({ name: "scratchrun_exec", arguments: { runtime: "bash", code: "echo running; sleep 20", timeout_ms: 30000 } }, undefined, {
      signal: abort.signal,
      timeout: 120000,
      onprogress: (p) => {
        if (p.message?.includes("running")) abort.abort("test cancels");
      },
    })
    .then(() => "resolved", () => "rejected");
  check(cancelled === "rejected", `cancelled call: ${cancelled}`);
  // The sandbox is killed within milliseconds; a response to the cancelled
  // call would come right after. Give it ample time, then a round trip.
  await new Promise((r) => setTimeout(r, 1500));
  const after = await client.callTool({ name: "scratchrun_exec", arguments: { runtime: "bash", code: "echo after" } });
  check(!after.isError && after.structuredContent?.stdout === "after\n", `call after the cancellation: ${JSON.stringify(after.content)}`);
  check(!errors.some((e) => e.includes("unknown message ID")), `a cancelled call got a response: ${errors.join("; ")}`);

  console.log(`ok: ${mode}: ${tools.length} tool, chart PNG ${png.length} bytes, ${progressCount} progress notifications, cancellation without response`);
} catch (err) {
  fail(err?.stack ?? String(err));
} finally {
  await client.close().catch(() => {});
}
