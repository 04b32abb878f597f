package execapi

import (
	"testing"
	"time"
)

// What a policy promises is what Describe says, whatever the operator
// changed: the limits' defaults and ranges in the units of the contract,
// the network default and whether egress may be asked for.
func TestPolicyInfo(t *testing.T) {
	p := DefaultPolicy()
	p.DefaultTimeout, p.MinTimeout, p.MaxTimeout = 5*time.Second, 2*time.Second, 20*time.Second
	p.DefaultMemoryMB, p.MinMemoryMB, p.MaxMemoryMB = 128, 96, 384
	p.NetworkDefault, p.AllowEgress = NetworkEgress, true
	got := p.Info()
	want := Info{NetworkDefault: NetworkEgress, EgressAllowed: true,
		DefaultTimeoutMS: 5000, MinTimeoutMS: 2000, MaxTimeoutMS: 20000,
		DefaultMemoryMB: 128, MinMemoryMB: 96, MaxMemoryMB: 384}
	if got.NetworkDefault != want.NetworkDefault || got.EgressAllowed != want.EgressAllowed ||
		got.DefaultTimeoutMS != want.DefaultTimeoutMS || got.MinTimeoutMS != want.MinTimeoutMS || got.MaxTimeoutMS != want.MaxTimeoutMS ||
		got.DefaultMemoryMB != want.DefaultMemoryMB || got.MinMemoryMB != want.MinMemoryMB || got.MaxMemoryMB != want.MaxMemoryMB {
		t.Errorf("Info() = %+v, want %+v", got, want)
	}
}
