package mcpproxy

import "net/http"

// protocolVersionHeader is Streamable HTTP's version header (MCP 2025-06-18
// §2.7: a client sends it on every request after initialization).
const protocolVersionHeader = "Mcp-Protocol-Version"

// HTTPClient is base (http.DefaultClient when nil) with the negotiated
// protocol version added to every request that has none: the client for
// the StreamableClientTransport that Run's remote side uses.
func (p *Proxy) HTTPClient(base *http.Client) *http.Client {
	if base == nil {
		base = http.DefaultClient
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = versionTransport{base: rt, p: p}
	return &c
}

type versionTransport struct {
	base http.RoundTripper
	p    *Proxy
}

func (t versionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if v := t.p.Version(); v != "" && req.Header.Get(protocolVersionHeader) == "" {
		req = req.Clone(req.Context())
		req.Header.Set(protocolVersionHeader, v)
	}
	return t.base.RoundTrip(req)
}
