package httpapi

import (
	"context"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// payer is whose limits a call through the gate counts against. It is
// fixed by the face of the gate the call came in by (Server.Service and
// the MCP front end: the caller's key; the console's: the operator), never
// read from the call's context, so that the caller's name is only ever a
// label: no name lets a call past a key's limits.
type payer int

const (
	// payerKey: the key execapi.CallerFrom names (none on a server
	// without keys) is admitted against its rate and concurrency.
	payerKey payer = iota
	// payerOperator: the operator, signed in to the console, has no key
	// and so no key's limits; the queue and the sandbox slots still apply.
	payerOperator
)

// operatorGate is the gate as the console's playground holds it
// (Config.Console): its calls are the operator's, counted against no key,
// and recorded under ConsoleCaller whatever their context names.
type operatorGate struct{ g *gate }

var _ execapi.Service = operatorGate{}

// Describe implements execapi.Service.
func (o operatorGate) Describe(ctx context.Context) (execapi.Info, error) {
	return o.g.Describe(ctx)
}

// Exec implements execapi.Executor.
func (o operatorGate) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	return o.g.execAs(execapi.WithCaller(ctx, ConsoleCaller), req, events, payerOperator)
}
