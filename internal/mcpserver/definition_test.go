package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// listTool returns the one tool as a client sees it, as generic JSON.
func listTool(t *testing.T, cs *mcp.ClientSession) (*mcp.Tool, map[string]any) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != ToolName {
		t.Fatalf("tools/list = %+v, want exactly %s", res.Tools, ToolName)
	}
	data, _ := json.Marshal(res.Tools[0])
	var raw map[string]any
	json.Unmarshal(data, &raw)
	return res.Tools[0], raw
}

func TestToolsListDescribesWhatTheEngineOffers(t *testing.T) {
	eng := testEngine(t)
	info, _ := eng.Describe(context.Background())
	cs := connect(t, eng, Options{}, nil)
	tool, raw := listTool(t, cs)

	schema := raw["inputSchema"].(map[string]any)
	props := schema["properties"].(map[string]any)
	var names []string
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"code", "env", "files", "files_base64", "memory_mb", "network", "return_files", "runtime", "timeout_ms"}
	if !slices.Equal(names, want) {
		t.Errorf("parameters %v, want exactly %v", names, want)
	}
	if schema["additionalProperties"] != false {
		t.Errorf("additionalProperties = %v, want false", schema["additionalProperties"])
	}
	if req := schema["required"].([]any); len(req) != 2 || req[0] != "runtime" || req[1] != "code" {
		t.Errorf("required = %v", req)
	}

	var enum []string
	for _, v := range props["runtime"].(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	var installed []string
	for _, rt := range info.Runtimes {
		installed = append(installed, rt.Name)
	}
	// The newest Python first (alphabetical order put python3.11 first),
	// then Node, then bash: the first is the recommended default.
	if want := []string{"python3.13", "python3.11", "node20", "bash"}; !slices.Equal(enum, want) {
		t.Errorf("runtime enum %v, want %v (installed: %v)", enum, want, installed)
	}
	timeout := props["timeout_ms"].(map[string]any)
	if timeout["type"] != "integer" || timeout["maximum"] != float64(info.MaxTimeoutMS) || timeout["default"] != float64(info.DefaultTimeoutMS) ||
		timeout["minimum"] != float64(1000) {
		t.Errorf("timeout_ms schema %v", timeout)
	}
	memory := props["memory_mb"].(map[string]any)
	if memory["maximum"] != float64(info.MaxMemoryMB) || memory["minimum"] != float64(64) {
		t.Errorf("memory_mb schema %v", memory)
	}
	if network := props["network"].(map[string]any); !slices.Equal(network["enum"].([]any), []any{"none"}) {
		t.Errorf("network enum %v: egress is not allowed by the engine, so only \"none\"", network["enum"])
	}
	for _, obj := range []string{"env", "files", "files_base64"} {
		ap := props[obj].(map[string]any)["additionalProperties"].(map[string]any)
		if ap["type"] != "string" {
			t.Errorf("%s values must be strings: %v", obj, props[obj])
		}
	}

	a := tool.Annotations
	if a == nil || a.ReadOnlyHint || a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint ||
		a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("annotations %+v: want not read-only, not destructive, not idempotent, closed world (no egress)", a)
	}
	// false hints must be on the wire, not left to clients' defaults
	// (destructive and open-world default to true).
	ann := raw["annotations"].(map[string]any)
	for _, k := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
		if ann[k] != false {
			t.Errorf("annotations[%s] = %v, want false on the wire", k, ann[k])
		}
	}

	out := raw["outputSchema"].(map[string]any)
	outProps := out["properties"].(map[string]any)
	for _, k := range []string{"exit_code", "stdout", "stderr", "execution_ms", "state_purged", "note", "files"} {
		if outProps[k] == nil {
			t.Errorf("output schema lacks %s", k)
		}
	}

	d := tool.Description
	for _, want := range []string{
		"fresh", "nothing persists", "return_files", "env", "124", "137", "Network: none",
		"python3.13", "numpy", "pandas", "matplotlib", "node20", "bash", "plt.savefig",
		"30000", "512", "files_base64",
		// docs/mcp-clients.md promises the isolation level; the newest Python is
		// named as the default to use.
		"Isolation: " + info.Isolation, "Use python3.13 unless",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q:\n%s", want, d)
		}
	}
}

// A Service that allows egress gets an open-world tool whose network enum
// offers it; the description says so.
func TestEgressMakesTheToolOpenWorld(t *testing.T) {
	cs := connect(t, egressInfo{fakeService()}, Options{}, nil)
	tool, raw := listTool(t, cs)
	if a := tool.Annotations; a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("openWorldHint %v, want true with egress", a.OpenWorldHint)
	}
	network := raw["inputSchema"].(map[string]any)["properties"].(map[string]any)["network"].(map[string]any)
	if !slices.Equal(network["enum"].([]any), []any{"none", "egress"}) {
		t.Errorf("network enum %v", network["enum"])
	}
	if !strings.Contains(tool.Description, "public internet") {
		t.Errorf("description does not say the network is available:\n%s", tool.Description)
	}
}

// egressInfo reports egress as allowed (the engine cannot do egress yet;
// only the description is under test).
type egressInfo struct{ execapi.Service }

func (e egressInfo) Describe(ctx context.Context) (execapi.Info, error) {
	info, err := e.Service.Describe(ctx)
	info.EgressAllowed = true
	return info, err
}

// Runtimes are offered newest Python first whatever the catalog holds, so
// a model reading the list top-down picks the recommended one.
func TestRuntimeOrder(t *testing.T) {
	info := execapi.Info{}
	for _, name := range []string{"bash", "deno2", "node18", "node20", "python3.11", "python3.12", "python3.13", "python3.9"} {
		info.Runtimes = append(info.Runtimes, execapi.RuntimeInfo{Name: name})
	}
	got := runtimeNames(info)
	want := []string{"python3.13", "python3.12", "python3.11", "python3.9", "node20", "node18", "bash", "deno2"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	d := toolDescription(info, true, "", Options{}.withDefaults())
	if !strings.Contains(d, "- python3.13 [recommended default]") || !strings.Contains(d, "Use python3.13 unless") {
		t.Errorf("the description does not recommend python3.13:\n%s", d)
	}
}
