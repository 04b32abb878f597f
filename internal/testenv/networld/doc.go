// Package networld is the sealed network the egress tests run in, in place
// of the copy each egress suite (netpolicy, gvisor, microvm) used to carry.
//
// A test binary runs itself again in a new, empty network namespace
// (ReexecIsolated for a whole binary, Isolate for one test), where nothing
// routes off the machine. There Build makes a small world: the test's own
// namespace plays the engine's host, and an "outside" namespace behind its
// uplink (a veth pair) holds an internet host (Internet, HTTP on port 80 and
// a port 25), a resolver (Resolver, DNS for internet.test and
// private.test), a private host (Private) and a metadata service
// (Metadata), each answering HTTP with a body of its own. Every packet of
// these tests stays in namespaces the test made, and Build refuses to run
// anywhere else.
package networld
