package gvisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The probe's verdict is kept for the host's boot: a second backend in
// the same boot (a one-shot `exec` after a server) starts no runsc
// sandbox at all, and a backend in another boot probes again.
func TestProbeVerdictKeptForTheBoot(t *testing.T) {
	dir := t.TempDir()
	// runsc behind a script that logs every command it is given.
	runs := filepath.Join(dir, "runs.log")
	wrapper := filepath.Join(dir, "runsc")
	script := "#!/bin/sh\necho \"$@\" >> " + runs + "\nexec " + backend(t).Runsc() + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bootID := filepath.Join(dir, "boot_id")
	opts := Options{StateDir: filepath.Join(dir, "state"), CgroupParent: testCgroupParent + "-probe",
		Runsc: wrapper, Platform: PlatformSystrap, ProbeCacheDir: filepath.Join(dir, "probes"), bootIDFile: bootID}
	sandboxesStarted := func() int { return runsLogged(runs, "") }
	open := func(boot string) *Backend {
		t.Helper()
		if err := os.WriteFile(bootID, []byte(boot+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		return b
	}

	if b := open("boot-1"); b.probeCached || sandboxesStarted() != 1 {
		t.Fatalf("first backend of the boot: cached %v, %d sandboxes started; want a probe of one", b.probeCached, sandboxesStarted())
	}
	if b := open("boot-1"); !b.probeCached || sandboxesStarted() != 1 {
		t.Errorf("second backend of the boot: cached %v, %d sandboxes started in all; want the first one's verdict", b.probeCached, sandboxesStarted())
	}
	if b := open("boot-2"); b.probeCached || sandboxesStarted() != 2 {
		t.Errorf("first backend of another boot: cached %v, %d sandboxes started in all; want a new probe", b.probeCached, sandboxesStarted())
	}
}

// A KVM platform that fails here is not tried again in the same boot, even
// by a backend whose other options (and so whole verdict) differ: its
// timeout is paid once per boot. (A host where KVM works has nothing to
// show.)
func TestProbeKVMFailureKeptForTheBoot(t *testing.T) {
	if kvmUsable() != nil {
		t.Skip("no usable /dev/kvm: the KVM platform is never probed")
	}
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.log")
	wrapper := filepath.Join(dir, "runsc")
	script := "#!/bin/sh\necho \"$@\" >> " + runs + "\nexec " + backend(t).Runsc() + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("boot-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, parent := range []string{testCgroupParent + "-kvm1", testCgroupParent + "-kvm2"} {
		b, err := New(Options{StateDir: filepath.Join(dir, "state"), CgroupParent: parent,
			Runsc: wrapper, ProbeCacheDir: filepath.Join(dir, "probes"), bootIDFile: bootID})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		if b.Platform() == PlatformKVM {
			t.Skip("the KVM platform works here")
		}
		if b.probeCached {
			t.Fatalf("backend %d with a cgroup parent of its own reused a whole verdict", i)
		}
		if n := runsLogged(runs, "--platform=kvm"); n != 1 {
			t.Errorf("after backend %d: %d KVM probes, want 1 in the boot", i, n)
		}
	}
}

// runsLogged counts the `runsc run` commands in log that carry flag.
func runsLogged(log, flag string) int {
	data, _ := os.ReadFile(log)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(" "+line+" ", " run ") && strings.Contains(line, flag) {
			n++
		}
	}
	return n
}
