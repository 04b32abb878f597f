// Command scratchrun runs untrusted code for AI agents in fresh, isolated
// sandboxes: from the command line (exec), as an MCP server (mcp) or as an HTTP
// API (serve). This file only dispatches; each subcommand has its own file.
package main

import (
	"fmt"
	"os"
)

// Exit statuses of the CLI itself (the exec subcommand otherwise exits with
// the sandboxed program's status).
const (
	exitInternal = 1
	exitUsage    = 2
)

func run(args []string) int {
	if len(args) == 0 {
		usage()
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "--help":
		usage()
		return 0
	case "--version":
		return cmdVersion(args[1:])
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "scratchrun: unknown command %q\n\n", args[0])
	usage()
	return exitUsage
}

// command is one of scratchrun's commands: dispatch, the usage and the
// shell completions (completion.go) all go by this list.
type command struct {
	name string
	run  func(args []string) int
	// summary is the usage's line for it ("" for a command the usage
	// does not list: settings, which makes the generated docs).
	summary string
	// complete is what its completion offers below the command's name.
	complete completion
}

// commands are scratchrun's commands, in the usage's order. The list is
// filled in init: cmdCompletion reads it, and a literal could not refer
// to the function that reads it.
var commands []command

func usage() {
	fmt.Fprint(os.Stderr, usageText)
}
