package httpapi

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi/openapi"
)

// These tests keep the OpenAPI document (package openapi) and the server
// from drifting apart: a route, an error code, a refusal reason, an outcome
// or a JSON field on one side only fails them. They need no sandbox.

// They run in both modes of the document: with sessions off (the base
// document, which the server's routes, codes and structs must match once
// what only sessions add is set aside) and on (the base merged with the
// sessions fragment, which must match all of them), so that neither part
// rots.

// apiDoc is the document, decoded.
type apiDoc map[string]any

// loadAPIDoc is the document a server with sessions on or off serves.
func loadAPIDoc(t *testing.T, sessions bool) apiDoc {
	t.Helper()
	var d apiDoc
	if err := json.Unmarshal(openapi.JSON(sessions), &d); err != nil {
		t.Fatalf("the OpenAPI document is not JSON: %v", err)
	}
	return d
}

// bothModes runs test with sessions off, then on.
func bothModes(t *testing.T, test func(t *testing.T, sessions bool)) {
	for _, sessions := range []bool{false, true} {
		name := "sessions off"
		if sessions {
			name = "sessions on"
		}
		t.Run(name, func(t *testing.T) { test(t, sessions) })
	}
}

// sessionsOnly is what the sessions fragment adds at keys (an enum's values,
// a schema's new property names), none when the fragment adds nothing there:
// with sessions off, the code's constants and structs have these besides
// what the base document describes.
func sessionsOnly(t *testing.T, keys ...string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("openapi", "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var frag map[string]any
	if err := json.Unmarshal(data, &frag); err != nil {
		t.Fatalf("openapi/sessions.json: %v", err)
	}
	last := keys[len(keys)-1]
	m := obj(frag, keys[:len(keys)-1]...)
	var out []string
	switch v := m[last].(type) {
	case []any:
		for _, e := range v {
			out = append(out, e.(string))
		}
	case map[string]any:
		// A key the base has too is only extended by the fragment (an enum
		// of an existing property, say): it is the base's.
		base := obj(loadAPIDoc(t, false), keys...)
		for k := range v {
			if _, inBase := base[k]; !inBase {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// without is have less drop.
func without(have, drop []string) []string {
	var out []string
	for _, h := range have {
		if !slices.Contains(drop, h) {
			out = append(out, h)
		}
	}
	return out
}

// obj is m[key] as an object (nil when it is none).
func obj(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, _ := m[k].(map[string]any)
		m = next
	}
	return m
}

// schema is the component schema name.
func (d apiDoc) schema(t *testing.T, name string) map[string]any {
	t.Helper()
	s := obj(d, "components", "schemas", name)
	if s == nil {
		t.Fatalf("the document has no schema %s", name)
	}
	return s
}

// enum is the string enum of a schema.
func enum(s map[string]any) []string {
	var out []string
	for _, v := range s["enum"].([]any) {
		out = append(out, v.(string))
	}
	sort.Strings(out)
	return out
}

// operations are the documented operations as "METHOD /path".
func (d apiDoc) operations() []string {
	var ops []string
	for path, item := range obj(d, "paths") {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				ops = append(ops, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// sameSet reports the strings of want missing from got and of got missing
// from want, as "what: a, b" lines for an error.
func sameSet(t *testing.T, what, gotName string, got []string, wantName string, want []string) {
	t.Helper()
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%s %q is in %s but not in %s", what, g, gotName, wantName)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s %q is in %s but not in %s", what, w, wantName, gotName)
		}
	}
}

// Every route the server serves is in the document, unless it says where
// else it is described (/metrics, /mcp, the console, OAuth), and every
// documented operation is served: listed in the server's route table, and
// answered, not with a 404 or 405, when a real request tries it.
func TestOpenAPIRoutesMatchTheServer(t *testing.T) {
	bothModes(t, routesMatchTheServer)
}

func routesMatchTheServer(t *testing.T, sessions bool) {
	d := loadAPIDoc(t, sessions)
	// With every optional route mounted: MCP and OAuth.
	o := oauthOptions(&tokenTable{})
	o.sessions = sessions
	ts := startServer(t, o)
	_, key := ts.key("drift", 100, 4)

	var served []string
	for _, r := range ts.srv.served {
		if r.Outside != "" {
			continue
		}
		if r.Method == "" {
			// A route that answers every method is described by its GET.
			served = append(served, "GET "+r.Path)
			continue
		}
		// A trailing wildcard ({path...}) is a path parameter in the
		// document.
		served = append(served, r.Method+" "+strings.ReplaceAll(r.Path, "...}", "}"))
	}
	sort.Strings(served)
	sameSet(t, "route", "the server's routes", served, "the OpenAPI document", d.operations())

	for _, op := range d.operations() {
		method, path, _ := strings.Cut(op, " ")
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(quickBody)
		}
		a, err := ts.do(context.Background(), method, path, key, readerOrNil(body), nil)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		// A session route answers its own 404 for the id in the path
		// (session_not_found), not the catch-all's.
		if a.status == http.StatusNotFound && a.errorBody(t).Code == CodeNotFound || a.status == http.StatusMethodNotAllowed {
			t.Errorf("%s is documented but answered %d: %s", op, a.status, a.body)
		}
	}
	// The API's routes serve no method besides the documented ones: one
	// no route has is a 405 that names them all.
	methods := map[string][]string{}
	for _, r := range ts.srv.served {
		if r.Outside != "" || r.Method == "" {
			continue
		}
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	for path, allowed := range methods {
		sort.Strings(allowed)
		a, err := ts.do(context.Background(), http.MethodPatch, path, key, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(allowed, ", "); a.status != http.StatusMethodNotAllowed || a.errorBody(t).Code != CodeMethodNotAllowed || a.header.Get("Allow") != want {
			t.Errorf("PATCH %s: %d %s (Allow %q), want 405 allowing %s", path, a.status, a.body, a.header.Get("Allow"), want)
		}
	}
}

func readerOrNil(r *strings.Reader) interface{ Read([]byte) (int, error) } {
	if r == nil {
		return nil
	}
	return r
}

// constants returns the string constants of the (non-test) Go files in
// dir that keep: by name and declared type.
func constants(t *testing.T, dir string, keep func(name, typ string) bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING || !keep(name.Name, typ) {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, v)
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// The error codes, refusal reasons and outcomes the code has (its Code*
// constants in httpapi and execapi, its RefusalReason and Outcome
// constants) are exactly the document's enums.
// With sessions off, the values only sessions use (those the fragment adds
// to an enum) are set aside.
func TestOpenAPIEnumsMatchTheCode(t *testing.T) {
	bothModes(t, enumsMatchTheCode)
}

func enumsMatchTheCode(t *testing.T, sessions bool) {
	d := loadAPIDoc(t, sessions)
	// inMode is what the code has, less what only sessions add when they
	// are off.
	inMode := func(have []string, schema string, path ...string) []string {
		if sessions {
			return have
		}
		return without(have, sessionsOnly(t, append([]string{"components", "schemas", schema}, path...)...))
	}
	isCode := func(name, _ string) bool { return strings.HasPrefix(name, "Code") }
	codes := append(constants(t, ".", isCode), constants(t, "../execapi", isCode)...)
	sort.Strings(codes)
	detail := obj(d.schema(t, "ErrorDetail"), "properties")
	sameSet(t, "error code", "the code", inMode(codes, "ErrorDetail", "properties", "code", "enum"), "ErrorDetail.code's enum", enum(obj(detail, "code")))

	reasons := constants(t, "../execapi", func(_, typ string) bool { return typ == "RefusalReason" })
	sameSet(t, "refusal reason", "the code", inMode(reasons, "ErrorDetail", "properties", "reason", "enum"), "ErrorDetail.reason's enum", enum(obj(detail, "reason")))

	outcomes := constants(t, "../execapi", func(_, typ string) bool { return typ == "Outcome" })
	sameSet(t, "outcome", "the code", inMode(outcomes, "Result", "properties", "outcome", "enum"), "Result.outcome's enum", enum(obj(d.schema(t, "Result"), "properties", "outcome")))

	var admission []string
	for _, r := range execapi.AdmissionRefusals {
		admission = append(admission, string(r))
	}
	sort.Strings(admission)
	sameSet(t, "admission refusal", "execapi.AdmissionRefusals", inMode(admission, "AdmissionInfo", "properties", "rejections", "propertyNames", "enum"), "AdmissionInfo.rejections' names",
		enum(obj(d.schema(t, "AdmissionInfo"), "properties", "rejections", "propertyNames")))
}

// Every JSON field of the request, the result, the error document, the
// runtimes listing and the stream's event data (and of the structs within
// them) is a property of the schema named after its Go type, and the
// reverse; in what the server
// answers, the fields always sent (no omitempty) are the required ones.
// With sessions off, the fields only sessions add (the properties the
// fragment adds to a schema of the base) are set aside.
func TestOpenAPISchemasMatchTheStructs(t *testing.T) {
	bothModes(t, schemasMatchTheStructs)
}

func schemasMatchTheStructs(t *testing.T, sessions bool) {
	d := loadAPIDoc(t, sessions)
	// The data of the stream's events are unexported types.
	schemaNames := map[reflect.Type]string{reflect.TypeFor[streamStarted](): "Started", reflect.TypeFor[streamChunk](): "Output",
		reflect.TypeFor[sessionList](): "SessionList", reflect.TypeFor[sessionFileWritten](): "SessionFileWritten"}
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, answer bool)
	walk = func(typ reflect.Type, answer bool) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		name := typ.Name()
		if n, ok := schemaNames[typ]; ok {
			name = n
		}
		s := d.schema(t, name)
		props := obj(s, "properties")
		var sessionFields []string
		if !sessions {
			sessionFields = sessionsOnly(t, "components", "schemas", name, "properties")
		}
		var fields, required []string
		for f := range typ.Fields() {
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if slices.Contains(sessionFields, name) {
				continue
			}
			fields = append(fields, name)
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
			inner := f.Type
			for inner.Kind() == reflect.Pointer || inner.Kind() == reflect.Slice || inner.Kind() == reflect.Map {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct && strings.HasPrefix(inner.PkgPath(), "github.com/scratchrun/") {
				if p := obj(props, name); p != nil && !strings.Contains(mustJSON(t, p), `"#/components/schemas/`+inner.Name()+`"`) {
					t.Errorf("%s.%s is a %s, but its schema does not refer to %s", typ.Name(), name, inner.Name(), inner.Name())
				}
				walk(inner, answer)
			}
		}
		var documented []string
		for p := range props {
			documented = append(documented, p)
		}
		sort.Strings(fields)
		sameSet(t, "field of "+typ.Name(), "the Go struct", fields, "its schema", documented)
		if answer {
			var want []string
			for _, r := range s["required"].([]any) {
				want = append(want, r.(string))
			}
			sort.Strings(required)
			sameSet(t, "always-sent field of "+typ.Name(), "the Go struct", required, "its schema's required", want)
		}
	}
	walk(reflect.TypeFor[execapi.Request](), false)
	for _, typ := range []reflect.Type{reflect.TypeFor[execapi.Result](), reflect.TypeFor[ErrorDocument](), reflect.TypeFor[execapi.Info](),
		reflect.TypeFor[streamStarted](), reflect.TypeFor[streamChunk]()} {
		walk(typ, true)
	}
	if sessions {
		// SessionResult is Result's schema and SessionCallInfo's (allOf).
		walk(reflect.TypeFor[execapi.SessionRequest](), false)
		for _, typ := range []reflect.Type{reflect.TypeFor[execapi.SessionInfo](), reflect.TypeFor[execapi.SessionCallInfo](), reflect.TypeFor[execapi.SessionEnd](),
			reflect.TypeFor[sessionList](), reflect.TypeFor[sessionFileWritten]()} {
			walk(typ, true)
		}
		result := mustJSON(t, d.schema(t, "SessionResult"))
		for _, part := range []string{"#/components/schemas/Result", `"session":{"$ref":"#/components/schemas/SessionCallInfo"}`} {
			if !strings.Contains(result, part) {
				t.Errorf("SessionResult's schema %s does not hold %s", result, part)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
