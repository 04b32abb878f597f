package openapi

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// With sessions on, JSON is the base with the committed fragment merged
// in: every value of the base is still there, unchanged, and the fragment
// embedded is the committed file. Each caller gets a copy.
func TestJSONWithSessionsHoldsTheBase(t *testing.T) {
	file, err := os.ReadFile("sessions.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(file) != string(sessionsFragment) {
		t.Fatal("the embedded fragment differs from sessions.json")
	}
	merged := JSON(true)
	b, err := decodeOrdered(document)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeOrdered(merged)
	if err != nil {
		t.Fatalf("the merged document is not JSON: %v", err)
	}
	holds(t, "", b, m)
	merged[0] = 'x'
	if JSON(true)[0] != '{' {
		t.Error("a caller changed the merged document")
	}
}

// holds fails t unless got holds all of want: its keys (in its order, before
// any other), its arrays' values (as a prefix) and its scalars.
func holds(t *testing.T, at string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case *object:
		g, ok := got.(*object)
		if !ok {
			t.Fatalf("%s: the merged document has %s, the base an object", where(at), describe(got))
		}
		for i, k := range w.keys {
			if i >= len(g.keys) || g.keys[i] != k {
				t.Fatalf("%s: the merged document's keys %q do not start with the base's %q", where(at), g.keys, w.keys)
			}
			holds(t, at+"/"+escapePointer(k), w.vals[k], g.vals[k])
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			t.Fatalf("%s: the merged document has %s, the base an array of %d", where(at), describe(got), len(w))
		}
		for i := range w {
			holds(t, at+"/"+strconv.Itoa(i), w[i], g[i])
		}
	default:
		if describe(want) != describe(got) {
			t.Fatalf("%s: the merged document has %s, the base %s", where(at), describe(got), describe(want))
		}
	}
}

// The base comes back byte for byte from a merge that adds nothing: the
// merged document is written as the committed file is.
func TestMergeOfNothingIsTheBase(t *testing.T) {
	for _, frag := range []string{`{}`, `{"paths": {}, "components": {"schemas": {}}}`, `{"openapi": "3.1.0"}`} {
		got, err := merge(document, []byte(frag))
		if err != nil {
			t.Fatalf("%s: %v", frag, err)
		}
		if string(got) != string(document) {
			t.Errorf("merging %s changed the base's bytes", frag)
		}
	}
}

// A fragment adds paths, schemas, properties and enum values, after what
// the base has; it cannot change or repeat anything of the base.
func TestMergeOnlyAdds(t *testing.T) {
	const base = `{
  "paths": {
    "/v1/exec": {
      "post": {
        "summary": "Run code"
      }
    }
  },
  "components": {
    "schemas": {
      "Code": {
        "type": "string",
        "enum": [
          "a",
          "b"
        ]
      }
    }
  }
}
`
	got, err := merge([]byte(base), []byte(`{"components": {"schemas": {"Code": {"enum": ["c"]}, "New": {"type": "object", "x": "<&>"}}},
		"paths": {"/v1/sessions": {"get": {}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{
  "paths": {
    "/v1/exec": {
      "post": {
        "summary": "Run code"
      }
    },
    "/v1/sessions": {
      "get": {}
    }
  },
  "components": {
    "schemas": {
      "Code": {
        "type": "string",
        "enum": [
          "a",
          "b",
          "c"
        ]
      },
      "New": {
        "type": "object",
        "x": "<&>"
      }
    }
  }
}
`
	if string(got) != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}

	for _, c := range []struct{ frag, err string }{
		{`{"paths": {"/v1/exec": {"post": {"summary": "Run other code"}}}}`, `/paths/~1v1~1exec/post/summary: the fragment changes "Run code" to "Run other code"`},
		{`{"components": {"schemas": {"Code": {"enum": ["b"]}}}}`, `/components/schemas/Code/enum: "b" is there already`},
		{`{"components": {"schemas": {"Code": {"type": {"x": 1}}}}}`, `/components/schemas/Code/type: the fragment has an object where the base has "string"`},
		{`{"paths": []}`, `/paths: the fragment has an array where the base has an object`},
		{`{"paths": null}`, `/paths: the fragment changes an object to null`},
		{`[]`, `the fragment is no JSON object`},
		{`{"a": 1} {}`, `the fragment: more than one JSON value`},
		{`{"a": 1, "a": 2}`, `the fragment: key "a" given twice`},
		{`{"a": `, `the fragment: unexpected EOF`},
	} {
		_, err := merge([]byte(base), []byte(c.frag))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("merging %s: %v, want an error saying %q", c.frag, err, c.err)
		}
	}
}
