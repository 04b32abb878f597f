package initproto

import (
	"net/netip"
	"time"
)

// A microVM sandbox's init (the Go init, as pid 1 of the guest) speaks the
// same four messages as every init, on virtio-serial ports in place of
// pipes, and two more of its own on a fifth port, the VM port: what a
// guest must be told that a process is given by its parent (the clock, the
// randomness, the limits of the cgroup it puts user code in, its network
// address), and what only the guest kernel can see (its own out-of-memory
// kills and refused forks). On the VM port:
//
//	guest -> engine  VMReport{}            once booted (the moment a snapshot is taken)
//	engine -> guest  VMMessage{Seed, ...}  before the setup
//	engine -> guest  VMMessage{limits}     before the job
//	guest -> engine  VMReport{Error}       "" when the job's limits fit
//	guest -> engine  VMReport{counts}      before the result
//
// The namespaces and gVisor inits never see these, so adding them left
// ProtocolVersion as it was; the setup's version check still tells a guest
// agent of another build.

// MaxVMMessageBytes bounds both VM-port messages as either side reads them.
const MaxVMMessageBytes = 64 << 10

// VMMessage is the engine's word to a guest agent on the VM port.
type VMMessage struct {
	// Now is the host's clock: a guest restored from a snapshot would
	// otherwise live at the moment the snapshot was taken. Zero: keep the
	// guest's.
	Now time.Time
	// Seed is fresh randomness the agent credits to the guest kernel's
	// pool and reseeds from, so that no two guests restored from one
	// snapshot share random state. Empty before a job.
	Seed []byte
	// MemoryBytes, MaxPids and CPUMillis are the limits of the guest
	// cgroup user code runs in (0: none); memory.max is what makes the
	// guest's own kernel kill at the request's memory_mb.
	MemoryBytes, MaxPids, CPUMillis int64
	// Address and Gateway configure the guest's network interface
	// (egress); the zero prefix means the guest has none.
	Address netip.Prefix
	Gateway netip.Addr
}

// VMReport is the guest agent's word to the engine on the VM port.
type VMReport struct {
	// Error refuses the VMMessage before a job: it is set when the job's
	// memory limit is below what the guest's user cgroup already uses.
	Error string
	// OOMKills and ForkFailures count what the guest cgroup's memory and
	// process limits did while the job ran.
	OOMKills, ForkFailures uint64
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (m VMMessage) MarshalBinary() ([]byte, error) {
	var e encoder
	var now int64
	if !m.Now.IsZero() {
		now = m.Now.UnixNano()
	}
	e.u64(uint64(now))
	e.bytes(m.Seed)
	e.u64(uint64(m.MemoryBytes))
	e.u64(uint64(m.MaxPids))
	e.u64(uint64(m.CPUMillis))
	var addr, gw string
	if m.Address.IsValid() {
		addr = m.Address.String()
	}
	if m.Gateway.IsValid() {
		gw = m.Gateway.String()
	}
	e.str(addr)
	e.str(gw)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *VMMessage) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = VMMessage{}
	if now := int64(d.u64()); now != 0 {
		m.Now = time.Unix(0, now)
	}
	m.Seed = d.bytes()
	m.MemoryBytes, m.MaxPids, m.CPUMillis = int64(d.u64()), int64(d.u64()), int64(d.u64())
	addr, gw := d.str(), d.str()
	if err := d.done("vm"); err != nil {
		return err
	}
	var err error
	if addr != "" {
		if m.Address, err = netip.ParsePrefix(addr); err != nil {
			return err
		}
	}
	if gw != "" {
		if m.Gateway, err = netip.ParseAddr(gw); err != nil {
			return err
		}
	}
	return nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (m VMReport) MarshalBinary() ([]byte, error) {
	var e encoder
	e.str(m.Error)
	e.u64(m.OOMKills)
	e.u64(m.ForkFailures)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *VMReport) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = VMReport{Error: d.str(), OOMKills: d.u64(), ForkFailures: d.u64()}
	return d.done("vm report")
}
