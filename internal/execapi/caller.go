package execapi

import "context"

type callerKey struct{}

// WithCaller records who is calling (an API key's id) in ctx, so that
// accounting and fairness layers below a front end can tell callers apart
// without the front end knowing about them.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom returns the caller recorded by WithCaller, or "".
func CallerFrom(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}
