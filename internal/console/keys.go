package console

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
)

// keyView is a key as the Keys page shows it (never its secret).
type keyView struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Prefix      string   `json:"prefix"`
	RatePerMin  int      `json:"rate_per_min"`
	Concurrency int      `json:"concurrency"`
	Created     jsonTime `json:"created"`
	LastUsed    jsonTime `json:"last_used"`
	Revoked     jsonTime `json:"revoked"`
}

func viewKey(k store.Key, lastUsed map[string]jsonTime) keyView {
	return keyView{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, RatePerMin: k.RatePerMin, Concurrency: k.Concurrency,
		Created: jsonTime(k.Created), LastUsed: lastUsed[k.ID], Revoked: jsonTime(k.Revoked),
	}
}

// listKeys is GET /console/api/keys: every key, newest first.
func (h *handlers) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := h.cfg.Keys.ListKeys(r.Context())
	if err != nil {
		h.internal(w, "list keys", err)
		return
	}
	last, err := h.cfg.Keys.LastUsed(r.Context())
	if err != nil {
		h.internal(w, "read keys' last use", err)
		return
	}
	lastUsed := make(map[string]jsonTime, len(last))
	for id, t := range last {
		lastUsed[id] = jsonTime(t)
	}
	out := make([]keyView, 0, len(keys))
	for i := len(keys) - 1; i >= 0; i-- {
		out = append(out, viewKey(keys[i], lastUsed))
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

// keyForm is the body of creating a key or changing its limits.
type keyForm struct {
	Name        *string `json:"name"`
	RatePerMin  *int    `json:"rate_per_min"`
	Concurrency *int    `json:"concurrency"`
}

// readKeyForm decodes a key form strictly; it answers 400 itself.
func readKeyForm(w http.ResponseWriter, r *http.Request) (keyForm, bool) {
	var f keyForm
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeFieldError(w, "body", "not a key form: "+strings.TrimPrefix(err.Error(), "json: "))
		return f, false
	}
	if dec.Decode(new(json.RawMessage)) != io.EOF {
		writeFieldError(w, "body", "one JSON object only")
		return f, false
	}
	for field, v := range map[string]*int{"rate_per_min": f.RatePerMin, "concurrency": f.Concurrency} {
		if v != nil && *v <= 0 {
			writeFieldError(w, field, "must be a positive whole number")
			return f, false
		}
	}
	return f, true
}

// createdKey is a new key, with its secret (shown this once) and the MCP
// client configurations that use it.
type createdKey struct {
	Key      keyView   `json:"key"`
	Secret   string    `json:"secret"`
	Snippets []snippet `json:"snippets"`
}

// createKey is POST /console/api/keys.
func (h *handlers) createKey(w http.ResponseWriter, r *http.Request) {
	f, ok := readKeyForm(w, r)
	if !ok {
		return
	}
	nk := store.NewKey{RatePerMin: store.DefaultRatePerMin, Concurrency: store.DefaultConcurrency}
	if f.Name == nil || strings.TrimSpace(*f.Name) == "" {
		writeFieldError(w, "name", "a key needs a name")
		return
	}
	nk.Name = *f.Name
	if f.RatePerMin != nil {
		nk.RatePerMin = *f.RatePerMin
	}
	if f.Concurrency != nil {
		nk.Concurrency = *f.Concurrency
	}
	k, secret, err := h.cfg.Keys.CreateKey(r.Context(), nk)
	if writeKeyFieldError(w, err) {
		return
	}
	if err != nil {
		h.internal(w, "create a key", err)
		return
	}
	h.log.Info("console: key created", "key", k.ID, "name", k.Name)
	writeJSON(w, http.StatusCreated, createdKey{Key: viewKey(k, nil), Secret: secret, Snippets: snippets(serverURL(r), secret)})
}

// revokeKey is POST /console/api/keys/{id}/revoke.
func (h *handlers) revokeKey(w http.ResponseWriter, r *http.Request) {
	id, ok := h.activeKeyID(w, r)
	if !ok {
		return
	}
	k, err := h.cfg.Keys.Revoke(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "no active key "+id+" (revoked meanwhile?)")
		return
	}
	if err != nil {
		h.internal(w, "revoke a key", err)
		return
	}
	h.log.Info("console: key revoked", "key", k.ID, "name", k.Name)
	writeJSON(w, http.StatusOK, map[string]keyView{"key": viewKey(k, nil)})
}

// setLimits is POST /console/api/keys/{id}/limits.
func (h *handlers) setLimits(w http.ResponseWriter, r *http.Request) {
	id, ok := h.activeKeyID(w, r)
	if !ok {
		return
	}
	f, ok := readKeyForm(w, r)
	if !ok {
		return
	}
	if f.Name != nil {
		writeFieldError(w, "name", "a key's name cannot be changed")
		return
	}
	change := store.LimitChange{}
	if f.RatePerMin != nil {
		change.RatePerMin = *f.RatePerMin
	}
	if f.Concurrency != nil {
		change.Concurrency = *f.Concurrency
	}
	if change.RatePerMin == 0 && change.Concurrency == 0 {
		writeFieldError(w, "rate_per_min", "give a rate, a concurrency or both")
		return
	}
	k, err := h.cfg.Keys.SetLimits(r.Context(), id, change)
	if writeKeyFieldError(w, err) {
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "no active key "+id+" (revoked meanwhile?)")
		return
	}
	if err != nil {
		h.internal(w, "change a key's limits", err)
		return
	}
	h.log.Info("console: key limits changed", "key", k.ID, "rate_per_min", k.RatePerMin, "concurrency", k.Concurrency)
	writeJSON(w, http.StatusOK, map[string]keyView{"key": viewKey(k, nil)})
}

// formFields are the form's names of the store's key fields.
var formFields = map[string]string{store.FieldName: "name", store.FieldRate: "rate_per_min", store.FieldConcurrency: "concurrency"}

// writeKeyFieldError answers 400 naming the field when err is the store's
// refusal of one, and reports whether it did.
func writeKeyFieldError(w http.ResponseWriter, err error) bool {
	var fe *store.KeyFieldError
	if !errors.As(err, &fe) {
		return false
	}
	msg := fe.Problem
	if fe.Value != "" {
		msg = fe.Value + ": " + fe.Problem
	}
	writeFieldError(w, formFields[fe.Field], msg)
	return true
}

// activeKeyID is the path's key id, answered 404 unless an active key has
// it: the store's calls also take names, which the path must not.
func (h *handlers) activeKeyID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	k, err := h.cfg.Keys.KeyByID(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && !k.Active():
		writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "no active key has the id "+id)
		return "", false
	case err != nil:
		h.internal(w, "look up a key", err)
		return "", false
	}
	return k.ID, true
}

// internal answers 500 and logs why.
func (h *handlers) internal(w http.ResponseWriter, what string, err error) {
	h.log.Error("console: "+what, "err", err)
	writeError(w, http.StatusInternalServerError, execapi.CodeInternal, what+": "+err.Error())
}
