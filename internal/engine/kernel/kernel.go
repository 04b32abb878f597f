package kernel

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/scratchrun/scratchrun/internal/engine/warm"
)

//go:embed python.py
var python string

//go:embed node.js
var node string

//go:embed bash.sh
var bash string

// Command returns the command line that starts a kernel of a runtime's
// kind ("python" or "node"): the runtime's warm_command template with the
// kernel in place of "{bootstrap}". bash has no kernel: see BashCommand.
func Command(kind string, template []string) ([]string, error) {
	var program string
	switch kind {
	case "python":
		program = python
	case "node":
		program = node
	default:
		return nil, fmt.Errorf("no session kernel for %q", kind)
	}
	return warm.Bootstrap(template, program)
}

// envName is what bash accepts as a variable name; other names in a
// request's environment cannot be shell variables and are passed as they
// came.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// BashCommand returns the command line of one bash call in a session: shell
// runs file in a wrapper that first restores the exported variables and
// the working directory the session's last call saved in stateDir, then
// re-applies the request's own variables (env, so they win over the saved
// ones), and saves both again when the call ends, even by exit. The file
// sees $0 as `bash FILE` would and no positional parameters. What is not
// saved: a call that ends by exec or is killed (a timeout) saves nothing,
// nor do non-exported variables, functions, aliases or shell options.
func BashCommand(shell, file, stateDir string, env []string) []string {
	argv := []string{shell, "-c", bash, file, stateDir}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if envName.MatchString(name) {
			argv = append(argv, name)
		}
	}
	return argv
}
