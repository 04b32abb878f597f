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

// apiDoc is the document, decoded.
type apiDoc map[string]any

func loadAPIDoc(t *testing.T) apiDoc {
	t.Helper()
	var d apiDoc
	if err := json.Unmarshal(openapi.JSON(), &d); err != nil {
		t.Fatalf("the OpenAPI document is not JSON: %v", err)
	}
	return d
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
	d := loadAPIDoc(t)
	// With every optional route mounted: MCP and OAuth.
	ts := startOAuthServer(t, &tokenTable{})
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
		served = append(served, r.Method+" "+r.Path)
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
		if a.status == http.StatusNotFound || a.status == http.StatusMethodNotAllowed {
			t.Errorf("%s is documented but answered %d: %s", op, a.status, a.body)
		}
	}
	// The API's routes serve no method besides the documented one.
	for _, r := range ts.srv.served {
		if r.Outside != "" || r.Method == "" {
			continue
		}
		a, err := ts.do(context.Background(), http.MethodDelete, r.Path, key, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusMethodNotAllowed || a.errorBody(t).Code != CodeMethodNotAllowed || a.header.Get("Allow") != r.Method {
			t.Errorf("DELETE %s: %d %s (Allow %q), want 405 allowing %s", r.Path, a.status, a.body, a.header.Get("Allow"), r.Method)
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
func TestOpenAPIEnumsMatchTheCode(t *testing.T) {
	d := loadAPIDoc(t)
	isCode := func(name, _ string) bool { return strings.HasPrefix(name, "Code") }
	codes := append(constants(t, ".", isCode), constants(t, "../execapi", isCode)...)
	sort.Strings(codes)
	detail := obj(d.schema(t, "ErrorDetail"), "properties")
	sameSet(t, "error code", "the code", codes, "ErrorDetail.code's enum", enum(obj(detail, "code")))

	reasons := constants(t, "../execapi", func(_, typ string) bool { return typ == "RefusalReason" })
	sameSet(t, "refusal reason", "the code", reasons, "ErrorDetail.reason's enum", enum(obj(detail, "reason")))

	outcomes := constants(t, "../execapi", func(_, typ string) bool { return typ == "Outcome" })
	sameSet(t, "outcome", "the code", outcomes, "Result.outcome's enum", enum(obj(d.schema(t, "Result"), "properties", "outcome")))

	var admission []string
	for _, r := range execapi.AdmissionRefusals {
		admission = append(admission, string(r))
	}
	sort.Strings(admission)
	sameSet(t, "admission refusal", "execapi.AdmissionRefusals", admission, "AdmissionInfo.rejections' names",
		enum(obj(d.schema(t, "AdmissionInfo"), "properties", "rejections", "propertyNames")))
}

// Every JSON field of the request, the result, the error document, the
// runtimes listing and the stream's event data (and of the structs within
// them) is a property of the schema named after its Go type, and the
// reverse; in what the server
// answers, the fields always sent (no omitempty) are the required ones.
func TestOpenAPISchemasMatchTheStructs(t *testing.T) {
	d := loadAPIDoc(t)
	// The data of the stream's events are unexported types.
	schemaNames := map[reflect.Type]string{reflect.TypeFor[streamStarted](): "Started", reflect.TypeFor[streamChunk](): "Output"}
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
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
