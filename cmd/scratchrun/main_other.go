//go:build !linux

package main

import (
	"fmt"
	"os"
)

// main off Linux is the client: it has no sandbox init to become and no
// children that could inherit a descriptor.
func main() {
	os.Exit(run(os.Args[1:]))
}

// engineCommands are the commands of a Linux build that run sandboxes or
// serve them: here each one only says where to run it, so that a Linux
// habit or a copied script meets a plain answer instead of "unknown command".
var engineCommands = []string{"exec", "serve", "worker", "keys", "images", "bench", "setup"}

func init() {
	commands = []command{
		{"mcp", cmdMCP, "serve the scratchrun_exec MCP tool, running code on a ScratchRun server", mcpCompletion},
		{"logout", cmdLogout, "forget the OAuth sign-in scratchrun mcp keeps for a server", logoutCompletion},
		{"version", cmdVersion, "print the version", versionCompletion},
		{"completion", cmdCompletion, "print a shell's completion script", completionCompletion},
	}
	for _, name := range engineCommands {
		commands = append(commands, command{name: name, run: func([]string) int { return needsLinux(name) }})
	}
}

// needsLinux is an engine command's answer off Linux.
func needsLinux(name string) int {
	fmt.Fprintf(os.Stderr, "scratchrun %s runs sandboxes and needs Linux; on this OS scratchrun is the client: "+
		"scratchrun mcp with SCRATCHRUN_API_URL set to a ScratchRun server's (and SCRATCHRUN_API_KEY, or an OAuth sign-in)\n", name)
	return exitUsage
}

// usageText lists the client's commands; the engine's are on Linux.
const usageText = `usage: scratchrun COMMAND [flags]

On this OS scratchrun is the client of a ScratchRun server (which runs on
Linux): exec, serve, worker, keys, images, bench and setup need Linux.

commands:
  mcp       serve the scratchrun_exec MCP tool (stdio; --http ADDR for Streamable HTTP),
            running code on the server SCRATCHRUN_API_URL with SCRATCHRUN_API_KEY
              {"command": "scratchrun", "args": ["mcp"],
               "env": {"SCRATCHRUN_API_URL": "https://...", "SCRATCHRUN_API_KEY": "sr_live_..."}}
            or, with no key, forwarding to the server's /mcp and signing in with OAuth in the browser
  logout    forget the OAuth sign-in kept for a server: scratchrun logout [URL]
  version   print the version, commit, build date and Go version (--json)
  completion  print a shell's completion script: scratchrun completion bash|zsh|fish

Run 'scratchrun mcp --help' for its flags and environment variables.
`
