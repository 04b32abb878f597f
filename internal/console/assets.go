package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// pages are the HTML documents (the sign-in page a template); assets the
// styles and scripts they load, all served from the binary.
var (
	//go:embed pages
	pages embed.FS
	//go:embed assets
	assets embed.FS
)

// assetsPath is where the assets are served.
const assetsPath = basePath + "/assets/"

// servePage writes an embedded HTML page.
func servePage(w http.ResponseWriter, name string) {
	data, err := pages.ReadFile(name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, execapi.CodeInternal, "the page is missing from this build")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(data)
}

// assetHandler serves the embedded files under assetsPath, and nothing
// else: no directory listings. They hold nothing secret, so they need no
// session (the sign-in page uses the stylesheet); the browser revalidates
// them, so that a new binary's are taken at once.
func assetHandler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(assetsPath, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, assetsPath)
		if fi, err := fs.Stat(sub, path.Clean(name)); name == "" || err != nil || fi.IsDir() {
			writeError(w, http.StatusNotFound, httpapi.CodeNotFound, "no such console asset: "+r.URL.Path)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
