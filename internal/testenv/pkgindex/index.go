package pkgindex

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Index serves a PEP 503 simple index under /simple/ (files under
// /files/) and an npm registry under /npm/.
type Index struct {
	// URL is the index's address as the installing program reaches it
	// (scheme and host, no trailing slash): npm fetches the tarball from
	// the address its registry document names, so the document must name
	// one the sandbox can reach.
	URL string
	// Wheels maps a project to its wheel (Wheel).
	Wheels map[string][]byte
	// Tarballs maps an npm package to its tarball (NpmTarball).
	Tarballs map[string][]byte
}

// ServeHTTP answers pip's and npm's requests.
func (p *Index) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "simple":
		whl, ok := p.Wheels[parts[1]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		// pip checks the file against the hash the page gives.
		sum := sha256.Sum256(whl)
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n",
			WheelName(parts[1]), hex.EncodeToString(sum[:]), WheelName(parts[1]))
	case len(parts) == 2 && parts[0] == "files":
		for project, whl := range p.Wheels {
			if WheelName(project) == parts[1] {
				w.Write(whl)
				return
			}
		}
		http.NotFound(w, r)
	case len(parts) == 2 && parts[0] == "npm":
		tgz, ok := p.Tarballs[parts[1]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		sha1sum := sha1.Sum(tgz)
		sha512sum := sha512.Sum512(tgz)
		version := map[string]any{"name": parts[1], "version": "1.0.0", "main": "index.js", "dist": map[string]any{
			"tarball":   fmt.Sprintf("%s/npm/%s/-/%s-1.0.0.tgz", p.URL, parts[1], parts[1]),
			"shasum":    hex.EncodeToString(sha1sum[:]),
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
		}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"name": parts[1], "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": version}})
	case len(parts) == 4 && parts[0] == "npm" && parts[2] == "-":
		if tgz, ok := p.Tarballs[parts[1]]; ok && parts[3] == parts[1]+"-1.0.0.tgz" {
			w.Write(tgz)
			return
		}
		http.NotFound(w, r)
	default:
		http.NotFound(w, r)
	}
}

// WheelName is the file name of project's wheel: pip takes the name and
// version from it, so it must follow the wheel naming rules.
func WheelName(project string) string {
	return strings.ReplaceAll(project, "-", "_") + "-1.0-py3-none-any.whl"
}
