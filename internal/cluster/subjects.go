package cluster

import (
	"fmt"
	"regexp"
)

// Subjects and the registry's bucket. They are the names the documented
// NATS permissions (deploy/nats) grant, so they never change without the
// permissions changing with them.
const (
	// CallPrefix starts the subject of every call: CallPrefix.<worker>.<call>.
	CallPrefix = "scratchrun.call"
	// RegistryBucket is the JetStream key-value bucket of live workers,
	// one key per worker id.
	RegistryBucket = "scratchrun_workers"
)

// workerIDPattern keeps an id one subject token, one registry key and one
// NATS user name: no dots, wildcards or spaces.
var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// ValidateWorkerID checks that id can name a worker: letters, digits, '-'
// and '_', at most 63, starting with a letter or digit.
func ValidateWorkerID(id string) error {
	if !workerIDPattern.MatchString(id) {
		return fmt.Errorf("worker id %q: use letters, digits, '-' and '_' (at most 63, starting with a letter or digit)", id)
	}
	return nil
}

// CallSubject is the subject of a call's frames to a worker.
func CallSubject(worker, call string) string { return CallPrefix + "." + worker + "." + call }

// WorkerCalls is what a worker subscribes to: every call addressed to it.
func WorkerCalls(worker string) string { return CallPrefix + "." + worker + ".*" }

// RegistrySubject is the subject a worker publishes its registration on:
// the key-value bucket's stream stores it under the worker's key.
func RegistrySubject(worker string) string { return "$KV." + RegistryBucket + "." + worker }
