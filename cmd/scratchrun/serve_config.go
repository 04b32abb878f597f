//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/scratchrun/scratchrun/internal/console"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// serveConfig is `scratchrun serve` as its flags and environment describe
// it: serve.go opens and runs what it says.
type serveConfig struct {
	listen, metrics    string
	allowNoAuth        bool
	allowPublicMetrics bool
	db                 string
	consoleToken       string
	bodyLimit          int64
	conns              httpapi.ConnLimits
	sessions           mcpSessions
	debug              bool
	clustered          bool
	nats               natsSetup
	local              engineSetup // without --nats
	frontend           frontendSetup
	oauth              oauthSetup
}

// frontendSetup is a cluster's front end: the policy it validates
// requests with (each worker still holds them to its own) and how long a
// call waits for a worker with room.
type frontendSetup struct {
	policy    execapi.Policy
	sessions  execapi.SessionPolicy
	queueWait queueWait
}

const serveHelp = `usage: scratchrun serve [--addr HOST:PORT] [--db FILE|postgres://...] [--nats URL[,URL...]] [flags]

Serves the HTTP API (POST /v1/exec, GET /v1/runtimes, /healthz, /readyz,
/metrics) and the MCP tool at /mcp, with the API keys of 'scratchrun keys'
(/healthz and /readyz need none). While no key has ever been created it
serves without authentication, and then only on a loopback address unless
--allow-no-auth is given. --metrics-addr serves /metrics alone, without keys,
for a Prometheus scraper. Servers that share a --db (a postgres:// URL, or
one SQLite file on one machine) hold each key to its limits together.
With --console-token (or SCRATCHRUN_CONSOLE_TOKEN) it also serves a web
console at /console: keys, usage, live state and a playground. With --nats
it is a cluster's front end: no engine of its own, calls placed on the
workers registered there (several front ends may run side by side over one
postgres:// --db). With --oauth builtin or external, /mcp also takes OAuth
access tokens, each acting as a key (docs/oauth.md).

flags:
`

// parseServe reads serve's command line and environment. When it returns
// false the command ends with code (0 after -h).
func parseServe(args []string) (serveConfig, int, bool) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	set := withSettings(fs, serveHelp, settings.Serve, settings.Frontend)
	if code, ok := parseFlagsOnly(fs, args, serveUsageError); !ok {
		return c, code, false
	}
	v, code, ok := resolveSettings(set, serveUsageError)
	if !ok {
		return c, code, false
	}
	c.nats = parseNATS(v)
	c.clustered = c.nats.given()
	if given := set.Given(settings.Frontend); c.clustered && len(given) > 0 {
		return c, serveUsageError(fmt.Sprintf("--%s shapes a local engine, and with --nats there is none: give it to each `scratchrun worker`", given[0])), false
	}
	c.listen, c.metrics = v.String(settings.ListenAddr), v.String(settings.MetricsAddr)
	c.allowNoAuth, c.allowPublicMetrics = v.Bool(settings.AllowNoAuth), v.Bool(settings.AllowPublicMetrics)
	c.db = firstNonEmpty(v.String(settings.DB), defaultDBPath())
	c.bodyLimit = v.Size(settings.MaxBody)
	c.conns = httpapi.ConnLimits{MaxConns: v.Int(settings.MaxConns)}
	c.sessions = parseMCPSessions(v)
	c.debug = v.Bool(settings.Debug)
	if c.consoleToken = v.String(settings.ConsoleToken); c.consoleToken != "" {
		if err := console.CheckToken(c.consoleToken); err != nil {
			return c, serveUsageError("--console-token (SCRATCHRUN_CONSOLE_TOKEN): " + err.Error()), false
		}
	}
	var err error
	if c.oauth, err = parseOAuth(v); err != nil {
		return c, serveUsageError(err.Error()), false
	}
	if c.clustered {
		c.frontend.policy, err = parsePolicy(v)
		c.frontend.queueWait = operatorQueueWait(v)
		c.frontend.sessions = parseSessionPolicy(v, settings.Frontend)
	} else {
		c.local, err = parseEngine(v, settings.Serve)
	}
	if err != nil {
		return c, serveUsageError(err.Error()), false
	}
	return c, 0, true
}

// drainTimeout is how long a front end's drain waits: runs in flight end
// on the workers, which finish them, as a server's own drain waits for
// its (httpapi.DrainAllowance), plus placement's queue wait.
func (f frontendSetup) drainTimeout() time.Duration {
	return f.policy.MaxTimeout + httpapi.DrainAllowance + time.Duration(f.queueWait)
}

// defaultDBPath is /var/lib/scratchrun/scratchrun.db for root, else in the
// user's data directory.
func defaultDBPath() string {
	if os.Geteuid() == 0 {
		return "/var/lib/scratchrun/scratchrun.db"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "scratchrun", "scratchrun.db")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), fmt.Sprintf("scratchrun-%d", os.Getuid()), "scratchrun.db")
	}
	return filepath.Join(home, ".local", "share", "scratchrun", "scratchrun.db")
}
