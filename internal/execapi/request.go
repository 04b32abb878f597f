package execapi

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Request is one call: run Code with Runtime in a fresh sandbox and report back.
type Request struct {
	// Runtime names a catalog entry such as "python3.13", "node20" or "bash".
	Runtime string `json:"runtime"`
	// Code is the program text, written to the runtime's file inside the sandbox.
	Code string `json:"code"`
	// Limits bound the run; absent fields take the operator's defaults.
	Limits Limits `json:"limits"`
	// Env is added to the sandbox's environment (secrets belong here, not in Code).
	Env map[string]string `json:"env,omitempty"`
	// Files maps absolute sandbox paths to text content written before the run.
	Files map[string]string `json:"files,omitempty"`
	// FilesBase64 is like Files for binary content, base64-encoded (standard
	// alphabet). It is an extension of the hosted contract; a path may appear in
	// only one of the two maps.
	FilesBase64 map[string]string `json:"files_base64,omitempty"`
	// ReturnFiles lists absolute sandbox paths read after the run and returned.
	ReturnFiles []string `json:"return_files,omitempty"`
	// Network is "none" (only loopback) or "egress" (the public internet, never
	// private networks or the host); empty means the operator's default.
	Network string `json:"network,omitempty"`
}

// Network modes of a Request.
const (
	NetworkNone   = "none"
	NetworkEgress = "egress"
)

// Limits bound one run. A zero field means "the operator's default" to Go
// callers; on the wire only an absent field does, and an explicit 0 is
// refused like any other value out of range (see UnmarshalJSON).
type Limits struct {
	// TimeoutMS is the wall-clock limit; when it passes, everything in the
	// sandbox is killed and the exit code is 124.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// MemoryMB caps memory (swap included) for all processes of the run together.
	MemoryMB int `json:"memory_mb,omitempty"`
}

// UnmarshalJSON decodes limits as the wire format has them: a field that is
// present is the caller's choice, so an explicit 0 is refused (naming the
// field) rather than read as "the default", which only an absent field means.
// Ranges are the Policy's to check.
func (l *Limits) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var wire struct {
		TimeoutMS *int `json:"timeout_ms"`
		MemoryMB  *int `json:"memory_mb"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			field := "limits"
			if typeErr.Field != "" {
				field += "." + typeErr.Field
			}
			return invalid(field, "must be %s, not a JSON %s", describeType(typeErr.Type.String()), typeErr.Value)
		}
		return err
	}
	*l = Limits{}
	if wire.TimeoutMS != nil {
		if *wire.TimeoutMS == 0 {
			return ExplicitZero("limits.timeout_ms")
		}
		l.TimeoutMS = *wire.TimeoutMS
	}
	if wire.MemoryMB != nil {
		if *wire.MemoryMB == 0 {
			return ExplicitZero("limits.memory_mb")
		}
		l.MemoryMB = *wire.MemoryMB
	}
	return nil
}

// ExplicitZero is the error for a limit given as 0: to a Go caller 0 means
// "the default", so every front end that reads limits from outside (JSON,
// MCP arguments, CLI flags) refuses it with this error naming field.
func ExplicitZero(field string) *ValidationError {
	return invalid(field, "is 0, which is below the minimum; omit the field to get the default")
}
