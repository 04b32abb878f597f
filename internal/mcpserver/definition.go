package mcpserver

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Parameter names of the tool, in the order the schema lists them.
var paramNames = []string{"runtime", "code", "timeout_ms", "memory_mb", "env", "files", "files_base64", "return_files", "network"}

// toolDefinition builds the tool from what the Service offers, so that the
// schema and the description never promise what it cannot do.
func toolDefinition(info execapi.Info, described bool, why string, opts Options) *mcp.Tool {
	openWorld := info.EgressAllowed
	notDestructive := false
	return &mcp.Tool{
		Name:         ToolName,
		Title:        "Run code in a fresh sandbox",
		Description:  toolDescription(info, described, why, opts),
		InputSchema:  inputSchema(info, described),
		OutputSchema: outputSchema(),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run code in a fresh sandbox",
			ReadOnlyHint:    false,
			DestructiveHint: &notDestructive,
			IdempotentHint:  false,
			OpenWorldHint:   &openWorld,
		},
	}
}

// runtimeNames lists the installed runtimes in the order a model should
// consider them: the first is the recommended default.
func runtimeNames(info execapi.Info) []string {
	rts := orderedRuntimes(info)
	names := make([]string, 0, len(rts))
	for _, rt := range rts {
		names = append(names, rt.Name)
	}
	return names
}

func networkModes(info execapi.Info) []string {
	if info.EgressAllowed {
		return []string{execapi.NetworkNone, execapi.NetworkEgress}
	}
	return []string{execapi.NetworkNone}
}

func inputSchema(info execapi.Info, described bool) map[string]any {
	p := execapi.DefaultPolicy()
	minTimeout := cmp.Or(info.MinTimeoutMS, int(p.MinTimeout.Milliseconds()))
	minMemory := cmp.Or(info.MinMemoryMB, p.MinMemoryMB)
	runtime := map[string]any{
		"type":        "string",
		"description": "Interpreter to run the code with; the first listed is the recommended default (see the tool description for what each one has).",
	}
	if names := runtimeNames(info); described && len(names) > 0 {
		runtime["enum"] = names
	} else {
		runtime["description"] = "Interpreter to run the code with, e.g. \"python3.13\", \"python3.11\", \"node20\" or \"bash\" (the installed list is not available right now)."
	}
	networkDefault := info.NetworkDefault
	if networkDefault == "" {
		networkDefault = execapi.NetworkNone
	}
	networkDoc := "Network access: \"none\" (only loopback; no internet, no other host)."
	if info.EgressAllowed {
		networkDoc = "Network access: \"none\" (only loopback) or \"egress\" (the public internet, never private networks or the host)."
	} else {
		networkDoc += " This server does not allow \"egress\"."
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"runtime": runtime,
			"code": map[string]any{
				"type":        "string",
				"minLength":   1,
				"description": "The complete program. It is written to a file (/code/main.py, main.js or main.sh) and run with /tmp as the working directory.",
			},
			"timeout_ms": map[string]any{
				"type":        "integer",
				"minimum":     minTimeout,
				"maximum":     info.MaxTimeoutMS,
				"default":     info.DefaultTimeoutMS,
				"description": fmt.Sprintf("Wall-clock limit in milliseconds (default %d, from %d to %d; omit it for the default). When it passes everything is killed and exit_code is 124.", info.DefaultTimeoutMS, minTimeout, info.MaxTimeoutMS),
			},
			"memory_mb": map[string]any{
				"type":        "integer",
				"minimum":     minMemory,
				"maximum":     info.MaxMemoryMB,
				"default":     info.DefaultMemoryMB,
				"description": memoryDoc(info, minMemory),
			},
			"env": map[string]any{
				"type":                 "object",
				"additionalProperties": map[string]any{"type": "string"},
				"description":          "Environment variables for the program. Pass secrets such as API keys here, never inside code.",
			},
			"files": map[string]any{
				"type":                 "object",
				"additionalProperties": map[string]any{"type": "string"},
				"description":          "Text files written before the run: absolute path (e.g. \"/tmp/data.csv\") to content.",
			},
			"files_base64": map[string]any{
				"type":                 "object",
				"additionalProperties": map[string]any{"type": "string", "contentEncoding": "base64"},
				"description":          "Binary files written before the run (images, archives, spreadsheets): absolute path to the content in standard base64. A path goes in files or files_base64, not both.",
			},
			"return_files": map[string]any{
				"type":        "array",
				"items":       map[string]any{"type": "string"},
				"maxItems":    p.MaxReturnFiles,
				"description": "Absolute paths of files to send back after the run (e.g. [\"/tmp/chart.png\"]). Images come back as images, text files as text, other files as binary resources.",
			},
			"network": map[string]any{
				"type":        "string",
				"enum":        networkModes(info),
				"default":     networkDefault,
				"description": networkDoc,
			},
		},
		"required":             []string{"runtime", "code"},
		"additionalProperties": false,
	}
}

// outcomes are the values of structuredContent's outcome.
var outcomes = []execapi.Outcome{execapi.OutcomeSuccess, execapi.OutcomeNonzeroExit, execapi.OutcomeTimeout, execapi.OutcomeMemoryLimit}

// outputSchema describes structuredContent: the contract's Result, except
// that files carry a description of what came back instead of base64 (the
// content itself is in the result's content blocks, once).
func outputSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"exit_code":    map[string]any{"type": "integer", "description": "The program's exit status; 124 = timeout, 137 = killed (memory limit, see note)."},
			"stdout":       map[string]any{"type": "string", "description": "Standard output (cut in the middle when long; note says so)."},
			"stderr":       map[string]any{"type": "string", "description": "Standard error (cut in the middle when long; note says so)."},
			"execution_ms": map[string]any{"type": "integer", "description": "Wall-clock time the program ran."},
			"state_purged": map[string]any{"type": "boolean", "description": "True when the sandbox was verifiably destroyed."},
			"note":         map[string]any{"type": "string", "description": "What the caller must know: limits hit, output cut, files missing, cut or scaled down."},
			"outcome": map[string]any{"type": "string", "enum": outcomes,
				"description": "How the run ended: success (exit 0), nonzero_exit, timeout (killed at timeout_ms) or memory_limit (killed at memory_mb)."},
			"files": map[string]any{
				"type":        "object",
				"description": "Each returned sandbox path and how it came back.",
				"additionalProperties": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"size_bytes":     map[string]any{"type": "integer", "description": "Size of the file in the sandbox."},
						"mime_type":      map[string]any{"type": "string", "description": "MIME type of the content as returned."},
						"returned_as":    map[string]any{"type": "string", "enum": []string{"image", "text", "resource", "omitted"}},
						"returned_bytes": map[string]any{"type": "integer", "description": "Size of the content as returned (smaller when scaled down or cut)."},
						"content_index":  map[string]any{"type": "integer", "description": "Index of the content block holding the file; absent when omitted."},
						"note":           map[string]any{"type": "string", "description": "How the file was changed to fit, if it was."},
					},
					"required": []string{"size_bytes", "mime_type", "returned_as", "returned_bytes"},
				},
			},
		},
		"required": []string{"exit_code", "stdout", "stderr", "execution_ms", "state_purged", "note", "outcome", "files"},
	}
}

// toolDescription tells a model what it needs to use the tool well.
func toolDescription(info execapi.Info, described bool, why string, opts Options) string {
	var b strings.Builder
	b.WriteString("Run code in a fresh, isolated Linux sandbox and get back its exit code, stdout, stderr and any files you ask for.\n\n")
	b.WriteString("Every call gets a brand-new sandbox that is destroyed afterwards: nothing persists between calls " +
		"(no files, variables, installed packages or processes). Put everything a step needs into one call's code, " +
		"and pass input data with `files`.\n\n")

	b.WriteString(isolationSentence(info, described))

	b.WriteString("Runtimes:\n")
	switch {
	case !described:
		fmt.Fprintf(&b, "- The list of installed runtimes is not available right now (%s). Usually installed: "+
			"python3.13 and python3.11 (numpy, pandas, matplotlib, scipy, pillow, requests), node20, bash.\n", why)
	case len(info.Runtimes) == 0:
		b.WriteString("- None is installed on this server yet (the operator has to run `scratchrun images build`).\n")
	default:
		rts := orderedRuntimes(info)
		for i, rt := range rts {
			fmt.Fprintf(&b, "- %s", rt.Name)
			if rt.Version != "" {
				fmt.Fprintf(&b, " (version %s)", rt.Version)
			}
			if i == 0 && len(rts) > 1 {
				b.WriteString(" [recommended default]")
			}
			if len(rt.Libraries) > 0 {
				fmt.Fprintf(&b, ": %s", strings.Join(rt.Libraries, ", "))
			} else {
				b.WriteString(": standard library and tools only")
			}
			b.WriteString("\n")
		}
		if len(rts) > 1 {
			fmt.Fprintf(&b, "Use %s unless the task needs another runtime.\n", rts[0].Name)
		}
	}
	b.WriteString("\n")

	b.WriteString("Files: `files` writes text files (absolute paths such as /tmp/data.csv) before the run, and " +
		"`files_base64` binary ones (base64 content); the working directory is /tmp. To get charts, images or " +
		"data back, write them to a file and list its path in `return_files`: PNG, JPEG, GIF, WebP and SVG come back as images, text files as text, other files as " +
		"binary resources. With matplotlib use plt.savefig('/tmp/chart.png') (there is no display).\n\n")

	b.WriteString("Secrets: pass API keys and other secrets in `env` and read them from the environment; never put them in `code`.\n\n")

	if info.EgressAllowed {
		b.WriteString("Network: with network \"egress\" the code can reach the public internet (never private networks or the host); ")
		fmt.Fprintf(&b, "the default is %q.\n\n", info.NetworkDefault)
	} else {
		b.WriteString("Network: none. The sandbox has only a loopback interface: HTTP requests, DNS lookups and " +
			"package installs (pip, npm) fail, so use only what the runtime already has.\n\n")
	}

	b.WriteString("Limits: ")
	fmt.Fprintf(&b, "timeout_ms defaults to %d and may be at most %d; ", info.DefaultTimeoutMS, info.MaxTimeoutMS)
	fmt.Fprintf(&b, "memory_mb defaults to %d and may be at most %d", info.DefaultMemoryMB, info.MaxMemoryMB)
	if info.OutputLimitBytes > 0 {
		fmt.Fprintf(&b, "; stdout and stderr are capped at %s each", humanSize(int64(info.OutputLimitBytes)))
	}
	if info.MaxReturnBytes > 0 {
		fmt.Fprintf(&b, "; returned files at %s together", humanSize(info.MaxReturnBytes))
	}
	fmt.Fprintf(&b, ". A result is kept under %s: stdout and stderr beyond %s each are cut in the middle, "+
		"large images are scaled down and large files cut, and the note says so. Print summaries rather than whole data sets.\n\n",
		humanSize(int64(opts.MaxResultBytes)), humanSize(int64(opts.MaxOutputBytes)))

	if len(info.UnenforcedLimits) > 0 {
		fmt.Fprintf(&b, "NOT enforced on this host: the %s limits (unenforced_limits: %s). A program may use more "+
			"than that without being stopped, so keep it within them yourself; every result's note repeats this.\n\n",
			strings.Join(limitWords(info.UnenforcedLimits), ", "), strings.Join(info.UnenforcedLimits, ", "))
	}

	if slices.Contains(info.UnenforcedLimits, "memory") {
		b.WriteString("Exit codes: 124 = killed at the timeout; 137 = killed by a signal (SIGKILL); anything else is " +
			"the program's own exit status. state_purged = true means the sandbox was verifiably destroyed.")
		return b.String()
	}
	b.WriteString("Exit codes: 124 = killed at the timeout; 137 = killed, usually because the memory limit was hit " +
		"(the note says so); anything else is the program's own exit status. state_purged = true means the sandbox " +
		"was verifiably destroyed.")
	return b.String()
}

// memoryDoc describes memory_mb: what happens over it, only where the host
// enforces it.
func memoryDoc(info execapi.Info, minMemory int) string {
	doc := fmt.Sprintf("Memory limit in MB for all processes together (default %d, from %d to %d; omit it for the default).", info.DefaultMemoryMB, minMemory, info.MaxMemoryMB)
	if slices.Contains(info.UnenforcedLimits, "memory") {
		return doc + " NOT enforced on this host: going over it does not stop the program."
	}
	return doc + " Over it the program is killed: exit_code 137 and a note."
}

// limitWords names unenforced_limits values in prose.
func limitWords(limits []string) []string {
	words := map[string]string{"memory": "memory (memory_mb)", "processes": "process-count", "cpu": "CPU"}
	out := make([]string, 0, len(limits))
	for _, l := range limits {
		if w, ok := words[l]; ok {
			out = append(out, w)
		} else {
			out = append(out, l)
		}
	}
	return out
}

// isolationSentence names the isolation level in force, so that a model (and
// its user) knows what kind of sandbox the code runs in.
func isolationSentence(info execapi.Info, described bool) string {
	switch {
	case !described:
		return "Isolation: not known right now (the server could not be asked).\n\n"
	case info.Isolation == "":
		return "" // a server too old to say
	case info.Isolation == "namespaces":
		return "Isolation: namespaces (Linux namespaces, cgroups and seccomp; the sandbox shares the host's kernel).\n\n"
	case info.Isolation == "gvisor":
		return "Isolation: gvisor (gVisor's application kernel serves the sandbox's system calls, not the host kernel).\n\n"
	case info.Isolation == "microvm" && info.SoftwareEmulation:
		return "Isolation: microvm (each call runs in a virtual machine with its own Linux kernel), under " + execapi.EmulationWarning + ": expect seconds per call.\n\n"
	case info.Isolation == "microvm":
		return "Isolation: microvm (each call runs in a virtual machine with its own Linux kernel).\n\n"
	default:
		return fmt.Sprintf("Isolation: %s.\n\n", info.Isolation)
	}
}

// orderedRuntimes sorts runtimes for a model: Python first, newest first
// (python3.13 before python3.11, which alphabetical order reverses), then
// Node, then bash, then anything else; newest first within each family.
func orderedRuntimes(info execapi.Info) []execapi.RuntimeInfo {
	rts := slices.Clone(info.Runtimes)
	rank := func(family string) int {
		if i := slices.Index([]string{"python", "node", "bash"}, family); i >= 0 {
			return i
		}
		return 3
	}
	slices.SortStableFunc(rts, func(a, b execapi.RuntimeInfo) int {
		fa, va := splitRuntimeName(a.Name)
		fb, vb := splitRuntimeName(b.Name)
		return cmp.Or(
			cmp.Compare(rank(fa), rank(fb)),
			strings.Compare(fa, fb),
			-slices.Compare(va, vb),
			strings.Compare(a.Name, b.Name),
		)
	})
	return rts
}

// splitRuntimeName splits "python3.13" into "python" and [3 13].
func splitRuntimeName(name string) (string, []int) {
	i := strings.IndexAny(name, "0123456789")
	if i < 0 {
		return name, nil
	}
	var version []int
	for _, part := range strings.FieldsFunc(name[i:], func(r rune) bool { return r < '0' || r > '9' }) {
		n, _ := strconv.Atoi(part)
		version = append(version, n)
	}
	return name[:i], version
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
