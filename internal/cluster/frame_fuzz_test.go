package cluster_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// decodedFrame is what the receivers of a frame read of it: its kind, its
// numbers and words, and its body as its kind has it.
type decodedFrame struct {
	Kind    cluster.Kind
	Numbers map[string]int
	Words   map[string]string
	// Failure is the body of a refused or failed frame.
	Failure *cluster.Failure
	// Events is the body of an events frame that is a list of events
	// (one that is not is ignored), as the events it carries.
	Events []eventOf
	// Data is any other frame's body (request and result parts).
	Data []byte
}

// eventOf is a WireEvent as the front end passes it on: an empty and an
// absent data are the same event.
type eventOf struct {
	Kind string
	Data string
}

var (
	numberHeaders = []string{cluster.HeaderSeq, cluster.HeaderPart, cluster.HeaderParts, cluster.HeaderAck, cluster.HeaderLast}
	wordHeaders   = []string{cluster.HeaderState, cluster.HeaderMissing, cluster.HeaderInstance, cluster.HeaderRuntime, cluster.HeaderNetwork, cluster.HeaderCaller}
	frameKinds    = map[cluster.Kind]bool{
		cluster.KindOffer: true, cluster.KindPart: true, cluster.KindGo: true, cluster.KindBeat: true, cluster.KindCancel: true, cluster.KindDone: true,
		cluster.KindReady: true, cluster.KindRefused: true, cluster.KindUnknown: true, cluster.KindEvents: true, cluster.KindResult: true, cluster.KindFailed: true,
	}
)

// decodeFrame reads m with the package's decoding functions; ok is false
// for a message that is no frame, which every receiver ignores.
func decodeFrame(m *nats.Msg) (d decodedFrame, ok bool) {
	d.Kind = cluster.KindOf(m)
	if !frameKinds[d.Kind] {
		return d, false
	}
	d.Numbers, d.Words = map[string]int{}, map[string]string{}
	for _, h := range numberHeaders {
		if v := cluster.Int(m, h); v != -1 {
			d.Numbers[h] = v
		}
	}
	for _, h := range wordHeaders {
		if v := m.Header.Get(h); v != "" {
			d.Words[h] = v
		}
	}
	switch d.Kind {
	case cluster.KindRefused, cluster.KindFailed:
		f := cluster.DecodeFailure(m.Data)
		_ = f.Err("w1")
		_ = f.Retryable()
		d.Failure = &f
	case cluster.KindEvents:
		var evs []cluster.WireEvent
		if json.Unmarshal(m.Data, &evs) != nil {
			return d, true
		}
		d.Events = []eventOf{}
		for _, we := range evs {
			ev := we.Event()
			d.Events = append(d.Events, eventOf{string(ev.Kind), string(ev.Data)})
		}
	default:
		d.Data = bytes.Clone(m.Data)
	}
	return d, true
}

// encodeFrame writes d back as a frame with the package's encoders.
func encodeFrame(t *testing.T, d decodedFrame) *nats.Msg {
	body := d.Data
	switch {
	case d.Failure != nil:
		body = cluster.EncodeFailure(*d.Failure)
	case d.Events != nil:
		evs := []cluster.WireEvent{}
		for _, e := range d.Events {
			evs = append(evs, cluster.WireEvent{Kind: execapi.EventKind(e.Kind), Data: []byte(e.Data)})
		}
		var err error
		if body, err = json.Marshal(evs); err != nil {
			t.Fatalf("events do not encode: %v", err)
		}
	}
	m := cluster.NewFrame("scratchrun.call.w1.c1", "_INBOX.c1", d.Kind, body)
	for h, v := range d.Numbers {
		cluster.SetInt(m, h, v)
	}
	for h, v := range d.Words {
		m.Header.Set(h, v)
	}
	return m
}

// FuzzFrame decodes a frame as NATS delivers it, a header block and a body,
// the way the front end and the worker read frames of each other (which
// neither trusts: a worker's frames carry what a sandbox produced, and
// anything on the subjects may be sent by whoever holds the credentials).
// A header block NATS refuses, or a message of no known kind, is refused;
// anything else must decode without a panic, and what was decoded must
// encode, with the package's own encoders, to a frame that decodes to the
// same thing. The seeds, in testdata/fuzz/FuzzFrame, are frames of every
// kind as the two sides send them and the malformed answers the protocol
// tests play.
func FuzzFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, header, body []byte) {
		h, err := nats.DecodeHeadersMsg(header)
		if err != nil {
			return
		}
		m := &nats.Msg{Subject: "scratchrun.call.w1.c1", Reply: "_INBOX.c1", Header: h, Data: body}
		_ = cluster.NoResponders(m)
		d, ok := decodeFrame(m)
		if !ok {
			return
		}
		again, ok := decodeFrame(encodeFrame(t, d))
		if !ok {
			t.Fatalf("a %q frame re-encodes to no frame", d.Kind)
		}
		if !reflect.DeepEqual(d, again) {
			t.Fatalf("a frame changed when encoded again:\n got %+v\nwant %+v", again, d)
		}
	})
}

// FuzzDecodeRegistration decodes a worker's registration as a front end
// reads it from the registry: refused, or a registration under its own
// key that encodes to one DecodeRegistration reads the same again.
func FuzzDecodeRegistration(f *testing.F) {
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		r, err := cluster.DecodeRegistration(key, data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("a decoded registration does not encode: %v", err)
		}
		again, err := cluster.DecodeRegistration(key, enc)
		if err != nil {
			t.Fatalf("a decoded registration encodes to one that is refused: %v", err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("a registration changed when encoded again:\n got %+v\nwant %+v", again, r)
		}
	})
}
