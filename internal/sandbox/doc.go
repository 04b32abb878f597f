// Package sandbox defines what an isolation backend does: create one sandbox,
// run one job in it, and destroy it, reporting honestly whether teardown
// finished. Implementations live below it (namespaces/, later gvisor/, microvm/).
//
// A backend knows nothing of HTTP, MCP, API keys, pools or the request JSON: it
// takes a prepared Job and returns an Outcome. It must never run more than one
// job in a sandbox.
package sandbox
