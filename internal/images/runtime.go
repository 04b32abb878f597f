package images

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FilePlaceholder is the token in a runtime's Command that the engine
// replaces with the path of the code file inside the sandbox.
const FilePlaceholder = "{file}"

// BootstrapPlaceholder is the token in a runtime's WarmCommand that the
// engine replaces with the program the interpreter starts with (a warm
// sandbox's bootstrap, a session's kernel).
const BootstrapPlaceholder = "{bootstrap}"

// ErrInvalidName is wrapped by every error about a malformed runtime or
// image name, so callers can report it as bad input.
var ErrInvalidName = errors.New("invalid name")

// Runtime is one entry of the catalog: how to run code of one language in
// one image. It is data; the engine writes the code to File inside the
// sandbox and runs Command with FilePlaceholder replaced by that path.
type Runtime struct {
	// Name is what requests ask for, e.g. "python3.13".
	Name string `json:"name"`
	// Image names the image whose rootfs the runtime runs in: a catalog
	// image, an imported rootfs (the runtime's own name), or, with Digest
	// set, the reference an OCI image came from (informational).
	Image string `json:"image"`
	// Digest, when set, is the OCI image the runtime runs in (its manifest
	// digest, "sha256:..."; a docker save archive's image ID).
	Digest string `json:"digest,omitempty"`
	// Command is the argv to run; one element contains FilePlaceholder.
	Command []string `json:"command"`
	// File is the base name the code is written to, e.g. "main.py".
	File string `json:"file"`
	// Env is added to the sandbox environment for this runtime.
	Env map[string]string `json:"env,omitempty"`
	// Version is the interpreter version shipped (informational).
	Version string `json:"version,omitempty"`
	// Libraries lists notable libraries available (informational).
	Libraries []string `json:"libraries,omitempty"`
	// Warm names how a warm sandbox pre-starts this runtime's interpreter
	// ("python", "node"), with WarmCommand as its command line; empty means
	// the runtime is always started cold.
	Warm        string   `json:"warm,omitempty"`
	WarmCommand []string `json:"warm_command,omitempty"`
	// Preload lists modules a "heavy" warm sandbox imports ahead of the
	// job; calls whose code imports one of them get such a sandbox.
	Preload []string `json:"preload,omitempty"`
	// Session names what of the interpreter a session of this runtime
	// keeps between calls: SessionPython and SessionNode keep a kernel
	// (variables and functions), started through WarmCommand with the
	// kernel as its bootstrap; SessionBash keeps the working directory
	// and exported variables. Empty (imported and OCI runtimes): files
	// and processes persist, and each call is a fresh process.
	Session string `json:"session,omitempty"`
}

// What a runtime's sessions keep (Runtime.Session).
const (
	SessionPython = "python"
	SessionNode   = "node"
	SessionBash   = "bash"
)

// ValidateName reports whether name is a usable runtime or image name:
// 1 to 64 characters from lowercase letters, digits, '.', '-' and '_',
// starting with a letter or digit. Names end up in paths and error
// messages, so anything else is rejected. field names the input in the
// error (e.g. "runtime").
func ValidateName(field, name string) error {
	if name == "" {
		return fmt.Errorf("%s: %w: must not be empty", field, ErrInvalidName)
	}
	if len(name) > 64 {
		return fmt.Errorf("%s: %w: %d characters, at most 64 allowed", field, ErrInvalidName, len(name))
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (i > 0 && (c == '.' || c == '-' || c == '_'))
		if !ok {
			return fmt.Errorf("%s: %w %q: use lowercase letters, digits, '.', '-' and '_' (starting with a letter or digit)", field, ErrInvalidName, name)
		}
	}
	return nil
}

// validate checks a runtime entry; errors name the offending field.
func (r Runtime) validate() error {
	if err := ValidateName("name", r.Name); err != nil {
		return err
	}
	if r.Digest != "" {
		if err := validateDigest(r.Digest); err != nil {
			return err
		}
		if r.Image == "" || len(r.Image) > 1024 || strings.IndexFunc(r.Image, func(c rune) bool { return c < ' ' || c == 0x7f }) >= 0 {
			return fmt.Errorf("image: %q is not an image reference", r.Image)
		}
	} else if err := ValidateName("image", r.Image); err != nil {
		return err
	}
	if err := validateCommand(r.Command); err != nil {
		return err
	}
	if err := validateFile(r.File); err != nil {
		return err
	}
	if err := r.validateSession(); err != nil {
		return err
	}
	return validateEnv(r.Env)
}

// validateSession checks Session: a kernel starts through WarmCommand, so
// a runtime that keeps one must have a WarmCommand with the bootstrap's
// placeholder.
func (r Runtime) validateSession() error {
	switch r.Session {
	case "", SessionBash:
		return nil
	case SessionPython, SessionNode:
		if !slices.ContainsFunc(r.WarmCommand, func(a string) bool { return strings.Contains(a, BootstrapPlaceholder) }) {
			return fmt.Errorf("session: %q keeps a kernel, started through warm_command, which has no %s", r.Session, BootstrapPlaceholder)
		}
		return nil
	}
	return fmt.Errorf("session: %q is not %q, %q or %q", r.Session, SessionPython, SessionNode, SessionBash)
}

// validateDigest accepts "sha256:" and 64 lowercase hex digits: digests
// name directories, so nothing else may pass.
func validateDigest(d string) error {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return fmt.Errorf("digest: %q is not sha256:<64 hex digits>", d)
	}
	return nil
}

func validateCommand(command []string) error {
	if len(command) == 0 {
		return errors.New("command: must not be empty")
	}
	if !strings.HasPrefix(command[0], "/") {
		// The sandbox has no PATH search we control; an absolute path
		// makes the runtime independent of the environment.
		return fmt.Errorf("command: program %q must be an absolute path", command[0])
	}
	found := false
	for i, arg := range command {
		if strings.IndexByte(arg, 0) >= 0 {
			return fmt.Errorf("command[%d]: contains a NUL byte", i)
		}
		if strings.Contains(arg, FilePlaceholder) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("command: must contain the placeholder %s where the code file's path goes, e.g. [\"/usr/bin/python3\", %q]", FilePlaceholder, FilePlaceholder)
	}
	return nil
}

func validateFile(file string) error {
	switch {
	case file == "":
		return errors.New("file: must not be empty (the code file's name, e.g. main.py)")
	case len(file) > 255:
		return errors.New("file: longer than 255 characters")
	case file == "." || file == "..", strings.ContainsAny(file, "/\x00"):
		return fmt.Errorf("file: %q must be a plain file name without '/'", file)
	}
	return nil
}

func validateEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env: invalid variable name %q", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("env: value of %s contains a NUL byte", k)
		}
	}
	return nil
}

// clone returns a deep copy, so callers can't change the store's state
// through the slices and map they are handed.
func (r Runtime) clone() Runtime {
	c := r
	c.Command = append([]string(nil), r.Command...)
	c.WarmCommand = append([]string(nil), r.WarmCommand...)
	c.Preload = append([]string(nil), r.Preload...)
	c.Libraries = append([]string(nil), r.Libraries...)
	c.Env = maps.Clone(r.Env)
	return c
}
