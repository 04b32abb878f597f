//go:build !linux

package main

import (
	"errors"
	"log/slog"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver/remote"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// mcpSettings are the settings mcp takes off Linux: the client's alone, so
// that --help lists no engine setting that would do nothing here.
const mcpSettings = settings.MCPClient

// mcpBackendHelp says where mcp's code runs: off Linux there is no engine,
// only a server to forward to.
const mcpBackendHelp = `Code runs on a ScratchRun server: set SCRATCHRUN_API_URL and SCRATCHRUN_API_KEY
(the URL defaults to ` + remote.DefaultURL + `), or only SCRATCHRUN_API_URL to sign in
to the server's /mcp with OAuth in the browser (` + mcpSignInHelp + `).
Running code here, in a local engine, needs Linux.
`

// errNoLocalEngine is why mcp without an API key refuses off Linux.
var errNoLocalEngine = errors.New("without SCRATCHRUN_API_URL scratchrun mcp runs code in a local engine, which needs Linux; " +
	"on this OS scratchrun is the client: set SCRATCHRUN_API_URL to a ScratchRun server's (and SCRATCHRUN_API_KEY, or sign in with OAuth)")

// mcpLocal stands for the engine this build has none of.
type mcpLocal struct{}

func parseMCPLocal(*settings.Values) (mcpLocal, error) { return mcpLocal{}, errNoLocalEngine }

func (mcpLocal) open(*slog.Logger) (execapi.Service, func(), error) {
	return nil, nil, errNoLocalEngine
}
