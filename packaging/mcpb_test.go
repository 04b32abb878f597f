package packaging

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// bundleName is the release's Claude Desktop extension.
const bundleName = "scratchrun-mcp-" + releaseVersion + ".mcpb"

// mcpbManifest is what the tests read of an MCPB manifest (0.3).
type mcpbManifest struct {
	ManifestVersion string `json:"manifest_version"`
	Name, Version   string
	Icon            string
	Server          struct {
		Type       string
		EntryPoint string    `json:"entry_point"`
		MCPConfig  mcpConfig `json:"mcp_config"`
	}
	Tools         []struct{ Name string }
	Compatibility struct{ Platforms []string }
	UserConfig    map[string]struct {
		Type                string
		Required, Sensitive bool
	} `json:"user_config"`
}

// mcpConfig is how a client starts the server, or (in
// platform_overrides) what one OS changes of it.
type mcpConfig struct {
	Command           string
	Args              []string
	Env               map[string]string
	PlatformOverrides map[string]mcpConfig `json:"platform_overrides"`
}

// forPlatform is the configuration a client on platform (darwin, win32,
// linux) runs: the override's fields where it sets them.
func (c mcpConfig) forPlatform(platform string) mcpConfig {
	o := c.PlatformOverrides[platform]
	out := mcpConfig{Command: c.Command, Args: c.Args, Env: c.Env}
	if o.Command != "" {
		out.Command = o.Command
	}
	if o.Args != nil {
		out.Args = o.Args
	}
	if o.Env != nil {
		out.Env = o.Env
	}
	return out
}

// nodeTool is one of packaging/mcpb's pinned npm commands (mcpb,
// mcp-remote), which scripts/test.sh installs with npm ci there.
func nodeTool(t *testing.T, name string) string {
	t.Helper()
	testenv.SkipIfShort(t, "runs packaging/mcpb's npm packages with Node.js")
	path, err := filepath.Abs(filepath.Join("mcpb", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: run npm ci in packaging/mcpb (scripts/test.sh does)", err)
	}
	return path
}

// mcpb runs the pinned mcpb CLI with args, returning its output and
// whether it exited 0.
func mcpb(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(nodeTool(t, "mcpb"), args...).CombinedOutput()
	return string(out), err == nil
}

// stageTemplate lays out packaging/mcpb's manifest (with a version filled
// in, as release.sh does) and icon in a new folder, with edit applied to
// the manifest's text, and returns the folder.
func stageTemplate(t *testing.T, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	manifest, err := os.ReadFile("mcpb/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	text := edit(strings.ReplaceAll(string(manifest), "${VERSION}", "1.2.3"))
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	icon, err := os.ReadFile("mcpb/icon.png")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "icon.png"), icon, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mcpb validate accepts packaging/mcpb's manifest and icon, and refuses
// (and so mcpb pack refuses) a manifest with a key the 0.3 schema does
// not know, a misspelt user_config field, and a missing or non-PNG icon:
// the check the release relies on is not vacuous.
func TestMCPBValidate(t *testing.T) {
	same := func(s string) string { return s }
	if out, ok := mcpb(t, "validate", stageTemplate(t, same)); !ok {
		t.Fatalf("mcpb validate: %s", out)
	}
	for _, c := range []struct {
		name string
		edit func(string) string
		// breakDir changes the staged folder after the manifest is written.
		breakDir func(dir string)
		want     string
	}{
		{name: "an unknown key", edit: func(s string) string {
			return strings.Replace(s, `"name": "scratchrun",`, `"name": "scratchrun", "colour": "blue",`, 1)
		}, want: "colour"},
		{name: "a misspelt user_config field", edit: func(s string) string {
			return strings.Replace(s, `"sensitive": true`, `"secret": true`, 1)
		}, want: "secret"},
		{name: "no icon", edit: same, breakDir: func(dir string) { os.Remove(filepath.Join(dir, "icon.png")) }, want: "icon"},
		{name: "an icon that is not a PNG", edit: same, breakDir: func(dir string) {
			os.WriteFile(filepath.Join(dir, "icon.png"), []byte("GIF89a"), 0o644)
		}, want: "PNG"},
	} {
		dir := stageTemplate(t, c.edit)
		if c.breakDir != nil {
			c.breakDir(dir)
		}
		out, ok := mcpb(t, "validate", dir)
		if ok || !strings.Contains(out, c.want) {
			t.Errorf("%s: mcpb validate exited 0 %v, output %q; want a failure naming %q", c.name, ok, out, c.want)
		}
		if out, ok := mcpb(t, "pack", dir, filepath.Join(t.TempDir(), "x.mcpb")); ok {
			t.Errorf("%s: mcpb pack packed it: %s", c.name, out)
		}
	}
}

// unzipBundle unpacks a .mcpb into a new folder, keeping the files' modes
// (mcpb pack records them), and returns the folder. Every entry must have
// the commit's time (release.sh's SOURCE_DATE_EPOCH, in the 2-second steps
// of a zip's times), not the moment mcpb packed it, so that two builds
// make the same bundle.
func unzipBundle(t *testing.T, path string) string {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		out, err := exec.Command("git", "log", "-1", "--format=%ct", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		epoch = strings.TrimSpace(string(out))
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range r.File {
		if got := f.Modified.Unix(); got != secs-secs%2 {
			t.Errorf("%s: %s at %v, want the commit's time %v", path, f.Name, f.Modified, time.Unix(secs-secs%2, 0).UTC())
		}
		if f.FileInfo().IsDir() {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
			t.Fatalf("%s: entry %q leaves the folder", path, f.Name)
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %s: %v", path, f.Name, err)
		}
		if err := os.WriteFile(dst, data, f.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readManifest decodes dir's manifest.json.
func readManifest(t *testing.T, dir string) mcpbManifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m mcpbManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// bundlePath is the file in dir a manifest's command names.
func bundlePath(t *testing.T, dir, command string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(command, "${__dirname}/")
	if !ok {
		t.Fatalf("command %q is not under ${__dirname}", command)
	}
	return filepath.Join(dir, filepath.FromSlash(rel))
}

// The release's bundle: mcpb validate and mcpb pack accept it as
// unpacked; its manifest carries the release's version, a binary server
// whose command for each platform it lists is a file in the bundle, built
// for that platform (macOS's one binary holding both arm64 and amd64,
// Windows' PE amd64, Linux's ELF x86-64, executable), the user_config the
// command's environment names, and the tool the server has.
func TestReleaseMCPB(t *testing.T) {
	dist := release(t)
	dir := unzipBundle(t, filepath.Join(dist, bundleName))
	// mcpb reads the bundle as release.sh left it, its times rewritten.
	if out, ok := mcpb(t, "unpack", filepath.Join(dist, bundleName), t.TempDir()); !ok {
		t.Errorf("mcpb unpack: %s", out)
	}
	if out, ok := mcpb(t, "validate", dir); !ok {
		t.Errorf("mcpb validate of the unpacked bundle: %s", out)
	}
	if out, ok := mcpb(t, "pack", dir, filepath.Join(t.TempDir(), "again.mcpb")); !ok {
		t.Errorf("mcpb pack of the unpacked bundle: %s", out)
	}

	m := readManifest(t, dir)
	if m.ManifestVersion != "0.3" || m.Version != strings.TrimPrefix(releaseVersion, "v") || m.Server.Type != "binary" {
		t.Errorf("manifest %s, version %s, server type %s; want 0.3, %s, binary", m.ManifestVersion, m.Version, m.Server.Type, strings.TrimPrefix(releaseVersion, "v"))
	}
	if len(m.Tools) != 1 || m.Tools[0].Name != mcpserver.ToolName {
		t.Errorf("tools %+v, want %s alone", m.Tools, mcpserver.ToolName)
	}
	if u := m.UserConfig["server_url"]; !u.Required || u.Sensitive {
		t.Errorf("server_url %+v: want required, not sensitive", u)
	}
	// Empty: the client signs in with OAuth instead.
	if k := m.UserConfig["api_key"]; k.Required || !k.Sensitive {
		t.Errorf("api_key %+v: want sensitive and optional", k)
	}
	base := m.Server.MCPConfig
	if !slices.Equal(base.Args, []string{"mcp"}) || base.Env["SCRATCHRUN_API_URL"] != "${user_config.server_url}" ||
		base.Env["SCRATCHRUN_API_KEY"] != "${user_config.api_key}" {
		t.Errorf("mcp_config %+v: want `mcp` with the server URL and the key from user_config", base)
	}
	if bundlePath(t, dir, base.Command) != filepath.Join(dir, filepath.FromSlash(m.Server.EntryPoint)) {
		t.Errorf("entry_point %s is not the command %s", m.Server.EntryPoint, base.Command)
	}

	want := map[string]string{"darwin": "darwin/amd64+arm64", "win32": "windows/amd64", "linux": "linux/amd64"}
	var platforms []string
	for p := range want {
		platforms = append(platforms, p)
	}
	slices.Sort(platforms)
	if got := slices.Sorted(slices.Values(m.Compatibility.Platforms)); !slices.Equal(got, platforms) {
		t.Errorf("compatibility.platforms %v, want %v", got, platforms)
	}
	for _, p := range platforms {
		path := bundlePath(t, dir, base.forPlatform(p).Command)
		fi, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s: %s is not executable (%v)", p, path, fi.Mode())
		}
		data, _ := os.ReadFile(path)
		if got := bundleBinaryFor(data); got != want[p] {
			t.Errorf("%s: %s is for %s, want %s", p, filepath.Base(path), got, want[p])
		}
	}
	var files []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	slices.Sort(files)
	if wantFiles := []string{"icon.png", "manifest.json", "server/scratchrun-darwin", "server/scratchrun-linux-amd64",
		"server/scratchrun-windows-amd64.exe"}; !slices.Equal(files, wantFiles) {
		t.Errorf("the bundle holds %v, want %v", files, wantFiles)
	}
}

// bundleBinaryFor says which platforms an executable is for: a universal
// Mach-O file's CPUs joined with "+", else what executableFor says, or a
// Linux ELF file's architecture.
func bundleBinaryFor(data []byte) string {
	if ff, err := macho.NewFatFile(bytes.NewReader(data)); err == nil {
		var cpus []string
		for _, a := range ff.Arches {
			if a.Type != macho.TypeExec {
				return "not an executable"
			}
			cpus = append(cpus, map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[a.Cpu])
		}
		slices.Sort(cpus)
		return "darwin/" + strings.Join(cpus, "+")
	}
	if f, err := elf.NewFile(bytes.NewReader(data)); err == nil {
		if f.Machine == elf.EM_X86_64 && f.Type == elf.ET_EXEC {
			return "linux/amd64"
		}
		return "linux/" + f.Machine.String()
	}
	if _, err := pe.NewFile(bytes.NewReader(data)); err == nil {
		return executableFor(data)
	}
	return "unknown"
}

// connectStdio starts cmd as an MCP client would and connects the Go
// SDK's client to its stdio, with its stderr in the returned buffer for
// messages. The session is closed (and the process waited for) at the
// test's end.
func connectStdio(t *testing.T, cmd *exec.Cmd) (*mcp.ClientSession, *logBuffer) {
	t.Helper()
	stderr := &logBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "packaging-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v (stderr %q)", cmd.Path, err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// callExec lists the tools of cs, wanting the bundle's manifest's list,
// and runs bash code with scratchrun_exec, returning the result's text.
func callExec(t *testing.T, cs *mcp.ClientSession, stderr *logBuffer, code string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != mcpserver.ToolName {
		t.Fatalf("tools/list: %v %+v (stderr %q)", err, tools, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolName,
		Arguments: map[string]any{"runtime": "bash", "code": code}})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("call: %v %+v (stderr %q)", err, res, stderr.String())
	}
	text, _ := res.Content[0].(*mcp.TextContent)
	if text == nil {
		t.Fatalf("the result's first block is %T, not text", res.Content[0])
	}
	return text.Text
}

// The bundle's server started the way its manifest says for Linux, as
// Claude Desktop would: its command, args and env exactly (the env alone,
// nothing inherited), ${__dirname} the unpacked folder and user_config the
// URL of a real `scratchrun serve` on loopback and a key of its. The Go
// SDK's client calls the tool over the command's stdio; the code runs on
// the server and its output comes back.
func TestMCPBRunsAgainstServe(t *testing.T) {
	dist := release(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the bundle's Linux entry point is linux/amd64's")
	}
	dir := unzipBundle(t, filepath.Join(dist, bundleName))
	m := readManifest(t, dir)
	url, key := startServe(t)
	userConfig := strings.NewReplacer("${__dirname}", dir, "${user_config.server_url}", url, "${user_config.api_key}", key)

	cfg := m.Server.MCPConfig.forPlatform("linux")
	var args, env []string
	for _, a := range cfg.Args {
		args = append(args, userConfig.Replace(a))
	}
	for k, v := range cfg.Env {
		env = append(env, k+"="+userConfig.Replace(v))
	}
	cmd := exec.Command(userConfig.Replace(cfg.Command), args...)
	cmd.Env = env
	cs, stderr := connectStdio(t, cmd)
	if text := callExec(t, cs, stderr, "echo bundle-$((6*7))"); !strings.Contains(text, "bundle-42") {
		t.Errorf("the result does not carry the run's output:\n%s", text)
	}
	if strings.Contains(stderr.String(), key) {
		t.Errorf("the key shows in the server's log")
	}
}

// The README's fallback for clients that start no ScratchRun binary:
// mcp-remote (the version the README names, pinned in packaging/mcpb)
// with a static Authorization header to a real serve's /mcp, the header
// given as the README gives it in a client's JSON (the key from the
// environment, which mcp-remote expands itself) and as a terminal's one
// line after the shell has expanded it. It connects and the tool runs.
func TestMCPRemoteStaticHeader(t *testing.T) {
	remote := nodeTool(t, "mcp-remote")
	url, key := startServe(t)
	for _, c := range []struct {
		name, header string
		env          []string
	}{
		{"JSON, no spaces in args", "Authorization:${SCRATCHRUN_AUTH}", []string{"SCRATCHRUN_AUTH=Bearer " + key}},
		{"terminal", "Authorization: Bearer " + key, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(remote, url+"/mcp", "--header", c.header)
			// Its tokens and logs go to a folder of the test's.
			cmd.Env = append(os.Environ(), append(c.env, "MCP_REMOTE_CONFIG_DIR="+t.TempDir())...)
			cs, stderr := connectStdio(t, cmd)
			if text := callExec(t, cs, stderr, "echo remote-$((6*7))"); !strings.Contains(text, "remote-42") {
				t.Errorf("the result does not carry the run's output:\n%s", text)
			}
		})
	}
}
