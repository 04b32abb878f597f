// Package kernel holds what keeps an interpreter's state across the calls of
// a session: a long-lived Python kernel (python.py) and Node.js kernel
// (node.js), each fed one cell at a time over its fds 3 and 4, and a wrapper
// for bash (bash.sh) that keeps exported variables and the working
// directory in files between fresh shells. The programs are embedded and
// reach the interpreter as its -c/-e argument, as warm starts do, so
// nothing in the image or the sandbox's writable layer chooses what starts.
//
// The frame (frame.go) is small on purpose, so the C init, the Go init and
// both kernels each implement it in a few lines: a request is a u32
// little-endian length and then initproto.PrestartJob's NUL-ended fields
// (working directory, program file, environment); a reply is a u32 length
// and "exit=N\0". Everything a kernel says is untrusted (user code runs in
// its process and may write fd 4 itself): replies are bounded and parsed
// strictly, and a kernel that breaks the frame counts as lost.
//
// Driver is the side that feeds a kernel: it sends a cell, waits for its
// reply, interrupts it with SIGINT when the call's context ends and gives
// it up (lost: the caller kills it and the next call starts a new one)
// when it does not answer within the grace.
//
// A kernel's environment and working directory are its state: its first
// cell sets them (the frame's environment and directory), later cells'
// variables are applied over what the kernel has, so the engine sends a
// later cell the request's own variables (base < runtime < session state <
// request, as the bash wrapper orders them).
//
// What a cell sees, per kernel:
//   - Python: one __main__ for the kernel's life; a last bare expression is
//     shown through sys.displayhook (its repr; nothing for None or for an
//     assignment); tracebacks start at the cell's frames; SystemExit ends
//     the cell with its status (the kernel lives on); SIGINT raises
//     KeyboardInterrupt in the running cell (status 130) and is ignored
//     between cells; os._exit or a crash ends the kernel.
//   - Node.js: one context (this realm) for the kernel's life, each cell a
//     vm.Script; the completion value is shown with util.inspect unless
//     undefined (a Promise is awaited first). Top-level let/const/class
//     persist, but declaring the same name again in a later cell is a
//     SyntaxError, as in separate <script>s of one page: use var or plain
//     assignment for names a later cell redefines. process.exit ends the
//     kernel. SIGINT interrupts synchronous code and a pending promise; one
//     that comes just as a script returns can be lost in Node's
//     breakOnSigint watchdog, and the interrupt's grace then ends the kernel.
//   - bash: no kernel; each call is a fresh shell that restores and saves
//     exported variables and the working directory (BashCommand).
package kernel
