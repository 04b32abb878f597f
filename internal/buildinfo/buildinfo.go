package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set by the linker (see the package comment); empty in a plain build.
var version, commit, date string

// Dev is the version of a build that names none: no -ldflags, and no
// module version from the toolchain (a build outside a repository, or
// with -buildvcs=false).
const Dev = "dev"

// Info describes this build.
type Info struct {
	// Version is the release's version (a tag, or `git describe`), else
	// the module version the toolchain stamped, else Dev.
	Version string `json:"version"`
	// Commit is the commit built from ("" when unknown).
	Commit string `json:"commit"`
	// Date is when that was: the build's time from the release flags,
	// else the commit's time (RFC 3339; "" when unknown).
	Date string `json:"date"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Modified says the tree built had changes beyond Commit, as the
	// toolchain saw it.
	Modified bool `json:"modified"`
}

// Get returns this build's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi, version, commit, date)
}

// get fills in what the linker flags left empty from the toolchain's
// stamp bi (nil when the binary has none).
func get(bi *debug.BuildInfo, version, commit, date string) Info {
	info := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = Dev
		}
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Commit == "" {
				info.Commit = s.Value
			}
		case "vcs.time":
			if info.Date == "" {
				info.Date = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if info.Version == "" {
		info.Version = moduleVersion(bi.Main.Version)
	}
	return info
}

// moduleVersion is the main module's version as the toolchain stamped it
// (a tag, or a pseudo-version naming the commit), Dev when it has none.
func moduleVersion(v string) string {
	if v == "" || v == "(devel)" {
		return Dev
	}
	return v
}
