package mcpserver

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Names of the code-session tools, offered only when sessions are on.
// They are separate tools, not a `session` argument of scratchrun_exec, so
// that scratchrun_exec keeps its one contract (a fresh sandbox per call)
// and its schema byte for byte; see the package doc.
const (
	SessionOpenToolName  = "scratchrun_session_open"
	SessionRunToolName   = "scratchrun_session_run"
	SessionCloseToolName = "scratchrun_session_close"
)

// Parameter names of the session tools, in the order their schemas list them.
var (
	sessionOpenParams  = []string{"runtime", "network", "memory_mb", "idle_ttl_ms"}
	sessionRunParams   = []string{"session_id", "code", "runtime", "timeout_ms", "env", "files", "files_base64", "return_files"}
	sessionCloseParams = []string{"session_id"}
)

// sessionsInstructions is added to the server's instructions when sessions
// are on (and only then: without them the initialize answer is unchanged).
const sessionsInstructions = " When a task needs state across steps (data loaded once, packages " +
	"installed, functions defined), open a session with scratchrun_session_open, run each step " +
	"with scratchrun_session_run, and close it with scratchrun_session_close; scratchrun_exec " +
	"stays a fresh sandbox per call."

// lifetimeSentence says how long a session's state lives, from the
// operator's bounds, so that a model knows when its state is gone.
func lifetimeSentence(sp execapi.SessionPolicy) string {
	return fmt.Sprintf("State (variables and functions of Python and Node, files, installed packages, "+
		"background processes) is kept between the calls of one session, and lost %s after its last call "+
		"(its idle TTL; it may ask for up to %s) or %s after it opened, however busy; every result says when it expires.",
		words(sp.IdleTTL), words(sp.MaxIdleTTL), words(sp.MaxLifetime))
}

// words says a duration as a model reads it: "10 minutes", "1 hour".
func words(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	default:
		return plural(int(d.Round(time.Second)/time.Second), "second")
	}
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// sessionToolDefinitions builds the session tools from what the Service
// offers, as toolDefinition builds scratchrun_exec's.
func sessionToolDefinitions(info execapi.Info, described bool, sp execapi.SessionPolicy) []*mcp.Tool {
	openWorld := info.EgressAllowed
	notDestructive, destructive := false, true
	exec := inputSchema(info, described)["properties"].(map[string]any)
	sessionID := map[string]any{"type": "string", "description": "The session's id, as scratchrun_session_open returned it (ses_...)."}

	memoryMax := info.MaxMemoryMB
	if sp.MaxMemoryMB > 0 {
		memoryMax = sp.MaxMemoryMB
	}
	memory := maps.Clone(exec["memory_mb"].(map[string]any))
	memory["maximum"] = memoryMax
	memory["default"] = min(info.DefaultMemoryMB, memoryMax)
	memory["description"] = fmt.Sprintf("Memory limit in MB for all the session's processes together, for its whole life "+
		"(default %d, at most %d; omit it for the default). Over it the call running is killed with exit_code 137 and the session ends.",
		min(info.DefaultMemoryMB, memoryMax), memoryMax)
	if slices.Contains(info.UnenforcedLimits, "memory") {
		memory["description"] = fmt.Sprintf("Memory limit in MB for all the session's processes together, for its whole life "+
			"(default %d, at most %d; omit it for the default). NOT enforced on this host: going over it does not stop the program.",
			min(info.DefaultMemoryMB, memoryMax), memoryMax)
	}
	minTTL := execapi.MinSessionTTL.Milliseconds()
	open := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"runtime":   exec["runtime"],
			"network":   exec["network"],
			"memory_mb": memory,
			"idle_ttl_ms": map[string]any{
				"type": "integer", "minimum": minTTL, "maximum": sp.MaxIdleTTL.Milliseconds(), "default": sp.IdleTTL.Milliseconds(),
				"description": fmt.Sprintf("How long the session lives after its last call, in milliseconds (default %d = %s, from %d to %d; omit it for the default).",
					sp.IdleTTL.Milliseconds(), words(sp.IdleTTL), minTTL, sp.MaxIdleTTL.Milliseconds()),
			},
		},
		"required":             []string{"runtime"},
		"additionalProperties": false,
	}
	runProps := map[string]any{"session_id": sessionID}
	for _, name := range []string{"code", "timeout_ms", "env", "files", "files_base64", "return_files"} {
		runProps[name] = exec[name]
	}
	runProps["code"] = maps.Clone(exec["code"].(map[string]any))
	runProps["code"].(map[string]any)["description"] = "The code to run in the session. Python and Node run it in the session's interpreter, " +
		"like a notebook cell (what earlier calls defined is there); bash runs it as a script in the working directory the last call left."
	runProps["timeout_ms"] = maps.Clone(exec["timeout_ms"].(map[string]any))
	runProps["timeout_ms"].(map[string]any)["description"] = fmt.Sprintf("Wall-clock limit of this call in milliseconds (default %d, from %d to %d; omit it "+
		"for the default). When it passes this call's processes are killed and exit_code is 124; the session goes on.",
		info.DefaultTimeoutMS, runProps["timeout_ms"].(map[string]any)["minimum"], info.MaxTimeoutMS)
	runProps["runtime"] = map[string]any{"type": "string", "description": "Omit it to use the session's runtime; another runtime of the same image " +
		"(e.g. \"bash\" in a Python session, to pip install) runs in the same sandbox without an interpreter state of its own."}
	if names := runtimeNames(info); described && len(names) > 0 {
		runProps["runtime"].(map[string]any)["enum"] = names
	}
	run := map[string]any{"type": "object", "properties": runProps, "required": []string{"session_id", "code"}, "additionalProperties": false}
	closeSchema := map[string]any{"type": "object", "properties": map[string]any{"session_id": sessionID},
		"required": []string{"session_id"}, "additionalProperties": false}

	life := lifetimeSentence(sp)
	return []*mcp.Tool{
		{
			Name:  SessionOpenToolName,
			Title: "Open a code session",
			Description: "Open a session: one isolated Linux sandbox that outlives a call, for work that needs state across steps. " +
				life + keySentence(sp) +
				"Returns the session_id for " + SessionRunToolName + ", its expiry and what of it persists. " +
				"(" + ToolName + " is unchanged: every call of it is still a fresh sandbox, apart from any session.)",
			InputSchema:  open,
			OutputSchema: sessionOpenOutputSchema(),
			Annotations:  &mcp.ToolAnnotations{Title: "Open a code session", DestructiveHint: &notDestructive, OpenWorldHint: &openWorld},
		},
		{
			Name:  SessionRunToolName,
			Title: "Run code in a session",
			Description: "Run code in an open session (from " + SessionOpenToolName + "): the arguments and result of " + ToolName +
				", except that the sandbox is the session's. " + life + " In Python and Node the value of a last bare " +
				"expression is shown as a REPL shows it; bash keeps the working directory and exported variables. " +
				"A call that times out (exit_code 124) kills that call's processes and the interpreter's state, not the session's files. " +
				"The network and memory are the session's, set when it was opened.",
			InputSchema:  run,
			OutputSchema: sessionRunOutputSchema(),
			Annotations:  &mcp.ToolAnnotations{Title: "Run code in a session", DestructiveHint: &notDestructive, OpenWorldHint: &openWorld},
		},
		{
			Name:  SessionCloseToolName,
			Title: "Close a code session",
			Description: "Close a session: its sandbox is destroyed with everything in it (files, processes, interpreter state). " +
				"state_purged = true means the teardown was verified. Close sessions you no longer need: they count toward the key's maximum.",
			InputSchema:  closeSchema,
			OutputSchema: sessionCloseOutputSchema(),
			Annotations:  &mcp.ToolAnnotations{Title: "Close a code session", DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: &notDestructive},
		},
	}
}

// keySentence says how many sessions a key may have open, and to close them.
func keySentence(sp execapi.SessionPolicy) string {
	if sp.PerKey > 0 {
		return fmt.Sprintf(" An API key may have %d sessions open at once; close each with %s when done. ", sp.PerKey, SessionCloseToolName)
	}
	return fmt.Sprintf(" Close each with %s when done. ", SessionCloseToolName)
}

// sessionProperties describes the session's account in results.
func sessionProperties() map[string]any {
	return map[string]any{
		"session_id":       map[string]any{"type": "string"},
		"expires_at":       map[string]any{"type": "string", "format": "date-time", "description": "When the session ends if no call comes before."},
		"lifetime_ends_at": map[string]any{"type": "string", "format": "date-time", "description": "When the session ends however busy."},
	}
}

func sessionOpenOutputSchema() map[string]any {
	props := sessionProperties()
	props["runtime"] = map[string]any{"type": "string"}
	props["network"] = map[string]any{"type": "string"}
	props["memory_mb"] = map[string]any{"type": "integer"}
	props["idle_ttl_ms"] = map[string]any{"type": "integer"}
	props["interpreter"] = map[string]any{"type": "string", "enum": []string{execapi.InterpreterPython, execapi.InterpreterNode, execapi.InterpreterBash, execapi.InterpreterNone},
		"description": "What of the interpreter persists between calls."}
	props["persists"] = map[string]any{"type": "string", "description": "What the session keeps between calls, in words."}
	return map[string]any{"type": "object", "properties": props,
		"required": []string{"session_id", "expires_at", "lifetime_ends_at", "runtime", "network", "memory_mb", "idle_ttl_ms", "interpreter", "persists"}}
}

func sessionRunOutputSchema() map[string]any {
	out := outputSchema()
	props := maps.Clone(out["properties"].(map[string]any))
	session := sessionProperties()
	delete(session, "lifetime_ends_at")
	session["interpreter"] = map[string]any{"type": "string", "enum": []string{execapi.InterpreterKept, execapi.InterpreterStarted, execapi.InterpreterRestarted},
		"description": "kept: the state of earlier calls was there; started: this call started the interpreter; restarted: earlier state was gone (see note)."}
	session["ended"] = map[string]any{"type": "boolean", "description": "True when the session ended with this call (see note): open a new one."}
	props["session"] = map[string]any{"type": "object", "properties": session, "required": []string{"session_id", "expires_at", "ended"}}
	props["state_purged"] = map[string]any{"type": "boolean", "description": "False while the session goes on; once it ended, true when its sandbox was verifiably destroyed."}
	required := append(append([]string(nil), out["required"].([]string)...), "session")
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func sessionCloseOutputSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{
		"session_id":   map[string]any{"type": "string"},
		"state_purged": map[string]any{"type": "boolean", "description": "True when the session's sandbox was verifiably destroyed."},
		"reason":       map[string]any{"type": "string", "description": "Why the session ended (deleted when closed by this call)."},
	}, "required": []string{"session_id", "state_purged", "reason"}}
}

// persistsSentence says what a session of this interpreter kind keeps.
func persistsSentence(interpreter string) string {
	const base = "files, installed packages and background processes"
	switch interpreter {
	case execapi.InterpreterPython, execapi.InterpreterNode:
		return "variables, functions and imports (the interpreter keeps running, as a notebook kernel), " + base
	case execapi.InterpreterBash:
		return "the working directory and exported variables, " + base
	default:
		return base
	}
}

// paramList names a tool's parameters for errors.
func paramList(names []string) string { return strings.Join(names, ", ") }
