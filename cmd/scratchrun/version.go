package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
)

const versionHelp = `usage: scratchrun version [--json]

Prints this build's version (a release's tag, or git describe when built
from a checkout by scripts/install.sh), the commit it was built from, when,
and the Go that built it.

flags:
`

func cmdVersion(args []string) int {
	return printVersion(os.Stdout, args, buildinfo.Get())
}

// printVersion writes info to w as text, or as a JSON object with --json.
func printVersion(w io.Writer, args []string, info buildinfo.Info) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the version as a JSON object")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), versionHelp)
		fs.PrintDefaults()
	}
	if code, ok := parseFlagsOnly(fs, args, versionUsageError); !ok {
		return code
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(info); err != nil {
			return exitInternal
		}
		return 0
	}
	commit := orUnknown(info.Commit)
	if info.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "scratchrun %s\n  commit: %s\n  date:   %s\n  go:     %s\n", info.Version, commit, orUnknown(info.Date), info.GoVersion)
	return 0
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func versionUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun version: %s\n", msg)
	return exitUsage
}
