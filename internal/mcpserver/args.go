package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// paramFields are the tool's parameters as execapi.CheckKeys knows them:
// all of them free values (the tool flattens "limits").
var paramFields = func() execapi.Fields {
	f := execapi.Fields{}
	for _, name := range paramNames {
		f[name] = nil
	}
	return f
}()

// argsToRequest turns the tool's arguments into the contract's Request. It
// checks only their shape (types, unknown, repeated or miscased names, an
// explicit 0 limit), naming the parameter; the Service validates values
// (ranges, paths, runtimes) and names the field.
func argsToRequest(raw json.RawMessage) (execapi.Request, error) {
	var req execapi.Request
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return req, &execapi.ValidationError{Field: "arguments", Message: "are missing: give at least runtime and code"}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return req, &execapi.ValidationError{Field: "arguments", Message: "must be a JSON object of parameters"}
	}
	// A repeated name (at any depth) would silently keep its last value, and
	// "Network" would be taken for network by a case-folding decoder.
	if err := execapi.CheckKeys(raw, paramFields); err != nil {
		return req, err
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		value := fields[name]
		if string(bytes.TrimSpace(value)) == "null" {
			continue // an explicit null means "not given"
		}
		var err error
		switch name {
		case "runtime":
			err = decodeField(name, value, &req.Runtime, "a string such as \"python3.13\"")
		case "code":
			err = decodeField(name, value, &req.Code, "a string holding the program")
		case "timeout_ms":
			err = decodeLimit(name, value, &req.Limits.TimeoutMS, "an integer number of milliseconds")
		case "memory_mb":
			err = decodeLimit(name, value, &req.Limits.MemoryMB, "an integer number of megabytes")
		case "env":
			err = decodeStringMap(name, value, &req.Env)
		case "files":
			err = decodeStringMap(name, value, &req.Files)
		case "files_base64":
			err = decodeStringMap(name, value, &req.FilesBase64)
		case "return_files":
			err = decodeStringList(name, value, &req.ReturnFiles)
		case "network":
			err = decodeField(name, value, &req.Network, "\"none\" or \"egress\"")
		default:
			err = &execapi.ValidationError{Field: name, Message: fmt.Sprintf("is not a parameter of %s; the parameters are %s",
				ToolName, strings.Join(paramNames, ", "))}
		}
		if err != nil {
			return execapi.Request{}, err
		}
	}
	return req, nil
}

func decodeField(name string, value json.RawMessage, dst any, want string) error {
	if err := json.Unmarshal(value, dst); err != nil {
		return &execapi.ValidationError{Field: name, Message: fmt.Sprintf("must be %s, not %s", want, jsonKind(value))}
	}
	return nil
}

// decodeLimit decodes a limit; 0 is refused, as on the wire: to the
// contract's Go callers 0 means "the default", which only an absent
// parameter means here.
func decodeLimit(name string, value json.RawMessage, dst *int, want string) error {
	if err := decodeInt(name, value, dst, want); err != nil {
		return err
	}
	if *dst == 0 {
		return execapi.ExplicitZero(name)
	}
	return nil
}

// decodeInt accepts integral numbers in any JSON spelling (5000, 5000.0,
// 5e3): some clients send every number as a float.
func decodeInt(name string, value json.RawMessage, dst *int, want string) error {
	var f float64
	if err := json.Unmarshal(value, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return &execapi.ValidationError{Field: name, Message: fmt.Sprintf("must be %s, not %s", want, jsonKind(value))}
	}
	*dst = int(f)
	return nil
}

func decodeStringMap(name string, value json.RawMessage, dst *map[string]string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(value, &m); err != nil {
		return &execapi.ValidationError{Field: name, Message: fmt.Sprintf("must be an object of strings, not %s", jsonKind(value))}
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return &execapi.ValidationError{Field: fmt.Sprintf("%s[%q]", name, k), Message: fmt.Sprintf("must be a string, not %s", jsonKind(v))}
		}
		out[k] = s
	}
	*dst = out
	return nil
}

func decodeStringList(name string, value json.RawMessage, dst *[]string) error {
	var list []json.RawMessage
	if err := json.Unmarshal(value, &list); err != nil {
		return &execapi.ValidationError{Field: name, Message: fmt.Sprintf("must be an array of absolute paths, not %s", jsonKind(value))}
	}
	out := make([]string, len(list))
	for i, v := range list {
		if err := json.Unmarshal(v, &out[i]); err != nil {
			return &execapi.ValidationError{Field: fmt.Sprintf("%s[%d]", name, i), Message: fmt.Sprintf("must be a string path, not %s", jsonKind(v))}
		}
	}
	*dst = out
	return nil
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		var f float64
		if json.Unmarshal(v, &f) == nil && f != math.Trunc(f) {
			return fmt.Sprintf("the fractional number %s", v)
		}
		if len(v) > 40 {
			return "a number"
		}
		return fmt.Sprintf("the number %s", v)
	}
}

// toolField turns a contract field name into the tool's parameter name
// (the tool flattens "limits").
func toolField(field string) string {
	for _, p := range []string{"limits.timeout_ms", "limits.memory_mb"} {
		if strings.HasPrefix(field, p) {
			return strings.TrimPrefix(field, "limits.")
		}
	}
	if field == "body" {
		return "arguments"
	}
	return field
}
