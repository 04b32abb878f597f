package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/scratchrun/scratchrun/internal/oauthclient"
	"github.com/scratchrun/scratchrun/internal/settings"
)

const logoutHelp = `usage: scratchrun logout [URL]

Forgets the OAuth sign-in scratchrun mcp keeps for the server at URL
(default SCRATCHRUN_API_URL): its refresh token and client registration, in
the OS keychain and in the file store (SCRATCHRUN_OAUTH_STORE,
SCRATCHRUN_OAUTH_DIR). The next scratchrun mcp signs in again. It asks the
server nothing: a server that is gone can still be forgotten.
`

// cmdLogout forgets a server's stored sign-in.
func cmdLogout(args []string) int {
	fs := flag.NewFlagSet("logout", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), logoutHelp) }
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(positional) > 1 {
		return logoutUsageError(fmt.Sprintf("unexpected argument %q: want one server URL", positional[1]))
	}
	v, err := settings.Environment(os.Getenv, mcpSettings)
	if err != nil {
		return logoutUsageError(err.Error())
	}
	base := v.String(settings.APIURL)
	if len(positional) == 1 {
		base = positional[0]
	} else if !v.IsSet(settings.APIURL) {
		return logoutUsageError("name the server: scratchrun logout URL, or set SCRATCHRUN_API_URL")
	}
	endpoint, err := mcpEndpoint(base)
	if err != nil {
		return logoutUsageError(err.Error())
	}
	store, err := oauthclient.NewStore(v.String(settings.OAuthStore), v.String(settings.OAuthDir))
	if err != nil {
		return logoutUsageError(err.Error())
	}
	if err := store.Forget(endpoint); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun logout: %v\n", err)
		return exitInternal
	}
	fmt.Fprintf(os.Stderr, "scratchrun logout: no sign-in to %s is kept any more\n", endpoint)
	return 0
}

func logoutUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun logout: %s\n", msg)
	return exitUsage
}
