// Package mcpnode runs the real MCP clients of test/mcp-node (the official
// TypeScript SDK and its OAuth client, from the npm registry through that
// directory's lock file) for tests of any package. Node.js 20 or later and
// npm must be installed; scripts/test.sh installs them and runs `npm ci`.
package mcpnode
