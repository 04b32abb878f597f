package execapi

import (
	"testing"
	"time"
)

// WithDefaults fills exactly what a request leaves to the operator, with
// what Validate would take for it, and leaves what the caller set alone:
// a front end forwards the filled request, and a worker must run it as
// the front end's own Validate would have.
func TestWithDefaults(t *testing.T) {
	p := DefaultPolicy()
	p.DefaultTimeout, p.DefaultMemoryMB, p.NetworkDefault, p.AllowEgress = 5*time.Second, 128, NetworkEgress, true

	got := p.WithDefaults(Request{Runtime: "python3.13", Code: "print(1)"})
	if got.Limits.TimeoutMS != 5000 || got.Limits.MemoryMB != 128 || got.Network != NetworkEgress {
		t.Errorf("defaults of an empty request: %+v", got)
	}
	set := Request{Runtime: "python3.13", Code: "print(1)", Limits: Limits{TimeoutMS: 2000, MemoryMB: 256}, Network: NetworkNone}
	if got := p.WithDefaults(set); got.Limits != set.Limits || got.Network != set.Network {
		t.Errorf("fields the request set were changed: %+v", got)
	}

	for _, req := range []Request{{Runtime: "python3.13", Code: "print(1)"}, set} {
		direct, err := p.Validate(req)
		if err != nil {
			t.Fatal(err)
		}
		filled, err := p.Validate(p.WithDefaults(req))
		if err != nil {
			t.Fatal(err)
		}
		if direct.Timeout != filled.Timeout || direct.MemoryMB != filled.MemoryMB || direct.Network != filled.Network {
			t.Errorf("Validate(%+v) = %v, %d, %s; after WithDefaults %v, %d, %s", req,
				direct.Timeout, direct.MemoryMB, direct.Network, filled.Timeout, filled.MemoryMB, filled.Network)
		}
	}
}
