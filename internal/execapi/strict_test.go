package execapi

import (
	"errors"
	"strings"
	"testing"
)

// Keys match exactly and once: a duplicate at any level, or a key that is a
// known field in another case, is refused naming it, never resolved (the
// last duplicate, or the case-folded match, used to win: "NETWORK":"egress"
// was read as egress). Unknown keys still pass.
func TestDecodeRequestIsStrictAboutKeys(t *testing.T) {
	cases := []struct {
		body, field, says string
	}{
		{`{"runtime":"bash","code":"x","network":"none","NETWORK":"egress"}`, "NETWORK", `did you mean "network"`},
		{`{"runtime":"bash","code":"x","Network":"egress"}`, "Network", `did you mean "network"`},
		{`{"runtime":"bash","code":"x","network":"none","network":"egress"}`, "network", "twice"},
		{`{"runtime":"bash","code":"x","n\u0065twork":"none","network":"egress"}`, "network", "twice"},
		{`{"runtime":"bash","code":"x","limits":{"timeout_ms":1000,"timeout_ms":30000}}`, "limits.timeout_ms", "twice"},
		{`{"runtime":"bash","code":"x","limits":{"Memory_MB":100}}`, "limits.Memory_MB", `did you mean "memory_mb"`},
		{`{"runtime":"bash","code":"x","LIMITS":{"memory_mb":100}}`, "LIMITS", `did you mean "limits"`},
		{`{"runtime":"bash","code":"x","env":{"A":"1","A":"2"}}`, `env["A"]`, "twice"},
		{`{"runtime":"bash","code":"x","files":{"/tmp/a":"1","/tmp/a":"2"}}`, `files["/tmp/a"]`, "twice"},
		{`{"runtime":"bash","code":"x","extra":[{"k":1,"k":2}]}`, `extra[0]["k"]`, "twice"},
		// The Kelvin sign folds to k, as encoding/json matches it.
		{`{"runtime":"bash","code":"x","networ\u212a":"egress"}`, "body[\"networ\u212a\"]", `did you mean "network"`},
	}
	for _, c := range cases {
		_, err := DecodeRequest(strings.NewReader(c.body), 1<<20)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != c.field || !strings.Contains(v.Message, c.says) {
			t.Errorf("%s: got %v, want field %q saying %q", c.body, err, c.field, c.says)
		}
	}
	// Map keys that differ in case are distinct names, not variants.
	req, err := DecodeRequest(strings.NewReader(`{"runtime":"bash","code":"x","env":{"A":"1","a":"2"},"Extra-Field":1,"extra":{"x":1e400}}`), 1<<20)
	if err != nil || req.Env["A"] != "1" || req.Env["a"] != "2" {
		t.Errorf("env names in two cases, unknown fields: %+v %v", req.Env, err)
	}
}

// An explicit 0 limit is a value out of range, refused naming the field;
// only an absent field takes the default (0 used to run with the default).
func TestDecodeRequestRefusesAnExplicitZeroLimit(t *testing.T) {
	for body, field := range map[string]string{
		`{"runtime":"bash","code":"x","limits":{"timeout_ms":0}}`:                  "limits.timeout_ms",
		`{"runtime":"bash","code":"x","limits":{"memory_mb":0}}`:                   "limits.memory_mb",
		`{"runtime":"bash","code":"x","limits":{"timeout_ms":5000,"memory_mb":0}}`: "limits.memory_mb",
	} {
		_, err := DecodeRequest(strings.NewReader(body), 1<<20)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != field {
			t.Errorf("%s: got %v, want field %q", body, err, field)
		}
	}
	for _, body := range []string{
		`{"runtime":"bash","code":"x"}`,
		`{"runtime":"bash","code":"x","limits":null}`,
		`{"runtime":"bash","code":"x","limits":{}}`,
		`{"runtime":"bash","code":"x","limits":{"timeout_ms":null}}`,
	} {
		req, err := DecodeRequest(strings.NewReader(body), 1<<20)
		if err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		c, err := DefaultPolicy().Validate(req)
		if err != nil || c.Timeout != DefaultPolicy().DefaultTimeout || c.MemoryMB != DefaultPolicy().DefaultMemoryMB {
			t.Errorf("%s: absent limits must take the defaults: %+v %v", body, c, err)
		}
	}
}

// The contract's ranges are the hosted tool's: timeout_ms 1000..30000 and
// memory_mb 64..512 (values under them used to pass down to 1 ms and 16 MB).
func TestLimitRangesAreTheHostedTools(t *testing.T) {
	p := DefaultPolicy()
	for _, c := range []struct {
		limits Limits
		field  string
		ok     bool
	}{
		{Limits{TimeoutMS: 999}, "limits.timeout_ms", false},
		{Limits{TimeoutMS: 1000}, "", true},
		{Limits{TimeoutMS: 30000}, "", true},
		{Limits{TimeoutMS: -5}, "limits.timeout_ms", false},
		{Limits{MemoryMB: 63}, "limits.memory_mb", false},
		{Limits{MemoryMB: 64}, "", true},
		{Limits{MemoryMB: 512}, "", true},
	} {
		_, err := p.Validate(Request{Runtime: "bash", Code: "x", Limits: c.limits})
		var v *ValidationError
		switch {
		case c.ok && err != nil:
			t.Errorf("%+v refused: %v", c.limits, err)
		case !c.ok && (!errors.As(err, &v) || v.Field != c.field):
			t.Errorf("%+v: got %v, want field %q", c.limits, err, c.field)
		}
	}
}

// Paths with control or format characters (a right-to-left override would
// reorder a note that echoes the path) are refused, and the message shows
// the character escaped.
func TestValidatePathRefusesHiddenCharacters(t *testing.T) {
	for _, p := range []string{"/tmp/\u202eexe.txt", "/tmp/a\nb", "/tmp/a\tb", "/tmp/\x1b[31m", "/tmp/\u200bzero", "/tmp/\u0085", "/tmp/\u2028", "/tmp/\x7f"} {
		err := ValidatePath("return_files[0]", p)
		var v *ValidationError
		if !errors.As(err, &v) || v.Field != "return_files[0]" || !strings.Contains(v.Message, "control or format character") {
			t.Errorf("%q: got %v", p, err)
			continue
		}
		for _, r := range v.Error() {
			if isHiddenRune(r) {
				t.Errorf("%q: the message carries the character itself: %q", p, v.Error())
			}
		}
	}
	if err := ValidatePath("f", "/tmp/naïve café/日本.txt"); err != nil {
		t.Errorf("printable Unicode refused: %v", err)
	}
}
