// Package external checks access tokens issued by an authorization server
// the operator already runs (Keycloak, Ory Hydra, Auth0, Entra ID ...) for
// ScratchRun's /mcp, the resource: the server's metadata is found by RFC
// 8414 or OpenID Connect discovery, and each token is either a JWT checked
// against the server's published keys (RFC 9068) or asked about by RFC
// 7662 introspection. Either way the token must be from that issuer,
// unexpired, for this resource (RFC 8707 audience), and carry the required
// scope.
//
// A token then acts as a ScratchRun key, named by the operator's rules on
// its subject or client (Rule, ParseRules), so the key's rate, concurrency
// and usage apply to it unchanged, and revoking the key refuses its
// tokens. JOSE is go-jose's; nothing here signs or verifies by hand.
package external
