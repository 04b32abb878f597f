package client

import (
	"runtime/debug"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
)

// modulePath is the module this package is part of.
const modulePath = "github.com/scratchrun/scratchrun"

// Version is the client's version: that of the scratchrun module the
// program was built with (a program's go.mod requires it: v1.2.3 or a
// pseudo-version), the release's own in scratchrun's binaries, "dev" when
// the build has none. The client sends it as its User-Agent.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildinfo.Dev
	}
	return versionIn(bi, buildinfo.Get)
}

// versionIn finds the module's version in bi; own is this build's, for a
// program of the module itself.
func versionIn(bi *debug.BuildInfo, own func() buildinfo.Info) string {
	if bi.Main.Path == modulePath {
		return own().Version
	}
	for _, dep := range bi.Deps {
		if dep.Path != modulePath {
			continue
		}
		if dep.Replace != nil && dep.Replace.Version != "" {
			return dep.Replace.Version
		}
		if dep.Version != "" && dep.Version != "(devel)" {
			return dep.Version
		}
	}
	return buildinfo.Dev
}
