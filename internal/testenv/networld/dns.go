package networld

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// names the resolver answers for (A records); any other name gets an
// answer with no record.
var names = map[string]netip.Addr{"internet.test.": Internet, "private.test.": Private}

// serveDNS answers A queries for names on Resolver:53, in the outside
// namespace.
func (w *World) serveDNS(t *testing.T) {
	_, pc := ListenIn(t, w.Outside, "udp", netip.AddrPortFrom(Resolver, 53).String())
	w.dns = pc
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			hdr, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: hdr.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if a, ok := names[q.Name.String()]; ok && q.Type == dnsmessage.TypeA {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
			}
			msg, err := b.Finish()
			if err == nil {
				pc.WriteTo(msg, from)
			}
		}
	}()
}
