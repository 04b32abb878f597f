package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// maxConnsEnv sets the connection cap of `serve` and `mcp --http` when the
// flag is not given.
const maxConnsEnv = "SCRATCHRUN_MAX_CONNS"

// addMaxConnsFlag adds --max-conns to a subcommand that listens for HTTP.
func addMaxConnsFlag(fs *flag.FlagSet) *int {
	return fs.Int("max-conns", 0, "client connections open at once; more wait until one closes (env "+maxConnsEnv+
		"; default half the descriptor limit, at most 4096)")
}

// connLimits reads the connection cap from the flag, else the environment;
// the other bounds are httpapi's defaults.
func connLimits(flagValue int) (httpapi.ConnLimits, error) {
	n := flagValue
	if n < 0 {
		return httpapi.ConnLimits{}, fmt.Errorf("--max-conns %d: must be positive", n)
	}
	if v := os.Getenv(maxConnsEnv); n == 0 && v != "" {
		parsed, err := strconv.Atoi(v)
		if err != nil || parsed <= 0 {
			return httpapi.ConnLimits{}, fmt.Errorf("%s=%q: want a positive number of connections", maxConnsEnv, v)
		}
		n = parsed
	}
	return httpapi.ConnLimits{MaxConns: n}, nil
}
