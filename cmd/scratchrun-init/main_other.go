//go:build !linux

// Command scratchrun-init is pid 1 of a gVisor or microVM sandbox, which
// exist only on Linux: built for another OS it only says so, so that
// `go build ./cmd/...` succeeds for a desktop client's platforms.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "scratchrun-init is a sandbox's init and needs Linux; on this OS scratchrun is the client: scratchrun mcp with SCRATCHRUN_API_URL")
	os.Exit(2)
}
