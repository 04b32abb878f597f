package execapi

import (
	"encoding/base64"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Checked is a Request that passed validation, with defaults applied and file
// contents decoded. Engines take a Checked (CheckedExecutor), so unchecked
// input cannot reach a sandbox and nothing is validated twice.
type Checked struct {
	Runtime     string
	Code        string
	Timeout     time.Duration
	MemoryMB    int
	Env         map[string]string
	Files       []InputFile
	ReturnFiles []string
	Network     string
}

// InputFile is one file written into the sandbox before the run.
type InputFile struct {
	Path string
	Data []byte
}

var (
	runtimeNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	envNamePattern     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// maxPathLength keeps paths well inside PATH_MAX with room for the sandbox root.
const maxPathLength = 1024

// forbiddenRoots are pseudo file systems of the sandbox: writing there is
// meaningless or hostile and reading them back leaks nothing useful.
var forbiddenRoots = []string{"/proc", "/sys", "/dev"}

// ValidateRuntimeName checks the shape of a runtime name (not whether it exists).
func ValidateRuntimeName(field, name string) error {
	if name == "" {
		return invalid(field, "is required (e.g. \"python3.13\")")
	}
	if !runtimeNamePattern.MatchString(name) {
		return invalid(field, "%q is not a runtime name: use lowercase letters, digits, '.', '-' and '_' (at most 64)", name)
	}
	return nil
}

// ValidatePath checks that p is a path a request may name inside the sandbox:
// absolute, already clean (no "..", ".", "//" or trailing slash), not the root,
// not under /proc, /sys or /dev, and free of control and format characters
// (a U+202E in a path would reorder how notes and logs that echo it read).
func ValidatePath(field, p string) error {
	switch {
	case p == "":
		return invalid(field, "path is empty")
	case strings.ContainsRune(p, 0):
		return invalid(field, "path %q contains a NUL byte", p)
	case !utf8.ValidString(p):
		return invalid(field, "path is not valid UTF-8")
	case strings.IndexFunc(p, isHiddenRune) >= 0:
		r, _ := utf8.DecodeRuneInString(p[strings.IndexFunc(p, isHiddenRune):])
		return invalid(field, "path %q contains the control or format character %q; use printable characters only", p, r)
	case len(p) > maxPathLength:
		return invalid(field, "path is longer than %d bytes", maxPathLength)
	case !strings.HasPrefix(p, "/"):
		return invalid(field, "path %q is relative: use an absolute path such as /tmp/data.csv", p)
	case p == "/":
		return invalid(field, "path \"/\" names the root directory, not a file")
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == ".." {
			return invalid(field, "path %q contains \"..\"", p)
		}
	}
	if path.Clean(p) != p {
		return invalid(field, "path %q is not clean: remove \".\", \"//\" and trailing slashes (use %q)", p, path.Clean(p))
	}
	for _, root := range forbiddenRoots {
		if p == root || strings.HasPrefix(p, root+"/") {
			return invalid(field, "path %q is under %s, which requests may not name", p, root)
		}
	}
	return nil
}

// isHiddenRune reports runes that change how text reads rather than showing
// as themselves: controls (C0, DEL, C1), format characters such as the
// bidirectional overrides U+202A..U+202E and zero-width joiners, and the line
// and paragraph separators.
func isHiddenRune(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Validate checks req against the policy and returns it with defaults applied.
// The error is a *ValidationError naming the first offending field.
func (p Policy) Validate(req Request) (Checked, error) {
	c := Checked{Runtime: req.Runtime, Code: req.Code}
	if err := ValidateRuntimeName("runtime", req.Runtime); err != nil {
		return Checked{}, err
	}
	if req.Code == "" {
		return Checked{}, invalid("code", "is required and must not be empty")
	}
	if len(req.Code) > p.MaxCodeBytes {
		return Checked{}, invalid("code", "is %d bytes; the limit is %d", len(req.Code), p.MaxCodeBytes)
	}
	if strings.ContainsRune(req.Code, 0) {
		return Checked{}, invalid("code", "contains a NUL byte")
	}

	var err error
	if c.Timeout, err = p.timeout(req.Limits.TimeoutMS); err != nil {
		return Checked{}, err
	}
	if c.MemoryMB, err = p.memory(req.Limits.MemoryMB); err != nil {
		return Checked{}, err
	}
	if c.Env, err = p.env(req.Env); err != nil {
		return Checked{}, err
	}
	if c.Files, err = p.files(req.Files, req.FilesBase64); err != nil {
		return Checked{}, err
	}
	if c.ReturnFiles, err = p.returnFiles(req.ReturnFiles); err != nil {
		return Checked{}, err
	}
	if c.Network, err = p.network(req.Network); err != nil {
		return Checked{}, err
	}
	return c, nil
}

// WithDefaults returns req with what it leaves to the operator (timeout,
// memory, network) filled in from p, as Validate fills them; nothing is
// checked. A front end that forwards requests sends them filled, so that
// every worker runs them alike whatever its own defaults, and placement
// knows the network.
func (p Policy) WithDefaults(req Request) Request {
	// The helpers' zero cases are the one source of the defaults, and
	// they never fail.
	if req.Limits.TimeoutMS == 0 {
		d, _ := p.timeout(0)
		req.Limits.TimeoutMS = int(d.Milliseconds())
	}
	if req.Limits.MemoryMB == 0 {
		req.Limits.MemoryMB, _ = p.memory(0)
	}
	if req.Network == "" {
		req.Network, _ = p.network("")
	}
	return req
}

// timeout is the run's timeout for a request's timeout_ms (0: the default).
func (p Policy) timeout(ms int) (time.Duration, error) {
	if ms == 0 {
		return p.DefaultTimeout, nil
	}
	maxMS := int(p.MaxTimeout / time.Millisecond)
	minMS := max(int(p.MinTimeout/time.Millisecond), 1)
	if ms < minMS || ms > maxMS {
		return 0, invalid("limits.timeout_ms", "is %d; it must be between %d and %d (omit it for the default %d)", ms, minMS, maxMS, p.DefaultTimeout.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// memory is the run's memory limit for a request's memory_mb (0: the default).
func (p Policy) memory(mb int) (int, error) {
	if mb == 0 {
		return p.DefaultMemoryMB, nil
	}
	if mb < max(p.MinMemoryMB, 1) || mb > p.MaxMemoryMB {
		return 0, invalid("limits.memory_mb", "is %d; it must be between %d and %d (omit it for the default %d)", mb, p.MinMemoryMB, p.MaxMemoryMB, p.DefaultMemoryMB)
	}
	return mb, nil
}

func (p Policy) env(env map[string]string) (map[string]string, error) {
	if len(env) > p.MaxEnv {
		return nil, invalid("env", "has %d entries; the limit is %d", len(env), p.MaxEnv)
	}
	total := 0
	out := make(map[string]string, len(env))
	for _, name := range sortedKeys(env) {
		value := env[name]
		field := fmt.Sprintf("env[%q]", name)
		if !envNamePattern.MatchString(name) {
			return nil, invalid(field, "is not a valid variable name: use letters, digits and '_', not starting with a digit")
		}
		if strings.ContainsRune(value, 0) {
			return nil, invalid(field, "value contains a NUL byte")
		}
		total += len(name) + len(value) + 2
		out[name] = value
	}
	if total > p.MaxEnvBytes {
		return nil, invalid("env", "is %d bytes in all; the limit is %d", total, p.MaxEnvBytes)
	}
	return out, nil
}

func (p Policy) files(text, encoded map[string]string) ([]InputFile, error) {
	if n := len(text) + len(encoded); n > p.MaxFiles {
		return nil, invalid("files", "has %d entries; the limit is %d", n, p.MaxFiles)
	}
	var out []InputFile
	total := 0
	for _, name := range sortedKeys(text) {
		if err := ValidatePath(fmt.Sprintf("files[%q]", name), name); err != nil {
			return nil, err
		}
		total += len(text[name])
		out = append(out, InputFile{Path: name, Data: []byte(text[name])})
	}
	for _, name := range sortedKeys(encoded) {
		field := fmt.Sprintf("files_base64[%q]", name)
		if err := ValidatePath(field, name); err != nil {
			return nil, err
		}
		if _, dup := text[name]; dup {
			return nil, invalid(field, "path is also in files; name it once")
		}
		data, err := base64.StdEncoding.DecodeString(encoded[name])
		if err != nil {
			return nil, invalid(field, "is not valid base64: %v", err)
		}
		total += len(data)
		out = append(out, InputFile{Path: name, Data: data})
	}
	if total > p.MaxFileBytes {
		return nil, invalid("files", "hold %d bytes in all; the limit is %d", total, p.MaxFileBytes)
	}
	// A file may not also be a parent directory of another (they would clash).
	for _, a := range out {
		for _, b := range out {
			if strings.HasPrefix(b.Path, a.Path+"/") {
				return nil, invalid(fmt.Sprintf("files[%q]", a.Path), "is a file but %q needs it to be a directory", b.Path)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (p Policy) returnFiles(paths []string) ([]string, error) {
	if len(paths) > p.MaxReturnFiles {
		return nil, invalid("return_files", "has %d entries; the limit is %d", len(paths), p.MaxReturnFiles)
	}
	seen := make(map[string]bool, len(paths))
	out := make([]string, 0, len(paths))
	for i, name := range paths {
		if err := ValidatePath(fmt.Sprintf("return_files[%d]", i), name); err != nil {
			return nil, err
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

// network is the run's network mode for a request's network ("": the default).
func (p Policy) network(mode string) (string, error) {
	switch mode {
	case "":
		return p.NetworkDefault, nil
	case NetworkNone:
		return mode, nil
	case NetworkEgress:
		if !p.AllowEgress {
			return "", invalid("network", "\"egress\" is not allowed on this server; use \"none\" (sandboxes have no network)")
		}
		return mode, nil
	default:
		return "", invalid("network", "is %q; use \"none\" or \"egress\"", mode)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
