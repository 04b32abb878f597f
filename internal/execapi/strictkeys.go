package execapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Fields describes the object keys CheckKeys knows: each field name maps to
// the Fields of its value when that value is itself an object of fixed
// fields (Request's "limits"), or to nil when the value is free (a map of the
// caller's own keys, a string, an array).
type Fields map[string]Fields

// maxKeyDepth bounds how deep CheckKeys follows nested values; it matches
// what encoding/json itself accepts, so that a document refused here for
// depth would not decode anyway.
const maxKeyDepth = 10000

// CheckKeys reads the one JSON value in data and refuses, as a
// *ValidationError naming the key, what encoding/json would silently resolve
// for the caller: a key given twice in any object (it keeps the last), and,
// in the objects fields describes, a key that differs from a known field
// only in case (it would fill that field). Other unknown keys pass: the
// hosted API's clients send extra fields.
//
// encoding/json has no option for either (its v2 refuses duplicates and
// matches case exactly, but is still an experiment in Go 1.26 and would
// ignore the case-variant rather than name it), hence this walk over its
// tokens.
func CheckKeys(data []byte, fields Fields) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not parsed here; 1e400 in an unknown field is fine
	w := keyWalker{dec: dec}
	return w.value("", fields, 0)
}

type keyWalker struct{ dec *json.Decoder }

// value walks the next value; path names it in errors ("" is the document).
func (w *keyWalker) value(path string, fields Fields, depth int) error {
	if depth > maxKeyDepth {
		return invalid(orBody(path), "nests deeper than %d levels", maxKeyDepth)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return jsonError(err)
	}
	switch tok {
	case json.Delim('{'):
		return w.object(path, fields, depth)
	case json.Delim('['):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(fmt.Sprintf("%s[%d]", orBody(path), i), nil, depth+1); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ']'
		if err != nil {
			return jsonError(err)
		}
	}
	return nil
}

func (w *keyWalker) object(path string, fields Fields, depth int) error {
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key, _ := tok.(string)
		field := keyPath(path, key, fields != nil)
		if seen[key] {
			return invalid(field, "is given twice; give each key once")
		}
		seen[key] = true
		sub, known := fields[key]
		if !known && fields != nil {
			if name, ok := caseVariant(fields, key); ok {
				return invalid(field, "is not a field; field names are case-sensitive: did you mean %q?", name)
			}
		}
		if err := w.value(field, sub, depth+1); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // '}'
		return jsonError(err)
	}
	return nil
}

// caseVariant finds the known field that key matches case-insensitively, as
// encoding/json would match it.
func caseVariant(fields Fields, key string) (string, bool) {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.EqualFold(name, key) {
			return name, true
		}
	}
	return "", false
}

// keyPath extends path by key as validation errors name fields: a.b for a
// field of a fixed object, a["k"] for a key of a free one.
func keyPath(path, key string, fixed bool) string {
	switch {
	case fixed && path == "" && isPlainName(key):
		return key
	case fixed && isPlainName(key):
		return path + "." + key
	default:
		return fmt.Sprintf("%s[%q]", orBody(path), key)
	}
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// requestFields are the keys of Request and its nested Limits, read from
// their json tags so that they cannot drift from the wire format.
var requestFields = fieldsOf(reflect.TypeFor[Request]())

// sessionRequestFields are SessionRequest's, likewise.
var sessionRequestFields = fieldsOf(reflect.TypeFor[SessionRequest]())

func fieldsOf(t reflect.Type) Fields {
	out := Fields{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		var sub Fields
		if f.Type.Kind() == reflect.Struct {
			sub = fieldsOf(f.Type)
		}
		out[name] = sub
	}
	return out
}
