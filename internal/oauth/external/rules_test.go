package external

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRules(t *testing.T) {
	got, err := ParseRules(" sub:alice=ci-key, client:mcp-app=team ,sub:*=shared")
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{{"sub", "alice", "ci-key"}, {"client", "mcp-app", "team"}, {"sub", "*", "shared"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseRules = %+v, want %+v", got, want)
	}
	if got, err := ParseRules("  "); err != nil || got != nil {
		t.Fatalf(`ParseRules("  ") = %v, %v; want no rules`, got, err)
	}
}

func TestParseRulesErrorsNameTheEntry(t *testing.T) {
	for _, tc := range []struct{ in, entry, problem string }{
		{"sub:alice=k,user:bob=k", `rule 2 "user:bob=k"`, "neither sub nor client"},
		{"sub:alice", `rule 1 "sub:alice"`, "no =key"},
		{"alice=k", `rule 1 "alice=k"`, "no claim:"},
		{"sub:=k", `rule 1 "sub:=k"`, "empty value"},
		{"client:app=", `rule 1 "client:app="`, "empty key"},
		{"sub:a=k,,sub:b=k", "rule 2 is empty", "claim:value=key"},
		{"sub:a=k,sub:a=j", `rule 2 "sub:a=j"`, "mapped twice"},
		{"sub:a=k=j", `rule 1 "sub:a=k=j"`, "contains = or :"},
	} {
		_, err := ParseRules(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.entry) || !strings.Contains(err.Error(), tc.problem) {
			t.Errorf("ParseRules(%q) = %v; want an error naming %s and saying %q", tc.in, err, tc.entry, tc.problem)
		}
	}
}

func TestKeyForOrder(t *testing.T) {
	rules, err := ParseRules("sub:*=any-sub,client:*=any-client,client:app=app-key,sub:alice=alice-key")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sub, client, want string }{
		{"alice", "app", "alice-key"}, // exact subject first
		{"bob", "app", "app-key"},     // an exact client beats a wildcard subject
		{"bob", "other", "any-sub"},   // then any subject
		{"", "other", "any-client"},   // then any client
	} {
		if got, ok := keyFor(rules, tc.sub, tc.client); !ok || got != tc.want {
			t.Errorf("keyFor(sub %q, client %q) = %q, %v; want %q", tc.sub, tc.client, got, ok, tc.want)
		}
	}
	exact, _ := ParseRules("sub:alice=k")
	if got, ok := keyFor(exact, "bob", "app"); ok {
		t.Errorf("keyFor(bob) with only sub:alice = %q; want no key", got)
	}
}
