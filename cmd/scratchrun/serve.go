package main

import (
	"fmt"
	"os"
)

// cmdServe is being written (see the open issues); until then it says so.
func cmdServe(args []string) int {
	fmt.Fprintln(os.Stderr, "scratchrun serve: not available in this build yet")
	return exitInternal
}
