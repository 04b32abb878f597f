package kernel

import (
	"strconv"
	"syscall"
)

// interruptSignal is what init sends a kernel at a call's timeout.
const interruptSignal = syscall.SIGINT

func itoa(n int) string { return strconv.Itoa(n) }
