package main

import (
	"fmt"
	"os"
)

// cmdMCP is being written (see the open issues); until then it says so.
func cmdMCP(args []string) int {
	fmt.Fprintln(os.Stderr, "scratchrun mcp: not available in this build yet")
	return exitInternal
}
