package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document,
// the MCP authorization spec's preferred registration): op knows nothing
// of them, so this file fetches, checks and caches them.

// isMetadataURL reports whether a client_id is a metadata document's URL:
// https, with a path.
func isMetadataURL(id string) bool {
	if !strings.HasPrefix(id, "https://") {
		return false
	}
	u, err := url.Parse(id)
	return err == nil && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == "" && u.User == nil &&
		!strings.Contains(u.Path, "/./") && !strings.Contains(u.Path, "/../")
}

// How long a document is cached: what its Cache-Control says, within these.
const (
	docDefaultTTL = 5 * time.Minute
	docMaxTTL     = 24 * time.Hour
	docMaxEntries = 1000
)

// documentCache fetches metadata documents and keeps the valid ones.
type documentCache struct {
	hc *http.Client
	mu sync.Mutex
	m  map[string]cachedDocument
}

type cachedDocument struct {
	meta    *oauthex.ClientRegistrationMetadata
	err     error // a failed fetch, kept briefly (failureTTL)
	expires time.Time
}

// failureTTL is how long a failed fetch is remembered: a client ID that
// does not resolve is not fetched again on every request naming it.
const failureTTL = time.Minute

func newDocumentCache(hc *http.Client) *documentCache {
	return &documentCache{hc: hc, m: make(map[string]cachedDocument)}
}

// metadataDocument is a client ID metadata document: RFC 7591 metadata
// and the client_id, which must be the document's own URL.
type metadataDocument struct {
	ClientID string `json:"client_id"`
	oauthex.ClientRegistrationMetadata
}

// errMetadataDocument is a document that could not be fetched or is not
// valid; its text says which, for the error page.
type errMetadataDocument struct{ reason string }

func (e *errMetadataDocument) Error() string { return "client metadata document: " + e.reason }

func (dc *documentCache) get(ctx context.Context, id string) (*oauthex.ClientRegistrationMetadata, error) {
	now := time.Now()
	dc.mu.Lock()
	e, ok := dc.m[id]
	dc.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.meta, e.err
	}
	meta, ttl, err := dc.fetch(ctx, id)
	if err != nil {
		var doc *errMetadataDocument
		if !errors.As(err, &doc) {
			return nil, err
		}
		meta, ttl = nil, failureTTL
	}
	if ttl > 0 {
		dc.mu.Lock()
		if len(dc.m) >= docMaxEntries {
			for k, v := range dc.m {
				if !now.Before(v.expires) || len(dc.m) >= docMaxEntries {
					delete(dc.m, k)
				}
			}
		}
		dc.m[id] = cachedDocument{meta: meta, err: err, expires: now.Add(ttl)}
		dc.mu.Unlock()
	}
	return meta, err
}

func (dc *documentCache) fetch(ctx context.Context, id string) (*oauthex.ClientRegistrationMetadata, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, 0, &errMetadataDocument{"not a URL"}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := dc.hc.Do(req)
	if err != nil {
		return nil, 0, &errMetadataDocument{fetchError(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, &errMetadataDocument{errUnfetchable}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, 0, &errMetadataDocument{"cannot read it: " + fetchError(err)}
	}
	if len(body) > maxBody {
		return nil, 0, &errMetadataDocument{"it is larger than 64 KiB"}
	}
	var doc metadataDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, 0, &errMetadataDocument{"it is not a JSON object of client metadata"}
	}
	if doc.ClientID != id {
		return nil, 0, &errMetadataDocument{"its client_id is not its URL"}
	}
	if doc.ClientName == "" {
		return nil, 0, &errMetadataDocument{"it has no client_name"}
	}
	if _, desc := checkMetadata(&doc.ClientRegistrationMetadata); desc != "" {
		return nil, 0, &errMetadataDocument{desc}
	}
	return &doc.ClientRegistrationMetadata, cacheTTL(resp.Header.Get("Cache-Control")), nil
}

// fetchError is what the error page says of a failed fetch: that the
// address is one this server does not fetch from, or only that it failed.
func fetchError(err error) string {
	if errors.Is(err, errForbiddenAddress) {
		return "cannot fetch it: " + errForbiddenAddress.Error()
	}
	// No detail of why (refused, reset, a TLS error, a timeout): the page
	// would tell whoever names a URL what answers where.
	return errUnfetchable
}

// cacheTTL is how long Cache-Control lets a document be kept.
func cacheTTL(cc string) time.Duration {
	ttl := docDefaultTTL
	for _, d := range strings.Split(cc, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "no-store" || d == "no-cache" {
			return 0
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				ttl = time.Duration(n) * time.Second
			}
		}
	}
	return min(ttl, docMaxTTL)
}

// errForbiddenAddress is a fetch to an address a client must not make the
// server reach: the metadata document's URL is chosen by whoever starts an
// authorization, so it must not reach the server's own network.
var errForbiddenAddress = errors.New("its host resolves to a private, loopback or link-local address")

// guardedClient fetches metadata documents: https only, no private,
// loopback, link-local or otherwise non-public address (checked on the
// address dialed, after DNS, so a name that resolves inward is refused
// too), no proxy (which would dial for us), no redirects, 5 s.
func guardedClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !publicAddr(ap.Addr()) {
			return errForbiddenAddress
		}
		return nil
	}}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: d.DialContext, TLSHandshakeTimeout: 5 * time.Second,
			ResponseHeaderTimeout: 5 * time.Second, MaxResponseHeaderBytes: 16 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sharedAddressSpace is 100.64.0.0/10 (RFC 6598, carrier-grade NAT),
// which netip does not count as private.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// errUnfetchable is the one reason shown for a document that could not be
// fetched, whatever the cause.
const errUnfetchable = "cannot fetch it (it must answer 200 over https, from a public address)"

// embedding are IPv6 ranges that carry an IPv4 address a gateway may route
// to (NAT64, 6to4): a public-looking address for a private one.
var embedding = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("2002::/16")}

func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range embedding {
		if p.Contains(a) {
			return false
		}
	}
	return a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!sharedAddressSpace.Contains(a)
}
