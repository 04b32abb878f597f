// Package cluster is what a cluster's front ends and workers share over
// NATS: the subjects calls travel on, the frames of one call (an offer, the
// request in parts, a go, beats both ways, events, the result in parts),
// the registration a worker publishes to the registry of live workers (a
// JetStream key-value bucket whose entries expire when a worker stops
// heartbeating), and how a process connects (TLS and credentials beyond
// loopback).
//
// Calls use core NATS request/reply only, never a delivery mode that
// redelivers: untrusted code runs at most once. A worker starts a call
// only on the front end's go, after it said it was ready, so a front end
// that heard nothing may try another worker; once the go is sent, a worker
// that falls silent is an error the caller sees
// (execapi.WorkerLostError), never a run elsewhere. Frames a worker sends
// during a run are numbered and kept until the front end acknowledges
// them, so a message lost with a NATS node is sent again rather than lost
// with the call.
//
// A session's operations (open, a call in it, its files, fork, list, a
// look-up of one, close, the operator's end) travel as calls do, by the same protocol, the
// offer's HeaderOp naming the operation (SessionOp, SessionAnswer): a
// session lives on the one worker that opened it, and a worker that stops
// ends its sessions and names them in its last registration
// (EndedSessions).
//
// The two sides are its subpackages: worker (an adapter of the local
// engine, as httpapi is one over HTTP) and frontend (an execapi.Service
// that places calls on workers). This package knows NATS and the contract
// (execapi), never sandboxes, images or HTTP.
package cluster
