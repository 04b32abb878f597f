package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Kind says what a frame of a call is. A frame is a NATS message whose
// headers carry its kind and numbers and whose body carries its payload
// as it is (JSON for control, raw bytes for parts), so that nothing is
// base64-encoded twice.
type Kind string

// Frames a front end sends to a worker, on CallSubject, with its own
// inbox for the call as the reply subject.
const (
	// KindOffer opens a call: the request's first part, how many parts
	// there are, and the runtime, network and caller, so that the worker
	// can refuse at once. Nothing runs yet.
	KindOffer Kind = "offer"
	// KindPart is one more part of the request (HeaderPart of HeaderParts).
	KindPart Kind = "part"
	// KindGo starts the call once the worker has every part. A front end
	// sends it to one worker per call, ever.
	KindGo Kind = "go"
	// KindBeat says the caller still waits, and acknowledges the worker's
	// numbered frames up to HeaderAck.
	KindBeat Kind = "beat"
	// KindCancel ends the call: a run is killed, an offer forgotten.
	KindCancel Kind = "cancel"
	// KindDone says the front end has the whole answer: the worker may
	// forget the call.
	KindDone Kind = "done"
)

// Frames a worker sends back, to the reply subject of the front end's.
const (
	// KindReady answers an offer: the worker takes the call on a go.
	KindReady Kind = "ready"
	// KindRefused answers an offer the worker will not take (its body is
	// a Failure); nothing ran.
	KindRefused Kind = "refused"
	// KindUnknown answers a frame about a call the worker does not hold
	// (it forgot it, or it is a new process of the same id).
	KindUnknown Kind = "unknown"
	// KindEvents carries events of the run (a JSON list of WireEvent),
	// numbered.
	KindEvents Kind = "events"
	// KindResult carries a part of the result's JSON, numbered.
	KindResult Kind = "result"
	// KindFailed ends a call that produced no result (its body is a
	// Failure), numbered.
	KindFailed Kind = "failed"
)

// Header names of frames.
const (
	HeaderKind = "Sr-Kind"
	// HeaderSeq numbers a worker's frames of one call from 1 (events,
	// result parts, failed), so that the front end puts them in order and
	// asks for what it missed.
	HeaderSeq = "Sr-Seq"
	// HeaderPart and HeaderParts place a part of a request or a result.
	HeaderPart  = "Sr-Part"
	HeaderParts = "Sr-Parts"
	// HeaderAck is, in a front end's beat, the highest frame number up to
	// which it has every frame.
	HeaderAck = "Sr-Ack"
	// HeaderLast is, in a worker's beat, the highest frame number it sent.
	HeaderLast = "Sr-Last"
	// HeaderState is, in a worker's beat, where the call stands (State*).
	HeaderState = "Sr-State"
	// HeaderMissing lists, in a worker's beat while it waits for parts,
	// the parts it lacks (comma-separated).
	HeaderMissing = "Sr-Missing"
	// HeaderInstance is the worker process's Instance, in its answers.
	HeaderInstance = "Sr-Instance"
	// HeaderRuntime, HeaderNetwork and HeaderCaller describe an offer.
	HeaderRuntime = "Sr-Runtime"
	HeaderNetwork = "Sr-Network"
	HeaderCaller  = "Sr-Caller"
	// HeaderOp names, in an offer, the session operation (OpSession*)
	// its request is; absent for a plain call.
	HeaderOp = "Sr-Op"
	// statusHeader is NATS's own: "503" when nobody listens on a
	// subject (no responders).
	statusHeader = "Status"
)

// States of a call in a worker's beat.
const (
	StateWaiting  = "waiting"  // offered; waiting for the go or parts
	StateRunning  = "running"  // the engine has it
	StateFinished = "finished" // its last frame is sent
)

// NewFrame is a frame of kind to subject, replying to reply.
func NewFrame(subject, reply string, kind Kind, body []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Reply = reply
	m.Header.Set(HeaderKind, string(kind))
	m.Data = body
	return m
}

// KindOf is the kind of a frame ("" for a message that is no frame).
func KindOf(m *nats.Msg) Kind {
	if m.Header == nil {
		return ""
	}
	return Kind(m.Header.Get(HeaderKind))
}

// NoResponders reports whether m is NATS's answer that nobody listens on
// the subject a message with a reply was sent to: the worker is gone
// (or, for a moment, reconnecting to another node).
func NoResponders(m *nats.Msg) bool {
	return m.Header != nil && m.Header.Get(statusHeader) == "503" && len(m.Data) == 0
}

// SetInt sets a numeric header.
func SetInt(m *nats.Msg, name string, v int) { m.Header.Set(name, strconv.Itoa(v)) }

// Int reads a numeric header; -1 when absent or not a number.
func Int(m *nats.Msg, name string) int {
	if m.Header == nil {
		return -1
	}
	v, err := strconv.Atoi(m.Header.Get(name))
	if err != nil {
		return -1
	}
	return v
}

// HeaderReserve is room kept in each message for headers and NATS's own
// framing, below the server's maximum payload.
const HeaderReserve = 4 << 10

// MinPartSize is the least payload a part carries (but the last), however
// small the servers' maximum payload: a receiver bounds a count of parts
// by it.
const MinPartSize = 1 << 10

// PartSize is how much payload one frame carries on a connection whose
// server takes messages of up to maxPayload bytes.
func PartSize(maxPayload int64) int {
	return max(int(maxPayload)-HeaderReserve, MinPartSize)
}

// Split cuts data into parts of at most size bytes: always at least one,
// empty for empty data. The parts share data's memory.
func Split(data []byte, size int) [][]byte {
	if len(data) == 0 {
		return [][]byte{{}}
	}
	parts := make([][]byte, 0, (len(data)+size-1)/size)
	for len(data) > size {
		parts = append(parts, data[:size:size])
		data = data[size:]
	}
	return append(parts, data)
}

// WireEvent is an execapi.Event in a KindEvents frame. It carries no
// elapsed time: the front end times each event from when it received the
// call, which is what its caller waited.
type WireEvent struct {
	Kind execapi.EventKind `json:"kind"`
	Data []byte            `json:"data,omitempty"`
}

// Event is the execapi.Event w carries, its Elapsed left for the receiver
// to set.
func (w WireEvent) Event() execapi.Event {
	return execapi.Event{Kind: w.Kind, Data: w.Data}
}

// Failure is why a call produced no result, as a worker reports it: a
// refusal (nothing ran; another worker may take the call), a request its
// own policy found invalid, or a run that failed (the sandbox did, or the
// worker could not run it).
type Failure struct {
	Refusal *execapi.Refusal         `json:"refusal,omitempty"`
	Invalid *execapi.ValidationError `json:"invalid,omitempty"`
	Message string                   `json:"message,omitempty"`
	// Session is a session error of the contract (not found, ended, a
	// file's), passed on as it is.
	Session *SessionFailure `json:"session,omitempty"`
	// Elsewhere says that another worker may take the call: what made
	// it invalid is this worker's (its operator allows no egress, say).
	// Refusals always may go elsewhere.
	Elsewhere bool `json:"elsewhere,omitempty"`
}

// Retryable reports whether nothing ran and another worker may take the
// call.
func (f Failure) Retryable() bool { return f.Refusal != nil || f.Elsewhere }

// FailureOf is the Failure that reports err.
func FailureOf(err error) Failure {
	var r *execapi.Refusal
	var v *execapi.ValidationError
	switch {
	case errors.As(err, &r):
		return Failure{Refusal: r}
	case errors.As(err, &v):
		return Failure{Invalid: v}
	case sessionFailureOf(err) != nil:
		return Failure{Session: sessionFailureOf(err)}
	default:
		return Failure{Message: err.Error()}
	}
}

// Err is the error f reports, as the worker had it: an *execapi.Refusal,
// an *execapi.ValidationError, or an error saying that worker's run failed.
func (f Failure) Err(worker string) error {
	switch {
	case f.Refusal != nil:
		return f.Refusal
	case f.Invalid != nil:
		return f.Invalid
	case f.Session != nil && f.Session.err() != nil:
		return f.Session.err()
	default:
		return fmt.Errorf("the run on worker %s failed: %s", worker, f.Message)
	}
}

// EncodeFailure is f's body.
func EncodeFailure(f Failure) []byte {
	data, _ := json.Marshal(f)
	return data
}

// DecodeFailure reads a failure's body; one it cannot read is a failed run.
func DecodeFailure(data []byte) Failure {
	var f Failure
	if err := json.Unmarshal(data, &f); err != nil || f.Refusal == nil && f.Invalid == nil && f.Message == "" && (f.Session == nil || f.Session.err() == nil) {
		return Failure{Message: "the worker's account of the failure is unreadable"}
	}
	return f
}
