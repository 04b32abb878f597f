package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// merge returns base with fragment merged in. Objects merge key by key, in
// the base's order with the fragment's new keys after; an array of the
// fragment is appended to the base's (an enum gains values, a required
// list gains names), each value at most once; a scalar may only repeat the
// base's. So the fragment can add paths, schemas, properties and enum
// values, and any attempt to change or drop what the base says is an error.
// The result is indented as the committed file is (two spaces, no HTML
// escaping), so that an empty fragment gives the base's bytes back.
func merge(base, fragment []byte) ([]byte, error) {
	b, err := decodeOrdered(base)
	if err != nil {
		return nil, fmt.Errorf("the base: %w", err)
	}
	f, err := decodeOrdered(fragment)
	if err != nil {
		return nil, fmt.Errorf("the fragment: %w", err)
	}
	if _, ok := f.(*object); !ok {
		return nil, fmt.Errorf("the fragment is no JSON object")
	}
	m, err := mergeValue("", b, f)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := encodeOrdered(&out, m, ""); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// object is a JSON object that keeps its keys' order, so that the merged
// document reads as the base does.
type object struct {
	keys []string
	vals map[string]any
}

func mergeValue(at string, base, frag any) (any, error) {
	switch f := frag.(type) {
	case *object:
		b, ok := base.(*object)
		if !ok {
			return nil, fmt.Errorf("%s: the fragment has an object where the base has %s", where(at), describe(base))
		}
		out := &object{keys: append([]string(nil), b.keys...), vals: make(map[string]any, len(b.vals)+len(f.vals))}
		for k, v := range b.vals {
			out.vals[k] = v
		}
		for _, k := range f.keys {
			old, exists := b.vals[k]
			if !exists {
				out.keys = append(out.keys, k)
				out.vals[k] = f.vals[k]
				continue
			}
			m, err := mergeValue(at+"/"+escapePointer(k), old, f.vals[k])
			if err != nil {
				return nil, err
			}
			out.vals[k] = m
		}
		return out, nil
	case []any:
		b, ok := base.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: the fragment has an array where the base has %s", where(at), describe(base))
		}
		out := append([]any(nil), b...)
		for _, v := range f {
			for _, have := range out {
				if reflect.DeepEqual(have, v) {
					return nil, fmt.Errorf("%s: %s is there already", where(at), describe(v))
				}
			}
			out = append(out, v)
		}
		return out, nil
	default:
		if !reflect.DeepEqual(base, frag) {
			return nil, fmt.Errorf("%s: the fragment changes %s to %s", where(at), describe(base), describe(frag))
		}
		return base, nil
	}
}

// where names a place as a JSON pointer.
func where(at string) string {
	if at == "" {
		return "the document"
	}
	return at
}

// escapePointer escapes a key for a JSON pointer (RFC 6901): paths hold
// slashes.
func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

func describe(v any) string {
	switch v := v.(type) {
	case *object:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	default:
		data, _ := json.Marshal(v)
		return string(data)
	}
}

// decodeOrdered decodes one JSON value, objects as *object, numbers as
// json.Number (so that they are written back as they were).
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err == io.EOF {
		// The input ended before its value did.
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			if _, dup := o.vals[k]; dup {
				return nil, fmt.Errorf("key %q given twice", k)
			}
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k)
			o.vals[k] = v
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return o, nil
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return a, nil
	default:
		return tok, nil
	}
}

// encodeOrdered writes v indented by two spaces a level, as
// json.MarshalIndent would, but objects in their keys' order and strings
// without HTML escaping, as the committed file is written.
func encodeOrdered(w *bytes.Buffer, v any, indent string) error {
	inner := indent + "  "
	switch v := v.(type) {
	case *object:
		if len(v.keys) == 0 {
			w.WriteString("{}")
			return nil
		}
		w.WriteString("{\n")
		for i, k := range v.keys {
			w.WriteString(inner)
			writeString(w, k)
			w.WriteString(": ")
			if err := encodeOrdered(w, v.vals[k], inner); err != nil {
				return err
			}
			if i < len(v.keys)-1 {
				w.WriteByte(',')
			}
			w.WriteByte('\n')
		}
		w.WriteString(indent + "}")
	case []any:
		if len(v) == 0 {
			w.WriteString("[]")
			return nil
		}
		w.WriteString("[\n")
		for i, e := range v {
			w.WriteString(inner)
			if err := encodeOrdered(w, e, inner); err != nil {
				return err
			}
			if i < len(v)-1 {
				w.WriteByte(',')
			}
			w.WriteByte('\n')
		}
		w.WriteString(indent + "]")
	case string:
		writeString(w, v)
	case json.Number:
		w.WriteString(v.String())
	case bool:
		w.WriteString(strconv.FormatBool(v))
	case nil:
		w.WriteString("null")
	default:
		return fmt.Errorf("cannot write a %T", v)
	}
	return nil
}

func writeString(w *bytes.Buffer, s string) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	// Encode ends the value with a newline.
	w.Truncate(w.Len() - 1)
}
