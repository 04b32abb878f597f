package main

import (
	"fmt"
	"os"
)

// cmdKeys is being written (see the open issues); until then it says so.
func cmdKeys(args []string) int {
	fmt.Fprintln(os.Stderr, "scratchrun keys: not available in this build yet")
	return exitInternal
}
