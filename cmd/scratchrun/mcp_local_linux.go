package main

import (
	"log/slog"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver/remote"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// mcpSettings are the settings mcp takes here: the local engine's too.
const mcpSettings = settings.MCP

// mcpBackendHelp says where mcp's code runs: on Linux, the embedded engine
// unless a key sends it to a server.
const mcpBackendHelp = `Code runs in the local engine, or on a ScratchRun server when SCRATCHRUN_API_KEY
is set (SCRATCHRUN_API_URL, default ` + remote.DefaultURL + `). With SCRATCHRUN_API_URL
and no key, stdio is forwarded to the server's /mcp and scratchrun signs in with
OAuth in the browser (` + mcpSignInHelp + `).
`

// mcpLocal is the embedded engine mcp runs code in without an API key.
type mcpLocal struct{ engineSetup }

func parseMCPLocal(v *settings.Values) (mcpLocal, error) {
	s, err := parseEngine(v, settings.MCP)
	return mcpLocal{s}, err
}

// open builds the engine; closeService closes it, logging what fails.
func (l mcpLocal) open(log *slog.Logger) (svc execapi.Service, closeService func(), err error) {
	eng, err := l.engineSetup.open(log)
	if err != nil {
		return nil, nil, err
	}
	return eng, func() {
		if err := eng.Close(); err != nil {
			log.Warn("mcp: closing the engine", "err", err)
		}
	}, nil
}
