package execapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// DecodeRequest reads one JSON request of at most maxBytes from r. Unknown
// fields are ignored (clients of the hosted API send extra ones); wrong types,
// trailing data, oversized bodies and malformed JSON become a *ValidationError
// naming the field where it can.
func DecodeRequest(r io.Reader, maxBytes int64) (Request, error) {
	limited := &io.LimitedReader{R: r, N: maxBytes + 1}
	dec := json.NewDecoder(limited)
	var req Request
	if err := dec.Decode(&req); err != nil {
		if limited.N <= 0 {
			return Request{}, invalid("body", "is larger than %d bytes", maxBytes)
		}
		return Request{}, jsonError(err)
	}
	if limited.N <= 0 {
		return Request{}, invalid("body", "is larger than %d bytes", maxBytes)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		if limited.N <= 0 {
			return Request{}, invalid("body", "is larger than %d bytes", maxBytes)
		}
		return Request{}, invalid("body", "holds more than one JSON value")
	}
	return req, nil
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
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
