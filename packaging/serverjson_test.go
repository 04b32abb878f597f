package packaging

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
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

// serverJSON renders packaging/server.json for version and the bundle
// file with the script release.sh runs, so that the test checks what a
// release ships.
func serverJSON(t *testing.T, version, bundle string) []byte {
	t.Helper()
	out, err := exec.Command("./server-json.sh", version, bundle).Output()
	if err != nil {
		t.Fatalf("server-json.sh %s %s: %v", version, bundle, err)
	}
	return out
}

// fakeBundle writes bytes that stand for a .mcpb where the test needs only
// their checksum, and returns its path and sha256.
func fakeBundle(t *testing.T) (path, sha string) {
	t.Helper()
	data := []byte("not a bundle, only bytes to sum")
	path = filepath.Join(t.TempDir(), "scratchrun-mcp.mcpb")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, hex.EncodeToString(sum[:])
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

// githubReleaseAsset is the path of a GitHub release's asset, the
// registry's pattern (internal/validators/registries/mcpb.go).
var githubReleaseAsset = regexp.MustCompile(`^/([a-zA-Z0-9]([a-zA-Z0-9\-]{0,37}[a-zA-Z0-9])?)/([a-zA-Z0-9._\-]+)/releases/download/([^/]+)/([^/]+)$`)

// validateMCPB is the registry's ValidateMCPB less the download (and less
// GitLab, which ScratchRun does not publish to): a checksum, no
// registryBaseUrl, and an https URL of a GitHub release's asset with "mcp"
// in it.
func validateMCPB(p model.Package) error {
	if p.FileSHA256 == "" {
		return errors.New("an MCPB package must include a fileSha256")
	}
	if p.RegistryBaseURL != "" {
		return errors.New("an MCPB package has no registryBaseUrl")
	}
	u, err := url.Parse(p.Identifier)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || (u.Host != "github.com" && u.Host != "www.github.com") || !githubReleaseAsset.MatchString(u.Path) {
		return fmt.Errorf("identifier %s is not https://github.com/OWNER/REPO/releases/download/TAG/FILE", p.Identifier)
	}
	if !strings.Contains(strings.ToLower(p.Identifier), "mcp") {
		return fmt.Errorf("identifier %s must contain 'mcp'", p.Identifier)
	}
	return nil
}

// validateServerJSON checks data as the registry does before it fetches
// any package: the schema, then the rules of its semantic validator
// (internal/validators, which another module cannot import) that bear on
// this file: a remote is streamable-http or sse over https, and each
// {variable} of its URL is defined in its variables; an MCPB package is a
// GitHub release's asset with its checksum; an OCI package names its
// version in its identifier only. Unknown fields, which the schema
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
		if p.RegistryType == model.RegistryTypeMCPB {
			if err := validateMCPB(p); err != nil {
				return fmt.Errorf("packages[%d]: %w", i, err)
			}
			continue
		}
		if p.RegistryType != model.RegistryTypeOCI {
			return fmt.Errorf("packages[%d]: registryType %s, which the release does not make", i, p.RegistryType)
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
// release's version, the bundle's release URL and checksum, the image tag
// container-image.sh gives that version, and the remote's Authorization
// header as a required secret.
func TestServerJSON(t *testing.T) {
	bundle, sha := fakeBundle(t)
	data := serverJSON(t, releaseVersion, bundle)
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
	if len(s.Packages) != 2 {
		t.Fatalf("packages %+v, want the bundle and the image", s.Packages)
	}
	mcpb, oci := s.Packages[0], s.Packages[1]
	wantURL := "https://github.com/scratchrun/scratchrun/releases/download/" + releaseVersion + "/scratchrun-mcp-" + releaseVersion + ".mcpb"
	if mcpb.RegistryType != model.RegistryTypeMCPB || mcpb.Identifier != wantURL || mcpb.FileSHA256 != sha || mcpb.Transport.Type != model.TransportTypeStdio {
		t.Errorf("package %+v, want the bundle %s with sha256 %s over stdio", mcpb, wantURL, sha)
	}
	if oci.RegistryType != model.RegistryTypeOCI || oci.Identifier != "ghcr.io/scratchrun/scratchrun:"+releaseVersion {
		t.Errorf("package %+v, want the image ghcr.io/scratchrun/scratchrun:%s", oci, releaseVersion)
	}
	if len(s.Remotes) != 1 || len(s.Remotes[0].Headers) != 1 {
		t.Fatalf("remotes %+v, want one with one header", s.Remotes)
	}
	if h := s.Remotes[0].Headers[0]; h.Name != "Authorization" || !h.IsSecret || !h.IsRequired {
		t.Errorf("header %+v, want Authorization, secret and required", h)
	}
	// A version container-image.sh must change for a tag: "+" cannot be
	// in one.
	data = serverJSON(t, "v1.2.3+4", bundle)
	if !bytes.Contains(data, []byte(`"ghcr.io/scratchrun/scratchrun:v1.2.3-4"`)) || !bytes.Contains(data, []byte(`"version": "1.2.3+4"`)) {
		t.Errorf("v1.2.3+4 gives\n%s", data)
	}
}

// What the registry refuses is refused here, naming what is wrong.
func TestServerJSONRefused(t *testing.T) {
	schema := registrySchema(t)
	bundle, sha := fakeBundle(t)
	good := serverJSON(t, releaseVersion, bundle)
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"the remote's variable missing", `"host": {`, `"hostname": {`, `uses variable "host", not in its variables`},
		// The draft schema's {baseUrl}/mcp is not yet allowed by 2025-12-11.
		{"a URL starting with a variable", `"https://{host}/mcp"`, `"{host}/mcp"`, "does not match pattern"},
		{"plain http", `"https://{host}/mcp"`, `"http://{host}/mcp"`, "is not https"},
		{"a misspelt field", `"isSecret"`, `"isSecrett"`, `unknown field "isSecrett"`},
		{"an OCI version field", `"registryType": "oci",`, `"registryType": "oci", "version": "1",`, "no version"},
		{"a bundle without its checksum", `"fileSha256": "` + sha + `",`, ``, "must include a fileSha256"},
		{"a bundle with a short checksum", `"fileSha256": "`, `"fileSha256": "0`, "does not match pattern"},
		{"a bundle not among a release's assets", `/releases/download/`, `/raw/main/`, "is not https://github.com/OWNER/REPO/releases/download/TAG/FILE"},
		// (".mcpb" alone meets the rule.)
		{"a bundle's URL without mcp", "/scratchrun-mcp-" + releaseVersion + `.mcpb"`, "/scratchrun-" + releaseVersion + `.zip"`, "must contain 'mcp'"},
		{"a bundle with a registryBaseUrl", `"registryType": "mcpb",`, `"registryType": "mcpb", "registryBaseUrl": "https://github.com",`, "no registryBaseUrl"},
		{"a bundle over http", `"https://github.com/scratchrun/scratchrun/releases`, `"http://github.com/scratchrun/scratchrun/releases`, "is not https://github.com"},
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
