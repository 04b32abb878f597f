// Command machofat joins thin Mach-O executables of different CPUs (the
// darwin/amd64 and darwin/arm64 builds of scratchrun) into one universal
// ("fat") binary that macOS runs natively on either CPU, as Apple's lipo
// -create does. The Claude Desktop extension bundle needs it: its
// manifest chooses a command by OS only (platform_overrides has no
// architecture), so macOS gets one file for both. No lipo runs on Linux
// and no pure-Go one is on the module proxy; the format (a big-endian
// fat_header, one fat_arch per slice, each slice at an aligned offset) is
// small enough to write with debug/macho's own types.
// scripts/release.sh runs it:
//
//	go run ./internal/tools/machofat -o OUT IN...
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "", "the universal binary to write")
	flag.Parse()
	if *out == "" || flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: machofat -o OUT IN IN...")
		os.Exit(2)
	}
	if err := joinFiles(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "machofat:", err)
		os.Exit(1)
	}
}
