package console

import (
	"encoding/json"
	"strings"
)

// snippet is one client's configuration for a new key, as docs/mcp-clients.md
// gives it, with this server's URL and the key filled in.
type snippet struct {
	Client string `json:"client"`
	// Where says where the text goes.
	Where string `json:"where"`
	Text  string `json:"text"`
}

// snippets are the MCP client configurations of docs/mcp-clients.md
// (section "Client configurations") and the README's curl example (its
// quick start; also docs/api.md) for a server at base, with the key filled
// in where those pages write one ("sr_live_..."); where a page
// reads the key from the environment (${SCRATCHRUN_API_KEY}, or a prompt),
// it still does, so that files meant to be shared hold no key.
func snippets(base, key string) []snippet {
	mcpURL := base + "/mcp"
	q := func(s string) string { // a JSON string
		b, _ := json.Marshal(s)
		return string(b)
	}
	remoteArgs := `"-y", "mcp-remote", ` + q(mcpURL) + `, "--header", "Authorization:${SCRATCHRUN_AUTH}"`
	if strings.HasPrefix(base, "http://") {
		remoteArgs += `, "--allow-http"`
	}
	return []snippet{
		{"Claude Code", "a shell", "claude mcp add --transport http scratchrun " + shellQuote(mcpURL) +
			" --header " + shellQuote("Authorization: Bearer "+key)},
		{"Claude Code (stdio, through scratchrun on Linux)", "a shell",
			"claude mcp add --transport stdio --env " + shellQuote("SCRATCHRUN_API_KEY="+key) + " --env " +
				shellQuote("SCRATCHRUN_API_URL="+base) + " scratchrun -- scratchrun mcp"},
		{"Claude Desktop on Linux", "claude_desktop_config.json",
			`{ "mcpServers": { "scratchrun": { "command": "/usr/local/bin/scratchrun", "args": ["mcp"],` + "\n" +
				`  "env": { "SCRATCHRUN_API_KEY": ` + q(key) + `, "SCRATCHRUN_API_URL": ` + q(base) + ` } } } }`},
		{"Claude Desktop on macOS or Windows (mcp-remote)", "claude_desktop_config.json",
			`{ "mcpServers": { "scratchrun": { "command": "npx",` + "\n" +
				`  "args": [` + remoteArgs + `],` + "\n" +
				`  "env": { "SCRATCHRUN_AUTH": ` + q("Bearer "+key) + ` } } } }`},
		{"Project .mcp.json (Claude Code; the key from SCRATCHRUN_API_KEY)", ".mcp.json",
			`{ "mcpServers": {` + "\n" +
				`  "scratchrun-remote": { "type": "http", "url": ` + q(mcpURL) + `,` + "\n" +
				`    "headers": { "Authorization": "Bearer ${SCRATCHRUN_API_KEY}" } } } }`},
		{"VS Code (the key asked for once, kept as a secret)", ".vscode/mcp.json",
			`{` + "\n" +
				`  "inputs": [` + "\n" +
				`    { "type": "promptString", "id": "scratchrun-api-key", "description": "ScratchRun API key", "password": true }` + "\n" +
				`  ],` + "\n" +
				`  "servers": {` + "\n" +
				`    "scratchrun-remote": { "type": "http", "url": ` + q(mcpURL) + `,` + "\n" +
				`      "headers": { "Authorization": "Bearer ${input:scratchrun-api-key}" } }` + "\n" +
				`  }` + "\n" +
				`}`},
		{"Cursor (the key from SCRATCHRUN_API_KEY)", "~/.cursor/mcp.json or .cursor/mcp.json",
			`{ "mcpServers": {` + "\n" +
				`  "scratchrun-remote": { "url": ` + q(mcpURL) + `,` + "\n" +
				`    "headers": { "Authorization": "Bearer ${env:SCRATCHRUN_API_KEY}" } } } }`},
		{"Windsurf (the key from SCRATCHRUN_API_KEY)", "~/.codeium/windsurf/mcp_config.json",
			`{ "mcpServers": {` + "\n" +
				`  "scratchrun-remote": { "serverUrl": ` + q(mcpURL) + `,` + "\n" +
				`    "headers": { "Authorization": "Bearer ${env:SCRATCHRUN_API_KEY}" } } } }`},
		{"Environment (for the snippets above that read it, and scratchrun mcp)", "a shell",
			"export SCRATCHRUN_API_KEY=" + shellQuote(key) + "\nexport SCRATCHRUN_API_URL=" + shellQuote(base)},
		{"curl", "a shell",
			"curl -s " + shellQuote(base+"/v1/exec") + ` \` + "\n" +
				"  -H " + shellQuote("Authorization: Bearer "+key) + ` -H "Content-Type: application/json" \` + "\n" +
				`  -d '{"runtime": "python3.13", "code": "print(1)"}'`},
	}
}

// shellQuote quotes s for a POSIX shell, unless it needs none.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
