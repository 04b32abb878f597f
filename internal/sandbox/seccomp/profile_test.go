//go:build linux && amd64

package seccomp

import (
	"reflect"
	"slices"
	"testing"

	dockerprofile "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestApplicableRulesMatchDocker cross-checks the include/exclude evaluation
// with moby's own (GetDefaultProfile), which uses the running kernel and
// GOARCH: for a container whose bounding set is DefaultCapabilities both must
// select the same rules.
func TestApplicableRulesMatchDocker(t *testing.T) {
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
		Bounding: slices.Clone(DefaultCapabilityNames),
	}}}
	docker, err := dockerprofile.GetDefaultProfile(spec)
	if err != nil {
		t.Fatal(err)
	}
	ours := sandboxRules(t)
	if !reflect.DeepEqual(ours, docker.Syscalls) {
		t.Errorf("rule sets differ:\nours:   %+v\ndocker: %+v", ours, docker.Syscalls)
	}
	if !slices.Contains(docker.Architectures, specs.ArchX86) || !slices.Contains(docker.Architectures, specs.ArchX32) {
		t.Errorf("Docker's x86_64 profile no longer lists x86/x32 (%v); revisit the archMap comment in arch.go", docker.Architectures)
	}
}

// TestApplies exercises each include/exclude condition.
func TestApplies(t *testing.T) {
	env := profileEnv{arch: "amd64", caps: []string{"CAP_CHOWN"}, kernel: dockerprofile.KernelVersion{Kernel: 5, Major: 10}}
	kv := func(k, m uint64) *dockerprofile.KernelVersion {
		return &dockerprofile.KernelVersion{Kernel: k, Major: m}
	}
	cases := []struct {
		name     string
		in, ex   *dockerprofile.Filter
		included bool
	}{
		{"unconditional", nil, nil, true},
		{"include arch", &dockerprofile.Filter{Arches: []string{"amd64", "x32"}}, nil, true},
		{"include other arch", &dockerprofile.Filter{Arches: []string{"s390x"}}, nil, false},
		{"include held cap", &dockerprofile.Filter{Caps: []string{"CAP_CHOWN"}}, nil, true},
		{"include missing cap", &dockerprofile.Filter{Caps: []string{"CAP_SYS_ADMIN"}}, nil, false},
		{"include all caps needed", &dockerprofile.Filter{Caps: []string{"CAP_CHOWN", "CAP_SYS_ADMIN"}}, nil, false},
		{"include old kernel", &dockerprofile.Filter{MinKernel: kv(4, 8)}, nil, true},
		{"include newer kernel", &dockerprofile.Filter{MinKernel: kv(5, 11)}, nil, false},
		{"exclude arch", nil, &dockerprofile.Filter{Arches: []string{"amd64"}}, false},
		{"exclude other arch", nil, &dockerprofile.Filter{Arches: []string{"s390"}}, true},
		{"exclude held cap", nil, &dockerprofile.Filter{Caps: []string{"CAP_SYS_ADMIN", "CAP_CHOWN"}}, false},
		{"exclude missing cap", nil, &dockerprofile.Filter{Caps: []string{"CAP_SYS_ADMIN"}}, true},
		{"exclude reached kernel", nil, &dockerprofile.Filter{MinKernel: kv(5, 10)}, false},
		{"exclude future kernel", nil, &dockerprofile.Filter{MinKernel: kv(6, 0)}, true},
	}
	for _, c := range cases {
		call := &dockerprofile.Syscall{Includes: c.in, Excludes: c.ex}
		if got := env.applies(call); got != c.included {
			t.Errorf("%s: applies = %v", c.name, got)
		}
	}
}
