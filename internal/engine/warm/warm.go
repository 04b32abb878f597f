// Package warm holds the bootstrap programs that pre-start interpreters in
// warm sandboxes (see sandbox.Prestart). Each waits on fd 3 for its one job
// and must never run anything of a caller's before it arrives.
package warm

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed python.py
var python string

//go:embed node.js
var node string

//go:embed zygote.py
var zygote string

// pythonEntry marks where python.py's entry begins, which a zygote's
// bootstrap replaces.
const pythonEntry = "# The entry (a zygote's bootstrap"

// Command returns the pre-start command line for a runtime's warm kind, with
// its bootstrap program in place of "{bootstrap}".
func Command(kind string, template []string) ([]string, error) {
	var program string
	switch kind {
	case "python":
		program = python
	case "node":
		program = node
	default:
		return nil, fmt.Errorf("no warm start for %q", kind)
	}
	return Bootstrap(template, program)
}

// Bootstrap returns template with program in place of "{bootstrap}", the
// form by which every interpreter's start program reaches it (as its -c or
// -e argument, never as a file the sandbox could change). Package
// engine/kernel starts session kernels through it as well.
func Bootstrap(template []string, program string) ([]string, error) {
	out := make([]string, len(template))
	found := false
	for i, a := range template {
		if strings.Contains(a, "{bootstrap}") {
			found = true
		}
		out[i] = strings.ReplaceAll(a, "{bootstrap}", program)
	}
	if !found {
		return nil, fmt.Errorf("warm command %q has no {bootstrap}", template)
	}
	return out, nil
}

// Zygote returns the command line of a python zygote (docs/zygotes.md) for
// a runtime's warm template: the warm bootstrap's code, its job path
// shared rather than copied, with the zygote's entry in place of its own.
func Zygote(template []string) ([]string, error) {
	at := strings.Index(python, pythonEntry)
	if at < 0 {
		return nil, fmt.Errorf("python.py has no entry marker")
	}
	return Bootstrap(template, python[:at]+zygote)
}
