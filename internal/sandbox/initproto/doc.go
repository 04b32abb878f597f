// Package initproto is the protocol between the engine and a sandbox's init,
// whichever init it is (the C init the namespaces backend's spawner carries,
// or the Go init of package goinit): the messages (a session's Requests
// among them) and their binary form, the descriptors they travel on, the protocol version both inits
// check, and the policy every sandbox gets the same way from the engine (the
// /proc paths to hide, the per-user kernel limits). It also owns the form in
// which a pre-started interpreter gets its job (PrestartJob).
//
// It is the one owner of that protocol: the C init includes a header
// generated from it (CHeader), and a test decodes and encodes messages with
// the C code to prove both sides read the same bytes.
//
// It is imported by the Go init, which starts once per sandbox: it must stay
// small (standard library and x/sys only) and must never trust a message it
// decodes.
package initproto
