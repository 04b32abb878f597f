package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/scratchrun/scratchrun/internal/bench"
	"github.com/scratchrun/scratchrun/internal/execapi"
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
	networkValues = []string{execapi.NetworkNone, execapi.NetworkEgress}

	execCompletion = completion{settings: []settings.Command{settings.Exec}, flags: []flagCompletion{
		flagOf("runtime", true, "runtime to run the code with"),
		flagOf("code", true, "program text"),
		flagOf("request", true, "a full request JSON"),
		flagOf("timeout-ms", true, "wall-clock limit in ms"),
		flagOf("memory-mb", true, "memory limit in MB"),
		flagOf("out", true, "directory for returned files"),
		flagOf("json", false, "print the result JSON"),
		flagOf("network", true, "network of the run", networkValues...),
		flagOf("env", true, "NAME=value for the sandbox"),
		flagOf("file", true, "SANDBOX_PATH=@HOST_FILE written before the run"),
		flagOf("return", true, "sandbox path to return"),
	}}
	mcpCompletion    = completion{settings: []settings.Command{settings.MCP}}
	serveCompletion  = completion{settings: []settings.Command{settings.Serve, settings.Frontend}}
	workerCompletion = completion{settings: []settings.Command{settings.Worker}}
	benchCompletion  = completion{settings: []settings.Command{settings.Bench}, flags: []flagCompletion{
		flagOf("workload", true, "what to run", slices.Sorted(maps.Keys(bench.Workloads))...),
		flagOf("n", true, "runs per side"),
		flagOf("concurrency", true, "runs in flight at once"),
		flagOf("network", true, "network of the runs", networkValues...),
		flagOf("warmup", true, "discarded runs per side"),
		flagOf("pool", false, "use the warm pool"),
		flagOf("builders", true, "warm sandboxes built at once"),
		flagOf("interval", true, "pause after each run"),
		flagOf("json", false, "print the report as JSON"),
		flagOf("idle-memory", false, "report idle warm sandboxes' memory"),
		flagOf("sweep", true, "bursts of this many calls at once"),
		flagOf("rounds", true, "bursts per concurrency of --sweep"),
		flagOf("pause", true, "pause between the bursts of --sweep"),
		flagOf("cluster", false, "measure what a cluster's hop adds"),
	}}
	keysSettings   = []settings.Command{settings.Keys}
	keyLimitFlags  = []flagCompletion{flagOf("rate", true, "runs per minute"), flagOf("concurrency", true, "requests in flight at once")}
	keysCompletion = completion{subs: []subcommand{
		{"create", "make a key", completion{settings: keysSettings, flags: append([]flagCompletion{flagOf("name", true, "a label for the key")}, keyLimitFlags...)}},
		{"list", "every key", completion{settings: keysSettings}},
		{"revoke", "refuse a key", completion{settings: keysSettings}},
		{"set", "change a key's limits", completion{settings: keysSettings, flags: keyLimitFlags}},
		{"usage", "runs, time and bytes per key", completion{settings: keysSettings, flags: []flagCompletion{
			flagOf("key", true, "one key"), flagOf("since", true, "from this time"), flagOf("runs", false, "list the runs")}}},
	}}
	imageSpecFlags = []flagCompletion{
		flagOf("command", true, "the runtime's command"),
		flagOf("file", true, "the file the code is written to"),
		flagOf("env", true, "NAME=value for the runtime"),
		flagOf("version", true, "the runtime's version"),
		flagOf("libraries", true, "libraries it offers"),
		flagOf("warm", true, "its warm kind"),
		flagOf("platform", true, "os/arch to pick"),
		flagOf("tag", true, "the image's tag"),
		flagOf("max-ratio", true, "largest expansion of a layer"),
		flagOf("max-size", true, "largest image"),
		flagOf("min-free", true, "space to leave free"),
	}
	imagesCompletion = completion{subs: []subcommand{
		{"build", "build the catalog's images", completion{flags: []flagCompletion{flagOf("force", false, "rebuild")}}},
		{"list", "the images and runtimes", completion{}},
		{"pull", "add a runtime from an OCI registry", completion{flags: append(slices.Clone(imageSpecFlags), flagOf("insecure", false, "plain HTTP registry"))}},
		{"push", "put a runtime's image, with its spec, into an OCI registry", completion{flags: []flagCompletion{flagOf("insecure", false, "plain HTTP registry")}}},
		{"import", "add a runtime from a tarball or OCI layout", completion{flags: imageSpecFlags}},
		{"export", "write a runtime's image as an OCI layout or archive", completion{}},
		{"alias", "name a runtime by another name", completion{flags: []flagCompletion{flagOf("remove", false, "remove the alias")}}},
		{"rm", "remove a runtime", completion{}},
		{"prune", "remove stale images", completion{}},
	}}
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
