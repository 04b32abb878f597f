package console

import (
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// csvColumns are the export's columns.
var csvColumns = []string{"started", "key_id", "key_name", "runtime", "worker", "outcome", "exit_code", "duration_ms", "bytes_in", "bytes_out"}

// runsCSV is GET /console/api/runs.csv: the selection's runs, oldest first,
// at most maxCSVRows (the newest).
func (h *handlers) runsCSV(w http.ResponseWriter, r *http.Request) {
	uq, ok := h.parseUsageQuery(w, r)
	if !ok {
		return
	}
	f := uq.filter
	f.Limit = maxCSVRows
	rows, err := h.cfg.Keys.ListUsage(r.Context(), f)
	if err != nil {
		h.internal(w, "read runs", err)
		return
	}
	names, err := h.keyNames(r)
	if err != nil {
		h.internal(w, "list keys", err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="scratchrun-runs-`+h.cfg.now().UTC().Format("20060102-150405")+`.csv"`)
	cw := csv.NewWriter(w)
	cw.Write(csvColumns)
	for _, u := range rows {
		cw.Write([]string{
			u.Started.UTC().Format(time.RFC3339Nano), u.KeyID, csvText(names[u.KeyID]), csvText(u.Runtime), csvText(u.Worker), u.Outcome,
			strconv.Itoa(u.ExitCode), strconv.FormatInt(u.Duration.Milliseconds(), 10),
			strconv.FormatInt(u.BytesIn, 10), strconv.FormatInt(u.BytesOut, 10),
		})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		h.log.Debug("console: CSV export cut short", "err", err)
	}
}

// csvText keeps a text cell from being read as a formula by a spreadsheet
// (a worker's or runtime's name comes from elsewhere): one starting with
// =, +, -, @ or a control character gets a leading apostrophe.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
