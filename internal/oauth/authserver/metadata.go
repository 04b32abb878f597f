package authserver

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// serverMetadata is the RFC 8414 document, also served as OIDC discovery
// (with the two fields OIDC requires beside RFC 8414's). It is written
// here, not taken from op: op serves only the OIDC path, names endpoints
// this server does not mount, and has no registration endpoint, client ID
// metadata document or RFC 9207 flag.
type serverMetadata struct {
	oauthex.AuthServerMeta
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
}

func (s *Server) metadataDocument() serverMetadata {
	iss := s.cfg.Issuer
	m := serverMetadata{
		AuthServerMeta: oauthex.AuthServerMeta{
			Issuer:                                 iss,
			AuthorizationEndpoint:                  iss + pathAuthorize,
			TokenEndpoint:                          iss + pathToken,
			JWKSURI:                                iss + pathKeys,
			ScopesSupported:                        []string{s.cfg.Scope, oidc.ScopeOfflineAccess},
			ResponseTypesSupported:                 []string{string(oidc.ResponseTypeCode)},
			ResponseModesSupported:                 []string{string(oidc.ResponseModeQuery)},
			GrantTypesSupported:                    []string{string(oidc.GrantTypeCode), string(oidc.GrantTypeRefreshToken)},
			TokenEndpointAuthMethodsSupported:      []string{string(oidc.AuthMethodNone)},
			RevocationEndpoint:                     iss + pathRevoke,
			RevocationEndpointAuthMethodsSupported: []string{string(oidc.AuthMethodNone)},
			CodeChallengeMethodsSupported:          []string{string(oidc.CodeChallengeMethodS256)},
			ClientIDMetadataDocumentSupported:      true,
			// The iss on every redirect to the client (withIss): clients
			// refuse an iss that was not announced, so both or neither.
			AuthorizationResponseIssParameterSupported: true,
		},
		SubjectTypesSupported:            []string{"public"},
		IDTokenSigningAlgValuesSupported: []string{"ES256"},
	}
	if s.cfg.Registration {
		m.RegistrationEndpoint = iss + pathRegister
	}
	return m
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	// Browser-based clients read it from another origin.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.Header().Set("Allow", "GET, OPTIONS")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "use GET")
		return
	}
	writeJSON(w, http.StatusOK, s.metadataDocument())
}

// writeJSON answers v as JSON, never cached (it may carry a client's id
// or an error about a token).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeJSONError answers an OAuth error (RFC 6749 section 5.2).
func writeJSONError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, oauthex.ClientRegistrationError{ErrorCode: code, ErrorDescription: desc})
}
