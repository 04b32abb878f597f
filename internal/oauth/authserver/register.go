package authserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/scratchrun/scratchrun/internal/store"
)

// register is RFC 7591 dynamic client registration, which op lacks. Anyone
// may register (that is the protocol), so what a registration may keep is
// bounded: the body, the fields kept, the number of clients.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodPost:
	case http.MethodOptions:
		w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		w.Header().Set("Allow", "POST, OPTIONS")
		writeJSONError(w, http.StatusMethodNotAllowed, "invalid_request", "register with POST")
		return
	}
	var m oauthex.ClientRegistrationMetadata
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(&m); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "invalid_client_metadata", "the registration is larger than 64 KiB")
			return
		}
		writeJSONError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not a JSON object of client metadata")
		return
	}
	if code, desc := checkMetadata(&m); code != "" {
		writeJSONError(w, http.StatusBadRequest, code, desc)
		return
	}
	// Keep only what the server uses or shows: the rest (logos, keys,
	// contacts, statements) could only make a row large.
	kept := oauthex.ClientRegistrationMetadata{
		RedirectURIs: m.RedirectURIs, TokenEndpointAuthMethod: "none",
		GrantTypes: m.GrantTypes, ResponseTypes: []string{"code"}, ClientName: m.ClientName,
		Scope: s.cfg.Scope, SoftwareID: truncate(m.SoftwareID, 200), SoftwareVersion: truncate(m.SoftwareVersion, 100),
		ApplicationType: truncate(m.ApplicationType, 20),
	}
	if len(kept.GrantTypes) == 0 {
		kept.GrantTypes = []string{"authorization_code"}
	}
	data, err := json.Marshal(kept)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "server_error", "cannot encode the client")
		return
	}
	now := time.Now()
	id := "src_" + randomHex(16)
	err = s.cfg.State.AddOAuthClient(r.Context(), store.OAuthClient{ID: id, Metadata: string(data), Created: now}, maxClients)
	if errors.Is(err, store.ErrOAuthFull) {
		s.log.WarnContext(r.Context(), "oauth: dynamic registration refused: the bound on clients is reached", "max", maxClients)
		writeJSONError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "this server has as many registered clients as it keeps")
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "oauth: register client", "err", err)
		writeJSONError(w, http.StatusInternalServerError, "server_error", "cannot store the client")
		return
	}
	s.log.InfoContext(r.Context(), "oauth: client registered", "client_id", id, "client_name", kept.ClientName)
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{
		ClientRegistrationMetadata: kept, ClientID: id, ClientIDIssuedAt: now,
	})
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
