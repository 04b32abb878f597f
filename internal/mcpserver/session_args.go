package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// sessionArgs reads a session tool's arguments as an object, refusing what
// argsToRequest refuses (not an object, a name given twice or miscased)
// and any name not in params, naming the tool's own parameters.
func sessionArgs(tool string, raw json.RawMessage, params []string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, &execapi.ValidationError{Field: "arguments", Message: fmt.Sprintf("are missing; the parameters are %s", paramList(params))}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, &execapi.ValidationError{Field: "arguments", Message: "must be a JSON object of parameters"}
	}
	known := execapi.Fields{}
	for _, name := range params {
		known[name] = nil
	}
	if err := execapi.CheckKeys(raw, known); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(fields))
	for name, v := range fields {
		if string(bytes.TrimSpace(v)) == "null" {
			delete(fields, name) // an explicit null means "not given"
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(params, name) {
			return nil, &execapi.ValidationError{Field: name, Message: fmt.Sprintf("is not a parameter of %s; the parameters are %s", tool, paramList(params))}
		}
	}
	return fields, nil
}

// sessionIDArg takes the session_id parameter out of fields. An id of the
// wrong shape is answered as an unknown one, without asking the Service
// (execapi.IsSessionID).
func sessionIDArg(fields map[string]json.RawMessage) (string, error) {
	raw, ok := fields["session_id"]
	if !ok {
		return "", &execapi.ValidationError{Field: "session_id", Message: "is missing: give the id scratchrun_session_open returned"}
	}
	delete(fields, "session_id")
	var id string
	if err := decodeField("session_id", raw, &id, "a string such as \"ses_...\""); err != nil {
		return "", err
	}
	if !execapi.IsSessionID(id) {
		return "", execapi.ErrSessionNotFound
	}
	return id, nil
}

// argsToSessionRequest decodes scratchrun_session_open's arguments.
func argsToSessionRequest(raw json.RawMessage) (execapi.SessionRequest, error) {
	var req execapi.SessionRequest
	fields, err := sessionArgs(SessionOpenToolName, raw, sessionOpenParams)
	if err != nil {
		return req, err
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		value := fields[name]
		switch name {
		case "runtime":
			err = decodeField(name, value, &req.Runtime, "a string such as \"python3.13\"")
		case "network":
			err = decodeField(name, value, &req.Network, "\"none\" or \"egress\"")
		case "memory_mb":
			err = decodeLimit(name, value, &req.Limits.MemoryMB, "an integer number of megabytes")
		case "idle_ttl_ms":
			err = decodeLimit(name, value, &req.IdleTTLMS, "an integer number of milliseconds")
		}
		if err != nil {
			return execapi.SessionRequest{}, err
		}
	}
	return req, nil
}

// argsToSessionCall decodes scratchrun_session_run's arguments: the session
// and a Request decoded as scratchrun_exec's are (argsToRequest), so that
// the two tools read their common parameters alike.
func argsToSessionCall(raw json.RawMessage) (string, execapi.Request, error) {
	fields, err := sessionArgs(SessionRunToolName, raw, sessionRunParams)
	if err != nil {
		return "", execapi.Request{}, err
	}
	id, err := sessionIDArg(fields)
	if err != nil {
		return "", execapi.Request{}, err
	}
	if _, ok := fields["code"]; !ok {
		return "", execapi.Request{}, &execapi.ValidationError{Field: "code", Message: "is missing: give the code to run in the session"}
	}
	rest, err := json.Marshal(fields)
	if err != nil {
		return "", execapi.Request{}, err
	}
	req, err := argsToRequest(rest)
	return id, req, err
}

// argsToSessionClose decodes scratchrun_session_close's arguments.
func argsToSessionClose(raw json.RawMessage) (string, error) {
	fields, err := sessionArgs(SessionCloseToolName, raw, sessionCloseParams)
	if err != nil {
		return "", err
	}
	return sessionIDArg(fields)
}
