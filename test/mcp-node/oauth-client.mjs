// The official TypeScript SDK's OAuth client against ScratchRun's /mcp, as
// a connector would use it: it gets a 401 with a challenge, finds the
// authorization server through the protected-resource metadata, registers
// (by dynamic registration, or with --cimd by a client ID metadata
// document), sends the person to sign in, exchanges the code (PKCE and the
// resource) and runs code. The browser part is the Go test's: this script
// prints where to go and waits on its own loopback callback.
//
//   node oauth-client.mjs URL [--cimd CLIENT_ID_URL] [--refresh] [--scope S]
//
// Lines on stdout, one fact each, for the test to read:
//   CALLBACK <redirect URI>        before anything else (a CIMD document must list it)
//   AUTHORIZE <url>                the test's browser goes there
//   RESULT <json>                  the tool's answer after sign-in
//   REFRESHED <json>               with --refresh: the answer after a refresh, and both refresh tokens
//   TOKENS <json>                  the tokens and client at the end
// Exits 0 on success; prints FAIL and exits 1 otherwise.
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const args = process.argv.slice(2);
const url = new URL(args[0]);
const flag = (name) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
};
const cimd = flag("--cimd");
const refresh = args.includes("--refresh");

function fail(msg) {
  console.log(`FAIL ${String(msg).replace(/\n/g, " | ")}`);
  process.exit(1);
}

// The loopback callback: the authorization server sends the browser here.
let gotCode;
const codeArrived = new Promise((resolve, reject) => (gotCode = { resolve, reject }));
const server = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  if (u.pathname !== "/callback") {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { "Content-Type": "text/html" }).end("<p>Signed in. You can close this tab.</p>");
  if (u.searchParams.get("error")) gotCode.reject(new Error(`authorization refused: ${u.searchParams.get("error")}: ${u.searchParams.get("error_description")}`));
  else gotCode.resolve({ code: u.searchParams.get("code"), iss: u.searchParams.get("iss"), state: u.searchParams.get("state") });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const redirectUrl = `http://127.0.0.1:${server.address().port}/callback`;
console.log(`CALLBACK ${redirectUrl}`);

let state;
const provider = {
  info: undefined,
  saved: undefined,
  verifier: undefined,
  get redirectUrl() {
    return redirectUrl;
  },
  clientMetadataUrl: cimd,
  get clientMetadata() {
    return {
      client_name: "ScratchRun OAuth test (TypeScript SDK)",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      // Ory Hydra answers a registration with "" and null for these when
      // they are not given, which the SDK's schema refuses.
      client_uri: "https://scratchrun.invalid/oauth-test",
      contacts: ["oauth-test@scratchrun.invalid"],
    };
  },
  state() {
    state = crypto.randomUUID();
    return state;
  },
  clientInformation() {
    return this.info;
  },
  saveClientInformation(info) {
    this.info = info;
  },
  tokens() {
    return this.saved;
  },
  saveTokens(t) {
    this.saved = t;
  },
  redirectToAuthorization(u) {
    console.log(`AUTHORIZE ${u.href}`);
  },
  saveCodeVerifier(v) {
    this.verifier = v;
  },
  codeVerifier() {
    return this.verifier;
  },
};

async function connected() {
  const client = new Client({ name: "scratchrun-oauth-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  return client;
}

async function run(client, text) {
  const res = await client.callTool({ name: "scratchrun_exec", arguments: { runtime: "bash", code: `echo ${text}` } });
  if (res.isError) fail(`tool call: ${JSON.stringify(res.content)}`);
  return res.structuredContent ?? res.content;
}

try {
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  const probe = new Client({ name: "scratchrun-oauth-test", version: "1.0.0" });
  try {
    await probe.connect(first);
    fail("connected without signing in");
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const { code, state: back } = await codeArrived;
  if (back !== state) fail(`state came back as ${back}, sent ${state}`);
  await first.finishAuth(code);
  let client = await connected();
  console.log(`RESULT ${JSON.stringify(await run(client, "oauth-ok"))}`);
  await client.close();

  if (refresh) {
    const before = provider.saved.refresh_token;
    // An access token the server no longer takes: the SDK must refresh.
    provider.saved = { ...provider.saved, access_token: "expired-or-revoked" };
    client = await connected();
    const answer = await run(client, "refreshed-ok");
    await client.close();
    console.log(`REFRESHED ${JSON.stringify({ answer, before, after: provider.saved.refresh_token })}`);
  }
  console.log(`TOKENS ${JSON.stringify({ tokens: provider.saved, client: provider.info })}`);
  server.close();
  process.exit(0);
} catch (e) {
  fail(e?.stack ?? String(e));
}
