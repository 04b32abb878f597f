package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	apiv0 "github.com/modelcontextprotocol/registry/pkg/api/v0"
	"github.com/modelcontextprotocol/registry/pkg/model"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// serverJSON renders packaging/server.json for version with the script
// release.sh runs, so that the test checks what a release ships.
func serverJSON(t *testing.T, version string) []byte {
	t.Helper()
	out, err := exec.Command("./server-json.sh", version).Output()
	if err != nil {
		t.Fatalf("server-json.sh %s: %v", version, err)
	}
	return out
}

// registrySchema is the 2025-12-11 server.json schema the registry module
// itself embeds and validates with (internal/validators/schemas), read
// from the module's copy in the module cache: go.mod's version of the
// registry is the one the test checks against, with no copy to keep.
func registrySchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/modelcontextprotocol/registry").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/modelcontextprotocol/registry: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	data, err := os.ReadFile(filepath.Join(dir, "internal", "validators", "schemas", model.CurrentSchemaVersion+".json"))
	if err != nil {
		t.Fatal(err)
	}
	// The same calls as the registry's validateServerJSONSchema, with
	// the library and version its go.mod names.
	c := jsonschema.NewCompiler()
	if err := c.AddResource(model.CurrentSchemaURL, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(model.CurrentSchemaURL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// templateVar is a {name} in a URL template, as the registry reads them.
var templateVar = regexp.MustCompile(`\{([^{}]+)\}`)

// validateServerJSON checks data as the registry does before it fetches
// any package: the schema, then the rules of its semantic validator
// (internal/validators, which another module cannot import) that bear on
// this file: a remote is streamable-http or sse over https, and each
// {variable} of its URL is defined in its variables; an OCI package names
// its version in its identifier only. Unknown fields, which the schema
// lets through and the registry drops, are refused, so a misspelt
// isSecret cannot pass.
func validateServerJSON(schema *jsonschema.Schema, data []byte) error {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	if err := schema.Validate(doc); err != nil {
		return fmt.Errorf("schema: %#v", err)
	}
	var s apiv0.ServerJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return err
	}
	if s.Schema != model.CurrentSchemaURL {
		return fmt.Errorf("$schema %s, the registry's current one is %s", s.Schema, model.CurrentSchemaURL)
	}
	for i, r := range s.Remotes {
		if r.Type != model.TransportTypeStreamableHTTP && r.Type != model.TransportTypeSSE {
			return fmt.Errorf("remotes[%d]: type %s", i, r.Type)
		}
		if !strings.HasPrefix(r.URL, "https://") {
			return fmt.Errorf("remotes[%d]: url %s is not https", i, r.URL)
		}
		for _, m := range templateVar.FindAllStringSubmatch(r.URL, -1) {
			if _, ok := r.Variables[m[1]]; !ok {
				return fmt.Errorf("remotes[%d]: url %s uses variable %q, not in its variables", i, r.URL, m[1])
			}
		}
	}
	for i, p := range s.Packages {
		if p.RegistryType != model.RegistryTypeOCI {
			continue
		}
		if p.Version != "" || p.RegistryBaseURL != "" {
			return fmt.Errorf("packages[%d]: an OCI package has no version or registryBaseUrl", i)
		}
		if _, err := name.NewTag(p.Identifier, name.StrictValidation); err != nil {
			return fmt.Errorf("packages[%d]: identifier: %w", i, err)
		}
	}
	return nil
}

// The release's server.json is valid for the registry, carries the
// release's version, the image tag container-image.sh gives that version,
// and the remote's Authorization header as a required secret.
func TestServerJSON(t *testing.T) {
	data := serverJSON(t, releaseVersion)
	if err := validateServerJSON(registrySchema(t), data); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var s apiv0.ServerJSON
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(releaseVersion, "v"); s.Version != want {
		t.Errorf("version %q, want %q", s.Version, want)
	}
	if len(s.Packages) != 1 || s.Packages[0].Identifier != "ghcr.io/scratchrun/scratchrun:"+releaseVersion {
		t.Errorf("packages %+v, want the image ghcr.io/scratchrun/scratchrun:%s", s.Packages, releaseVersion)
	}
	if len(s.Remotes) != 1 || len(s.Remotes[0].Headers) != 1 {
		t.Fatalf("remotes %+v, want one with one header", s.Remotes)
	}
	if h := s.Remotes[0].Headers[0]; h.Name != "Authorization" || !h.IsSecret || !h.IsRequired {
		t.Errorf("header %+v, want Authorization, secret and required", h)
	}
	// A version container-image.sh must change for a tag: "+" cannot be
	// in one.
	data = serverJSON(t, "v1.2.3+4")
	if !bytes.Contains(data, []byte(`"ghcr.io/scratchrun/scratchrun:v1.2.3-4"`)) || !bytes.Contains(data, []byte(`"version": "1.2.3+4"`)) {
		t.Errorf("v1.2.3+4 gives\n%s", data)
	}
}

// What the registry refuses is refused here, naming what is wrong.
func TestServerJSONRefused(t *testing.T) {
	schema := registrySchema(t)
	good := serverJSON(t, releaseVersion)
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"the remote's variable missing", `"host": {`, `"hostname": {`, `uses variable "host", not in its variables`},
		// The draft schema's {baseUrl}/mcp is not yet allowed by 2025-12-11.
		{"a URL starting with a variable", `"https://{host}/mcp"`, `"{host}/mcp"`, "does not match pattern"},
		{"plain http", `"https://{host}/mcp"`, `"http://{host}/mcp"`, "is not https"},
		{"a misspelt field", `"isSecret"`, `"isSecrett"`, `unknown field "isSecrett"`},
		{"an OCI version field", `"registryType": "oci",`, `"registryType": "oci", "version": "1",`, "no version"},
	} {
		bad := bytes.Replace(good, []byte(c.old), []byte(c.new), 1)
		if bytes.Equal(bad, good) {
			t.Fatalf("%s: %s is not in server.json", c.name, c.old)
		}
		err := validateServerJSON(schema, bad)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
