package main

import (
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// The cluster's commands refuse what cannot work before they connect to
// anything: a worker without NATS, a front end given a local engine's
// settings, NATS beyond loopback in the clear, a worker id no subject can
// carry.
func TestClusterFlagsRefuseUnsafeOrMeaninglessSetups(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "--nats (or SCRATCHRUN_NATS) is required"},
		{[]string{"worker", "--nats", "nats://10.9.8.7:4222"}, "use TLS"},
		{[]string{"worker", "--nats", "tls://10.9.8.7:4222"}, "authenticate"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:4222", "--id", "a.b"}, "--id"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:4222", "--runtimes", "cobol"}, "--runtimes"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:4222", "--capacity", "-1"}, "--capacity must not be negative"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:4222", "--cpu-threshold", "2"}, "--cpu-threshold"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:4222", "--memory-budget", "lots"}, "--memory-budget"},
		{[]string{"serve", "--nats", "nats://127.0.0.1:4222", "--capacity", "3"}, "--capacity shapes a local engine"},
		{[]string{"serve", "--nats", "nats://127.0.0.1:4222", "--isolation", "gvisor"}, "--isolation shapes a local engine"},
	} {
		r := scratchrun(t, t.TempDir(), "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d %q, want exit %d saying %q", c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
}

// A worker's default id comes from names that may hold what an id may
// not (a Kubernetes node's name, a host's).
func TestWorkerIDFromNames(t *testing.T) {
	for in, want := range map[string]string{"worker-1": "worker-1", "ip-10-0-0-1.ec2.internal": "ip-10-0-0-1-ec2-internal",
		".hidden": "hidden", "nœud": "n-ud", strings.Repeat("x", 70): strings.Repeat("x", 63), "": ""} {
		if got := asWorkerID(in); got != want {
			t.Errorf("asWorkerID(%q) = %q, want %q", in, got, want)
		}
	}
}
