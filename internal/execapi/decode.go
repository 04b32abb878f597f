package execapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DecodeRequest reads one JSON request of at most maxBytes from r. Field
// names match exactly: a key given twice at any level, or differing from a
// field only in case ("NETWORK"), is refused naming it, never resolved in
// silence. Other unknown fields are ignored (clients of the hosted API send
// extra ones). Wrong types, an explicit 0 limit, trailing data, oversized
// bodies and malformed JSON become a *ValidationError naming the field where
// it can.
func DecodeRequest(r io.Reader, maxBytes int64) (Request, error) {
	var req Request
	if err := decodeStrict(r, maxBytes, requestFields, &req); err != nil {
		return Request{}, err
	}
	return req, nil
}

// DecodeSessionRequest reads one JSON SessionRequest of at most maxBytes
// from r by DecodeRequest's rules.
func DecodeSessionRequest(r io.Reader, maxBytes int64) (SessionRequest, error) {
	var req SessionRequest
	if err := decodeStrict(r, maxBytes, sessionRequestFields, &req); err != nil {
		return SessionRequest{}, err
	}
	return req, nil
}

// decodeStrict reads one JSON value of at most maxBytes from r into v,
// whose keys fields describes, by DecodeRequest's rules.
func decodeStrict(r io.Reader, maxBytes int64, fields Fields, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if int64(len(data)) > maxBytes {
		return invalid("body", "is larger than %d bytes", maxBytes)
	}
	if err != nil {
		e := invalid("body", "could not be read: %v", err)
		e.cause = err
		return e
	}
	if err := CheckKeys(data, fields); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("body", "holds more than one JSON value")
	}
	return nil
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var valErr *ValidationError
	switch {
	case errors.As(err, &valErr):
		return valErr
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return invalid(field, "must be %s, not a JSON %s", describeType(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return invalid("body", "is not valid JSON (at byte %d): %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("body", "is empty or cut short; send one JSON object")
	default:
		return invalid("body", "cannot be decoded: %v", err)
	}
}

func describeType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "int":
		return "an integer"
	case strings.HasPrefix(goType, "map["):
		return "an object of strings"
	case strings.HasPrefix(goType, "[]"):
		return "an array of strings"
	case strings.Contains(goType, "Request"), strings.Contains(goType, "Limits"):
		return "an object"
	default:
		return fmt.Sprintf("of type %s", goType)
	}
}
