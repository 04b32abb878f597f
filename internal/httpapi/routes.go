package httpapi

import "net/http"

// route is one pattern the server's mux serves.
type route struct {
	// Method is the pattern's method; empty when the handler answers every
	// method (/healthz, /mcp) or the route's other methods itself.
	Method string
	// Path is the pattern's path.
	Path string
	// Outside says why the OpenAPI document does not describe the route,
	// and where it is described instead; empty for a route it describes.
	Outside string
}

// oauthRoutes is the Outside of the OAuth routes.
const oauthRoutes = "OAuth for /mcp, docs/oauth.md"

// routeTable registers handlers on mux and lists them, so that the routes
// the server serves are one list that the OpenAPI document can be checked
// against (TestOpenAPIRoutesMatchTheServer).
type routeTable struct {
	mux    *http.ServeMux
	routes []route
}

// handle serves h at method and path (method empty: every method).
func (t *routeTable) handle(method, path, outside string, h http.Handler) {
	pattern := path
	if method != "" {
		pattern = method + " " + path
	}
	t.mux.Handle(pattern, h)
	t.routes = append(t.routes, route{Method: method, Path: path, Outside: outside})
}

// openAPIHandler is GET /v1/openapi.json: the API's description, public.
// doc is the server's own copy (openapi.JSON for its Config.Sessions).
func openAPIHandler(doc []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc)
	})
}
