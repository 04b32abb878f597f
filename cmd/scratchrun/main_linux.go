package main

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
)

func main() {
	// A re-executed copy of this binary may be a sandbox's Go init (when
	// scratchrun-init is not installed next to it).
	goinit.RunIfRequested()
	// Descriptors our parent left open (a shell's, a client's) must never
	// reach a child of ours, least of all a sandbox.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	os.Exit(run(os.Args[1:]))
}

func init() {
	commands = []command{
		{"exec", cmdExec, "run code in a fresh sandbox", execCompletion},
		{"mcp", cmdMCP, "serve the scratchrun_exec MCP tool", mcpCompletion},
		{"serve", cmdServe, "run the HTTP API server; with --nats, a cluster's front end", serveCompletion},
		{"worker", cmdWorker, "serve a cluster's calls with this machine's engine", workerCompletion},
		{"keys", cmdKeys, "manage the server's API keys", keysCompletion},
		{"sessions", cmdSessions, "list and end the server's code sessions", sessionsCompletion},
		{"images", cmdImages, "manage runtime images", imagesCompletion},
		{"bench", cmdBench, "measure a workload in sandboxes", benchCompletion},
		{"setup", cmdSetup, "ready this machine after a package install", setupCompletion},
		{"logout", cmdLogout, "forget the OAuth sign-in scratchrun mcp keeps for a server", logoutCompletion},
		{"version", cmdVersion, "print the version", versionCompletion},
		{"completion", cmdCompletion, "print a shell's completion script", completionCompletion},
		{"settings", cmdSettings, "", completion{}},
	}
}

// usageText lists every command: on Linux scratchrun is the engine too.
const usageText = `usage: scratchrun COMMAND [flags]

commands:
  exec      run code in a fresh sandbox
              scratchrun exec --runtime python3.13 --code 'print(1)'
              scratchrun exec --runtime bash script.sh --env NAME=value --file /tmp/in.csv=@data.csv --return /tmp/out.png
              scratchrun exec --request req.json      (or - for stdin; prints the result JSON)
  mcp       serve the scratchrun_exec MCP tool (stdio; --http ADDR for Streamable HTTP); with
            SCRATCHRUN_API_URL and no key, forward to that server's /mcp, signing in with OAuth
  logout    forget the OAuth sign-in scratchrun mcp keeps for a server: scratchrun logout [URL]
  serve     run the HTTP API server (POST /v1/exec, /mcp, /metrics); with --nats, a cluster's front end
  worker    serve a cluster's calls with this machine's engine (scratchrun worker --nats URL)
  keys      manage the server's API keys (create, list, revoke, usage)
  sessions  list and end the server's code sessions (list [--key ID|NAME], end HASH...)
  images    manage runtime images
              scratchrun images build [RUNTIME|IMAGE...] [--force]
              scratchrun images list
              scratchrun images pull NAME REF --command 'CMD ... {file}' --file main.ext [--env K=V] [--platform os/arch]
              scratchrun images import NAME ROOTFS.tar|DOCKER-SAVE.tar|OCI-LAYOUT-DIR --command 'CMD ... {file}' --file main.ext
              scratchrun images alias ALIAS RUNTIME | --remove ALIAS
              scratchrun images rm NAME
              scratchrun images prune
  bench     measure a workload in sandboxes against the same interpreter run bare
              scratchrun bench --workload python-print|bash-echo|node-print|chart [--n N] [--concurrency C] [--network none|egress] [--json]
              scratchrun bench --cluster --nats URL [--workload bash-echo,python-print] [--n N] [--interval 100ms]
  setup     ready this machine after a package install: check the kernel, make the
            state directories, build the runtime images (--dry-run: say what it would do)
  version   print the version, commit, build date and Go version (--json)
  completion  print a shell's completion script: scratchrun completion bash|zsh|fish

Run 'scratchrun COMMAND --help' for a command's flags and environment
variables; docs/configuration.md lists every setting.
`
