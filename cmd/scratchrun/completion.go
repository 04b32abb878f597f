package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/scratchrun/scratchrun/internal/settings"
)

// completion is what a shell offers after a command's words: the flags
// of the settings it takes (from the registry, with an enum's values),
// its own flags, its subcommands and the words it takes as arguments.
// Its own flags are listed here by hand, as its flag set defines them
// inline; TestCompletionFlagsMatchHelp holds the two lists together.
type completion struct {
	settings []settings.Command
	flags    []flagCompletion
	subs     []subcommand
	args     []string
}

// subcommand is a word below a command (images build, keys create).
type subcommand struct {
	name, summary string
	completion
}

// flagCompletion is one flag: whether it takes a value, and which values
// when they are known.
type flagCompletion struct {
	name, help string
	value      bool
	values     []string
}

// Shells `scratchrun completion` writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

func flagOf(name string, value bool, help string, values ...string) flagCompletion {
	return flagCompletion{name: name, value: value, help: help, values: values}
}

var (
	mcpCompletion        = completion{settings: []settings.Command{settings.MCP}}
	logoutCompletion     = completion{}
	versionCompletion    = completion{flags: []flagCompletion{flagOf("json", false, "print a JSON object")}}
	completionCompletion = completion{args: completionShells}
)

// flagsOf is every flag c takes, sorted: the registry's for its settings'
// commands and its own.
func flagsOf(c completion) []flagCompletion {
	out := slices.Clone(c.flags)
	for _, s := range settings.For(c.settings...) {
		if s.Flag != "" {
			out = append(out, flagCompletion{name: s.Flag, help: s.Help, value: s.Type != settings.Bool, values: s.Allowed})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// completionNode is one command path (["images", "pull"]) and what is
// offered there, for the generators to walk.
type completionNode struct {
	path    []string
	summary string
	completion
}

// completionTree is every command path, the bare `scratchrun` first.
func completionTree() []completionNode {
	root := completion{}
	for _, c := range commands {
		if c.summary != "" {
			root.subs = append(root.subs, subcommand{c.name, c.summary, c.complete})
		}
	}
	var out []completionNode
	var walk func(path []string, summary string, c completion)
	walk = func(path []string, summary string, c completion) {
		out = append(out, completionNode{path: path, summary: summary, completion: c})
		for _, s := range c.subs {
			walk(append(slices.Clone(path), s.name), s.summary, s.completion)
		}
	}
	walk(nil, "", root)
	return out
}

// key is the node's path as the scripts spell it: "scratchrun images pull".
func (n completionNode) key() string {
	return strings.Join(append([]string{"scratchrun"}, n.path...), " ")
}

func (n completionNode) subNames() []string {
	var out []string
	for _, s := range n.subs {
		out = append(out, s.name)
	}
	return out
}

func cmdCompletion(args []string) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(os.Stderr, completionHelp)
		return 0
	}
	if len(args) != 1 {
		return completionUsageError("want one shell: " + strings.Join(completionShells, ", "))
	}
	script, ok := completionScript(args[0])
	if !ok {
		return completionUsageError(fmt.Sprintf("no completion for the shell %q: want one of %s", args[0], strings.Join(completionShells, ", ")))
	}
	fmt.Print(script)
	return 0
}

const completionHelp = `usage: scratchrun completion bash|zsh|fish

Prints the shell's completion script for scratchrun: its commands, their
flags and the values of those that take one of a few.

  bash:  source <(scratchrun completion bash)      (or save it in /usr/share/bash-completion/completions/scratchrun)
  zsh:   source <(scratchrun completion zsh)       (or save it as _scratchrun in a directory of $fpath)
  fish:  scratchrun completion fish | source       (or save it in ~/.config/fish/completions/scratchrun.fish)
`

func completionUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun completion: %s\n", msg)
	return exitUsage
}

// completionScript is shell's script.
func completionScript(shell string) (string, bool) {
	switch shell {
	case "bash":
		return bashCompletion(completionTree()), true
	case "zsh":
		return zshCompletion(completionTree()), true
	case "fish":
		return fishCompletion(completionTree()), true
	}
	return "", false
}
