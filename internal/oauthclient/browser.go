package oauthclient

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// openerCommand is the command that opens url in the user's browser on
// goos. browser is $BROWSER: a list of commands separated by ':' (as
// xdg-utils and Python's webbrowser read it), of which the first is used,
// with %s standing for the URL when present. The URL is always one
// argument of its own: no shell ever sees it, so its & and ? stay as they
// are.
func openerCommand(goos, browser, url string) (name string, args []string) {
	if first, _, _ := strings.Cut(browser, ":"); strings.TrimSpace(first) != "" {
		fields := strings.Fields(first)
		substituted := false
		for i, f := range fields[1:] {
			if strings.Contains(f, "%s") {
				fields[i+1] = strings.ReplaceAll(f, "%s", url)
				substituted = true
			}
		}
		if !substituted {
			fields = append(fields, url)
		}
		return fields[0], fields[1:]
	}
	switch goos {
	case "darwin":
		return "open", []string{url}
	case "windows":
		// rundll32 hands the URL to the default browser without cmd.exe,
		// which `start` would need and which would split it at &.
		return "rundll32", []string{"url.dll,FileProtocolHandler", url}
	default:
		return "xdg-open", []string{url}
	}
}

// OpenBrowser opens url with the OS's opener (or $BROWSER) and does not
// wait for the browser: the opener is reaped in the background.
func OpenBrowser(goos, url string) error {
	name, args := openerCommand(goos, os.Getenv("BROWSER"), url)
	cmd := exec.Command(name, args...)
	// The opener must not write into the MCP stream on stdout.
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("opening the browser with %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
