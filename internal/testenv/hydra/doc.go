// Package hydra runs Ory Hydra, a real OAuth 2.0 and OpenID Connect
// authorization server, for tests of ScratchRun as a resource server: one
// `hydra serve all --dev` on loopback with an in-memory database, its own
// login and consent app (which signs in whoever the test names and grants
// the RFC 8707 resource the client asked for as the token's audience,
// since Hydra itself reads only its own `audience` parameter), and helpers
// that register clients and run the authorization-code (PKCE) and
// client-credentials flows without a browser.
//
// The binary is built by scripts/hydra.sh and named by SCRATCHRUN_HYDRA;
// without it, or under -short, Start skips the test. Hydra runs with
// --sqa-opt-out, so it sends no telemetry, and with an environment of its
// own, so nothing of the test's leaks into its configuration.
//
// It must never listen beyond loopback, touch a Hydra it did not start, or
// leave one running: each is stopped by its pid when its test ends.
package hydra
