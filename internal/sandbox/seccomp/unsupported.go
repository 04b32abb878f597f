//go:build !(linux && amd64)

package seccomp

import (
	"errors"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// errUnsupported is returned off linux/amd64: the translation and the tests
// that prove it safe (architecture check, clone flag argument position,
// syscall names) are written for x86_64 only.
var errUnsupported = errors.New("seccomp: only linux/amd64 is supported")

// Policy returns the assembled sandbox policy; it is only available on
// linux/amd64.
func Policy() (*seccompbpf.Policy, error) { return nil, errUnsupported }

// Install loads the sandbox filter; it is only available on linux/amd64.
func Install() error { return errUnsupported }

// Program is unavailable off linux/amd64.
func Program() ([]unix.SockFilter, error) { return nil, errUnsupported }
