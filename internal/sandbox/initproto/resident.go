package initproto

import "time"

// ResidentJob hands a session's job to a kernel its init keeps running
// between jobs (sandbox.Resident): init starts the kernel (Argv, Env, Dir,
// confined as user code is, under a keeper of its own) when none of Key
// runs, writes Request to the kernel's fd 3 as it is (a frame of the
// kernel's, opaque to init) and reads the kernel's reply on its fd 4: a
// little-endian u32 length of at most MaxKernelReply, then "exit=N\0"
// with N in 0-255, the job's exit status. Anything else (a longer frame,
// another text, the kernel's end) loses the kernel, as a timeout or
// cancel does that Interrupt (the grace after a SIGINT) does not settle.
type ResidentJob struct {
	Key       string
	Argv      []string
	Env       []string
	Dir       string
	Request   []byte
	Interrupt time.Duration
}

// MaxKernelReply bounds a kernel's reply body (engine/kernel.MaxReply):
// "exit=255\0" is 9 bytes, and init reads no more than this.
const MaxKernelReply = 64

// MaxKernels bounds the kernels one session's init keeps at once (one per
// runtime of the session's image); a job of another key beyond them is
// refused, not started.
const MaxKernels = 4
