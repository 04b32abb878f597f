//go:build linux

package main

import (
	"fmt"
	"os"

	"github.com/scratchrun/scratchrun/internal/settings"
)

// cmdSettings prints what internal/settings generates: the configuration
// table (--markdown, docs/configuration.md) or the commented environment
// file (--env, deploy/scratchrun.env). It is not in the usage: it is how
// those files are made, and internal/settings' tests check them current.
func cmdSettings(args []string) int {
	if len(args) == 1 {
		switch args[0] {
		case "--markdown":
			fmt.Print(settings.Markdown())
			return 0
		case "--env":
			fmt.Print(settings.EnvFile())
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "usage: scratchrun settings --markdown|--env")
	return exitUsage
}
