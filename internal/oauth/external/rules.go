package external

import (
	"fmt"
	"strings"
)

// Rule maps tokens to the ScratchRun key they act as: a token whose Claim
// ("sub": its subject; "client": its client_id) equals Value, or any token
// with that claim when Value is "*", acts as Key (a key's id or name).
type Rule struct {
	// Claim is "sub" or "client".
	Claim string
	// Value is the claim's exact value, or "*" for any non-empty value.
	Value string
	// Key is the id or name of the ScratchRun key the token acts as.
	Key string
}

// Claims a rule can name.
const (
	ClaimSubject = "sub"
	ClaimClient  = "client"
)

// ParseRules reads rules written as comma-separated claim:value=key
// entries, for example "sub:alice=ci-key,client:mcp-app=team,sub:*=shared".
// Spaces around entries are ignored and "" is no rules. An error names the
// entry it is about.
func ParseRules(s string) ([]Rule, error) {
	var rules []Rule
	seen := map[[2]string]bool{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			if strings.TrimSpace(s) == "" {
				return nil, nil
			}
			return nil, fmt.Errorf("oauth rule %d is empty (entries are claim:value=key, separated by commas)", i+1)
		}
		r, err := parseRule(entry)
		if err != nil {
			return nil, fmt.Errorf("oauth rule %d %q: %w", i+1, entry, err)
		}
		if seen[[2]string{r.Claim, r.Value}] {
			return nil, fmt.Errorf("oauth rule %d %q: %s:%s is mapped twice", i+1, entry, r.Claim, r.Value)
		}
		seen[[2]string{r.Claim, r.Value}] = true
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(entry string) (Rule, error) {
	match, key, ok := strings.Cut(entry, "=")
	if !ok {
		return Rule{}, fmt.Errorf("no =key (want claim:value=key, for example sub:alice=ci-key)")
	}
	claim, value, ok := strings.Cut(match, ":")
	if !ok {
		return Rule{}, fmt.Errorf("no claim: before the value (want sub:value or client:value)")
	}
	r := Rule{Claim: strings.TrimSpace(claim), Value: strings.TrimSpace(value), Key: strings.TrimSpace(key)}
	switch {
	case r.Claim != ClaimSubject && r.Claim != ClaimClient:
		return Rule{}, fmt.Errorf("claim %q is neither sub nor client", r.Claim)
	case r.Value == "":
		return Rule{}, fmt.Errorf("empty value (use * for any)")
	case r.Key == "":
		return Rule{}, fmt.Errorf("empty key (the id or name of a ScratchRun key)")
	case strings.ContainsAny(r.Key, "=:"):
		return Rule{}, fmt.Errorf("key %q contains = or :", r.Key)
	}
	return r, nil
}

// keyFor is the key the first matching rule names, trying an exact
// subject, an exact client, then any subject, then any client: a named
// subject or client is never captured by a wildcard. ok is false when no
// rule matches.
func keyFor(rules []Rule, subject, client string) (key string, ok bool) {
	try := func(claim string, wildcard bool, value string) bool {
		if value == "" {
			return false
		}
		for _, r := range rules {
			if r.Claim == claim && (r.Value == value && !wildcard || r.Value == "*" && wildcard) {
				key = r.Key
				return true
			}
		}
		return false
	}
	ok = try(ClaimSubject, false, subject) || try(ClaimClient, false, client) ||
		try(ClaimSubject, true, subject) || try(ClaimClient, true, client)
	return key, ok
}
