// Command openapigen writes the OpenAPI document a server with sessions on
// serves (the base merged with the sessions fragment, as
// internal/httpapi/openapi merges them) to the file its one argument
// names. The TypeScript client's types are generated from that document
// (npm run gen in clients/typescript), not from the base alone: the merge
// is the Go package's, so the client cannot drift from what servers serve.
package main

import (
	"fmt"
	"os"

	"github.com/scratchrun/scratchrun/internal/httpapi/openapi"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapigen FILE")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], openapi.JSON(true), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}
