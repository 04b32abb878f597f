// Command zipstamp rewrites a zip archive with every entry's time set to
// one given time, keeping each entry's name, order, mode, flags and
// compressed bytes as they were. scripts/release.sh runs it on the Claude
// Desktop extension after mcpb pack, which stamps every entry with the
// moment it packs: stamped with the commit's time (SOURCE_DATE_EPOCH), two
// builds of one commit give the same bundle, as they give the same
// tarballs and packages, and server.json's fileSha256 of it.
//
//	go run ./internal/tools/zipstamp -time UNIX-SECONDS FILE
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	secs := flag.Int64("time", -1, "the entries' time, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if *secs < 0 || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: zipstamp -time UNIX-SECONDS FILE")
		os.Exit(2)
	}
	if err := stampFile(flag.Arg(0), time.Unix(*secs, 0).UTC()); err != nil {
		fmt.Fprintln(os.Stderr, "zipstamp:", err)
		os.Exit(1)
	}
}
