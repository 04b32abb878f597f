// Package client is the Go client of a ScratchRun server's HTTP API (or
// the hosted API): run untrusted code in a fresh sandbox and get its
// output, exit code and returned files.
//
//	c, err := client.FromEnvironment() // SCRATCHRUN_API_URL, SCRATCHRUN_API_KEY
//	res, err := c.Run(ctx, client.Request{Runtime: "python3.13", Code: `print("hi")`})
//
// Run returns a Result whenever the program ran, whatever it did (its
// ExitCode and Outcome say: 124 for the timeout, 137 for the memory
// limit); an error means there is no result. The server's answers are an
// *APIError (errors.As: Status, Code, Field, RetryAfter), matching the
// sentinels ErrInvalidRequest, ErrUnauthorized, ErrRefused, ErrWorkerLost
// and ErrIdempotencyUnknown with errors.Is.
//
// Calls the server refused before any of it ran (429, a 503 naming its
// reason) are retried after the server's Retry-After, within bounds
// (WithRetries, WithoutRetries); the key's maximum of open sessions
// (CodeSessionLimit) is not, as waiting frees none. A lost connection is retried only when
// the call carries an Idempotency-Key (WithIdempotencyKey per call,
// WithAutoIdempotency for all): the server then runs the code at most
// once and answers the retry with the first run's result.
//
// Stream yields the run's events as they happen (started, stdout and
// stderr chunks, then the result or an error), from the server's
// text/event-stream answer.
//
// The request and description types are the server's own contract
// (package internal/execapi), aliased here: they cannot drift from what
// the server decodes. Result is this package's, so that returned files
// are bytes (Save, SaveAll). The package depends only on the standard
// library and that contract; it never imports the server.
package client
