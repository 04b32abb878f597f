//go:build linux

// Command scratchrun-init is pid 1 of every gVisor sandbox, and the reaper
// its user code runs under (package goinit). The engine (scratchrun) starts
// it through runsc; it is not meant to be run by hand. It is a separate,
// small binary because it starts once per sandbox: linking only the init code
// keeps that start to a millisecond or so, where the full scratchrun binary
// would spend tens of milliseconds initialising packages a sandbox never uses.
package main

import "github.com/scratchrun/scratchrun/internal/sandbox/goinit"

func main() { goinit.Main() }
