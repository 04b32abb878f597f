package external

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv/hydra"
)

// hydraResource is the /mcp URL the tokens are for; nothing listens there.
const hydraResource = "http://127.0.0.1:9/mcp"

// hydraVerifiers are a JWT and an introspecting verifier of h's tokens.
func hydraVerifiers(t *testing.T, h *hydra.Instance, st *store.Store, rules string, skew time.Duration) map[string]*Verifier {
	t.Helper()
	r, err := ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Issuer: h.PublicURL, Resource: hydraResource, Scope: "scratchrun", Rules: r, Keys: st, ClockSkew: skew}
	intro := base
	// Hydra's admin API takes no credentials; a real server's would.
	intro.ClientID, intro.ClientSecret, intro.IntrospectionURL = "scratchrun-rs", "unused", h.IntrospectionURL()
	out := map[string]*Verifier{}
	for name, cfg := range map[string]Config{"jwt": base, "introspection": intro} {
		v, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, h.LogTail())
		}
		out[name] = v
	}
	return out
}

func publicClient(t *testing.T, h *hydra.Instance) hydra.Client {
	return h.CreateClient(t, hydra.Client{Public: true, RedirectURIs: []string{"http://127.0.0.1:7777/callback"}})
}

// Tokens from a real authorization-code flow (PKCE, the resource granted
// as the audience) are accepted by both ways of checking and act as the
// key the subject's rule names; client credentials map by the client
// rule; a token for another audience and a refresh token presented as an
// access token are refused.
func TestHydraTokensAcceptedAndRefused(t *testing.T) {
	h := hydra.Start(t, hydra.Options{})
	st := testStore(t, "ci-key", "team")
	machine := h.CreateClient(t, hydra.Client{GrantTypes: []string{"client_credentials"}, Scope: "scratchrun", Audience: []string{hydraResource}})
	vs := hydraVerifiers(t, h, st, "sub:alice=ci-key,client:"+machine.ID+"=team", time.Second)
	ciKey, _ := st.ActiveKey(context.Background(), "ci-key")
	team, _ := st.ActiveKey(context.Background(), "team")

	app := publicClient(t, h)
	good := h.AuthCode(t, hydra.AuthCodeRequest{Client: app, Resource: hydraResource})
	other := h.AuthCode(t, hydra.AuthCodeRequest{Client: app, Resource: "https://other.example/mcp"})
	bob := h.AuthCode(t, hydra.AuthCodeRequest{Client: app, Resource: hydraResource, Subject: "bob"})
	cc := h.ClientCredentials(t, machine, "scratchrun", hydraResource)
	if good.RefreshToken == "" {
		t.Fatal("Hydra gave no refresh token (offline_access)")
	}
	for name, v := range vs {
		g, err := v.Verify(context.Background(), good.AccessToken)
		if err != nil || g.KeyID != ciKey.ID || g.Subject != "alice" || g.ClientID != app.ID {
			t.Errorf("%s: the authorization-code token: grant %+v, %v; want key %s for alice via %s", name, g, err, ciKey.ID, app.ID)
		}
		if g, err := v.Verify(context.Background(), cc.AccessToken); err != nil || g.KeyID != team.ID {
			t.Errorf("%s: the client-credentials token: grant %+v, %v; want key %s", name, g, err, team.ID)
		}
		_, err = v.Verify(context.Background(), other.AccessToken)
		refused(t, name+": another audience", other.AccessToken, err, "not for this resource")
		_, err = v.Verify(context.Background(), bob.AccessToken)
		refused(t, name+": unmapped subject", bob.AccessToken, err, "no ScratchRun key")
		_, err = v.Verify(context.Background(), good.RefreshToken)
		refused(t, name+": refresh token", good.RefreshToken, err, map[string]string{"jwt": "not a JWT", "introspection": "refresh_token, not an access token"}[name])
	}
}

// A token expires at Hydra's TTL (2 s here): the verifiers refuse it once
// exp has passed, waited for by polling, not by a sleep of a guessed
// length. A token of another Hydra, another issuer, is refused from the
// start.
func TestHydraExpiredAndOtherIssuerRefused(t *testing.T) {
	short := hydra.Start(t, hydra.Options{AccessTokenTTL: 2 * time.Second})
	h := hydra.Start(t, hydra.Options{})
	st := testStore(t, "ci-key")
	rules := "sub:alice=ci-key"
	shortVs := hydraVerifiers(t, short, st, rules, time.Millisecond)
	vs := hydraVerifiers(t, h, st, rules, time.Millisecond)

	tok := short.AuthCode(t, hydra.AuthCodeRequest{Client: publicClient(t, short), Resource: hydraResource})
	for name, v := range vs {
		_, err := v.Verify(context.Background(), tok.AccessToken)
		refused(t, name+": another issuer", tok.AccessToken, err, map[string]string{
			"jwt": "which the issuer does not publish", "introspection": "not active"}[name])
	}
	for name, v := range shortVs {
		deadline := time.Now().Add(30 * time.Second)
		var err error
		for {
			_, err = v.Verify(context.Background(), tok.AccessToken)
			if err != nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Introspection: Hydra says inactive, or active with an exp
		// passed; either refusal says expired.
		refused(t, name+": expired", tok.AccessToken, err, "expired")
	}

	for _, inst := range []*hydra.Instance{short, h} {
		pid := inst.Pid()
		inst.Stop(t)
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("hydra %d still there after Stop: %v", pid, err)
		}
	}
}
