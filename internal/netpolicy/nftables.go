package netpolicy

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// installRules replaces the policy's table with a fresh one. Replacing (not
// amending) is what makes a restart after a crash clean up everything.
func installRules(c Config) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	removeTable(conn, c.Table)
	t := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: c.Table})
	accept := nftables.ChainPolicyAccept
	forward := conn.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	input := conn.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	postrouting := conn.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})

	fromSandbox := ifname(expr.MetaKeyIIFNAME, c.InterfacePrefix, expr.CmpOpEq)
	toSandbox := ifname(expr.MetaKeyOIFNAME, c.InterfacePrefix, expr.CmpOpEq)
	add := func(chain *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		conn.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: all})
	}

	// Sandbox to sandbox: refused at once (before the silent drop below,
	// which is for strangers).
	add(forward, fromSandbox, toSandbox, l4proto(unix.IPPROTO_TCP), rejectTCP())
	add(forward, fromSandbox, toSandbox, rejectAny())
	// Into a sandbox: only replies to what it started.
	add(forward, toSandbox, ctEstablished(), verdict(expr.VerdictAccept))
	add(forward, toSandbox, verdict(expr.VerdictDrop))
	// From a sandbox: IPv4 only.
	add(forward, fromSandbox, nfproto(unix.NFPROTO_IPV6), rejectAny())
	// Each sandbox (its slot's address) may hold so many connections and
	// open them so fast; beyond that a new one is refused before conntrack
	// confirms it, so it never takes a place in the host's table.
	open := &nftables.Set{Table: t, Name: "open_connections", KeyType: nftables.TypeIPAddr, Dynamic: true}
	rate := &nftables.Set{Table: t, Name: "connection_rate", KeyType: nftables.TypeIPAddr, Dynamic: true,
		HasTimeout: true, Timeout: time.Minute}
	for _, set := range []*nftables.Set{open, rate} {
		if err := conn.AddSet(set, nil); err != nil {
			return fmt.Errorf("nftables: add set %s: %w", set.Name, err)
		}
	}
	openLimit := []expr.Any{&expr.Dynset{
		SrcRegKey: 1, SetName: open.Name, SetID: open.ID, Operation: unix.NFT_DYNSET_OP_ADD,
		Exprs: []expr.Any{&expr.Connlimit{Count: uint32(c.MaxConnections), Flags: expr.NFT_CONNLIMIT_F_INV}},
	}}
	rateLimit := []expr.Any{&expr.Dynset{
		SrcRegKey: 1, SetName: rate.Name, SetID: rate.ID, Operation: unix.NFT_DYNSET_OP_UPDATE,
		Exprs: []expr.Any{&expr.Limit{Type: expr.LimitTypePkts, Rate: uint64(c.NewConnectionsPerSecond),
			Unit: expr.LimitTimeSecond, Burst: uint32(2 * c.NewConnectionsPerSecond), Over: true}},
	}}
	// TCP is refused with a reset, everything else with ICMP, in rules
	// that each see a packet once (a packet counted twice would spend two
	// tokens). Resets matter: the kernel sends a host only so many ICMP
	// errors a second, and a sandbox that hit its limit with ICMP refusals
	// would leave the next sandbox at its address with silent drops.
	for _, limit := range [][]expr.Any{openLimit, rateLimit} {
		add(forward, fromSandbox, ctState(expr.CtStateBitNEW), l4proto(unix.IPPROTO_TCP), loadSaddr(), limit, rejectTCP())
		add(forward, fromSandbox, ctState(expr.CtStateBitNEW), l4protoNot(unix.IPPROTO_TCP), loadSaddr(), limit, rejectAny())
	}
	// The resolvers, on port 53 only, even in a blocked range.
	for _, dns := range c.DNS {
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			add(forward, fromSandbox, daddrIn(netip.PrefixFrom(dns, 32)), l4proto(proto), dport(53), verdict(expr.VerdictAccept))
		}
	}
	for _, p := range c.Allowed {
		add(forward, fromSandbox, daddrIn(p), verdict(expr.VerdictAccept))
	}
	blocked := append(append([]netip.Prefix{c.Subnet}, BlockedByDefault...), c.Blocked...)
	for _, p := range blocked {
		add(forward, fromSandbox, daddrIn(p), l4proto(unix.IPPROTO_TCP), rejectTCP())
		add(forward, fromSandbox, daddrIn(p), rejectAny())
	}
	for _, port := range BlockedPorts {
		add(forward, fromSandbox, l4proto(unix.IPPROTO_TCP), dport(port), rejectTCP())
	}

	// The host itself (every address it has, every service on it) is off
	// limits: nothing from a sandbox is delivered locally.
	add(input, fromSandbox, l4proto(unix.IPPROTO_TCP), rejectTCP())
	add(input, fromSandbox, rejectAny())

	// NAT to whatever uplink the host routes through.
	add(postrouting, nfproto(unix.NFPROTO_IPV4), saddrIn(c.Subnet), ifname(expr.MetaKeyOIFNAME, c.InterfacePrefix, expr.CmpOpNeq),
		[]expr.Any{&expr.Masq{}})

	if err := conn.Flush(); err != nil {
		return fmt.Errorf("nftables: install table %s: %w", c.Table, err)
	}
	return nil
}

// removeRules deletes the policy's table, if present.
func removeRules(table string) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	if removeTable(conn, table) {
		if err := conn.Flush(); err != nil {
			return fmt.Errorf("nftables: remove table %s: %w", table, err)
		}
	}
	return nil
}

// tableExists reports whether the policy's table is installed.
func tableExists(table string) bool {
	conn, err := nftables.New()
	if err != nil {
		return false
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false
	}
	for _, t := range tables {
		if t.Name == table {
			return true
		}
	}
	return false
}

func removeTable(conn *nftables.Conn, table string) bool {
	if !tableExists(table) {
		return false
	}
	conn.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: table})
	return true
}

// ifname matches an interface name by prefix (nft: iifname "sr-*").
func ifname(key expr.MetaKey, prefix string, op expr.CmpOp) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: []byte(prefix)},
	}
}

func nfproto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

func l4proto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// l4protoNot matches packets of any transport protocol but proto.
func l4protoNot(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{proto}},
	}
}

func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// addrIn matches an IPv4 header address field against a prefix.
func addrIn(offset uint32, p netip.Prefix) []expr.Any {
	p = p.Masked()
	mask := make([]byte, 4)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	net4 := p.Addr().As4()
	return append(nfproto(unix.NFPROTO_IPV4),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: net4[:]},
	)
}

func daddrIn(p netip.Prefix) []expr.Any { return addrIn(16, p) }
func saddrIn(p netip.Prefix) []expr.Any { return addrIn(12, p) }

func ctEstablished() []expr.Any {
	return ctState(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
}

// ctState matches packets whose connection is in one of the states bits.
func ctState(bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

// loadSaddr puts an IPv4 packet's source address in register 1: the key of
// the per-sandbox sets (IPv6 from sandboxes is refused earlier).
func loadSaddr() []expr.Any {
	return append(nfproto(unix.NFPROTO_IPV4),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4})
}

func verdict(kind expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: kind}} }

// rejectTCP answers with a TCP reset, so connect() fails at once.
func rejectTCP() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}
}

// rejectAny answers with an ICMP "administratively prohibited", so UDP and
// ICMP senders learn at once instead of waiting for a timeout.
func rejectAny() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}
}
