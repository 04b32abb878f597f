package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// builderVersion is hashed into every recipe. Bump it whenever the way an
// image is produced changes (build code, extraction, common hooks) so that
// existing cache entries stop counting as current.
const builderVersion = "scratchrun-images/2"

// aptOptions are passed to mmdebstrap as --aptopt. mmdebstrap already skips
// Recommends by default; saying so here keeps images lean even if that
// default changes, and documents it in the recipe hash.
var aptOptions = []string{
	`APT::Install-Recommends "false"`,
	`APT::Install-Suggests "false"`,
}

// dpkgOptions keep documentation, manuals and translations out of images
// (about 60 MB on trixie). Copyright files stay: they are the licence
// notices of what we redistribute.
var dpkgOptions = []string{
	"path-exclude=/usr/share/doc/*",
	"path-include=/usr/share/doc/*/copyright",
	"path-exclude=/usr/share/man/*",
	"path-exclude=/usr/share/info/*",
	"path-exclude=/usr/share/locale/*",
	"path-exclude=/usr/share/lintian/*",
}

// commonHooks run after each recipe's own customize hooks, in every image.
// They make the tree fit a sandbox: a fixed identity (hosts, hostname)
// instead of the build host's, no resolver configuration of the build host
// (networked sandboxes get theirs from the egress setup), writable /code
// and /tmp, a /root everyone may read (it holds only what recipes bake into
// it, such as matplotlib's font cache: an unprivileged engine copies it into
// its sandboxes' HOME, which the sandbox cannot write otherwise), and no apt
// state (sandboxes never run apt).
var commonHooks = []string{
	`rm -f "$1/etc/hosts" && printf '127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n' > "$1/etc/hosts"`,
	`rm -f "$1/etc/hostname" && echo sandbox > "$1/etc/hostname"`,
	`rm -f "$1/etc/resolv.conf" && : > "$1/etc/resolv.conf"`,
	`mkdir -p "$1/code" "$1/tmp" && chmod 1777 "$1/code" "$1/tmp"`,
	`mkdir -p "$1/root" && chmod 0755 "$1/root"`,
	`rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*_Packages "$1/var/lib/apt/lists/"*Release* "$1/var/log/"*.log "$1/var/log/apt/"*.log`,
}

// recipeHash returns the hex sha256 naming a recipe's cache entry: over the
// builder version, the recipe and the build settings every image shares,
// as canonical JSON (struct fields in fixed order, no maps).
func recipeHash(img imageRecipe) string {
	in := struct {
		Builder string      `json:"builder"`
		Recipe  imageRecipe `json:"recipe"`
		AptOpts []string    `json:"aptopts"`
		DpkgOpt []string    `json:"dpkgopts"`
		Hooks   []string    `json:"common_hooks"`
	}{builderVersion, img, aptOptions, dpkgOptions, commonHooks}
	data, err := json.Marshal(in)
	if err != nil {
		// Marshalling strings and slices of strings cannot fail.
		panic(fmt.Sprintf("images: marshal recipe: %v", err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// shortHash is the prefix of a recipe hash used in directory names.
func shortHash(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// mmdebstrapArgs returns the command line that builds img into the tarball
// out.
func mmdebstrapArgs(img imageRecipe, out string) []string {
	args := []string{"--variant=minbase"}
	for _, o := range aptOptions {
		args = append(args, "--aptopt="+o)
	}
	for _, o := range dpkgOptions {
		args = append(args, "--dpkgopt="+o)
	}
	args = append(args, "--include="+strings.Join(img.Packages, ","))
	if len(img.Stubs) > 0 {
		// The essential hook runs after the Essential:yes set is
		// installed (so dpkg-deb works in the chroot) and before apt
		// resolves the packages, which then finds the stubs installed.
		args = append(args, "--essential-hook="+stubScript(img.Stubs))
	}
	for _, h := range img.Customize {
		args = append(args, "--customize-hook="+h)
	}
	for _, h := range commonHooks {
		args = append(args, "--customize-hook="+h)
	}
	// "--" so that a suite or path can never be read as an option.
	return append(args, "--", img.Suite, out)
}

// stubScript builds and installs one empty package per name, with an
// epoch high enough to satisfy any versioned dependency on it. Names were
// validated to Debian's package alphabet, so they are safe in the script.
// It is one line: mmdebstrap first stats a hook as a possible file name
// and warns about names with newlines.
func stubScript(names []string) string {
	steps := []string{`d=/tmp/scratchrun-stubs`, `rm -rf "$1$d"`, `mkdir -p "$1$d"`}
	for _, n := range names {
		control := "Package: " + n + `\nVersion: 99:0scratchrun1\nArchitecture: all\n` +
			`Maintainer: ScratchRun image builder <root@localhost>\n` +
			`Description: empty stand-in for ` + n + `\n installed by the ScratchRun image builder` +
			` so that a hard dependency unused at run time is not installed.\n`
		steps = append(steps,
			fmt.Sprintf(`mkdir -p "$1$d/%s/DEBIAN"`, n),
			fmt.Sprintf(`printf '%s' > "$1$d/%s/DEBIAN/control"`, control, n),
			fmt.Sprintf(`chroot "$1" dpkg-deb --root-owner-group --build "$d/%[1]s" "$d/%[1]s.deb" >/dev/null`, n),
			fmt.Sprintf(`chroot "$1" dpkg -i "$d/%s.deb"`, n))
	}
	steps = append(steps, `rm -rf "$1$d"`)
	return strings.Join(steps, " && ")
}
