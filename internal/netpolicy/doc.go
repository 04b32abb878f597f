// Package netpolicy gives sandboxes that asked for network egress a network of
// their own: a pre-created network namespace ("slot") joined to the host by a
// veth pair, NAT to the host's uplink, a resolver, and one nftables table that
// lets them reach the public internet and nothing else — not the host, not
// other sandboxes, not private, link-local (metadata), loopback, multicast or
// reserved ranges, not SMTP.
//
// Rules match every sandbox interface by name prefix, so nothing is added per
// sandbox and nothing accumulates: a slot's veth disappears with its namespace.
// Engines on one host share the policy (lock.go): the first engine with egress
// in a network namespace replaces the table whole (cleaning what a crashed
// engine left), later engines with the same policy join it, one with another
// policy is refused, and the last one out removes it; slot indexes are locked
// across processes. It must never change any table but its own, and never
// give a sandbox an address in a range it could use to reach the host.
package netpolicy
