#!/usr/bin/env bash
# Builds a release of ScratchRun into dist/: for linux/amd64 and
# linux/arm64, a tarball of scratchrun, scratchrun-init and scratchrun-spawn,
# a .deb and an .rpm (nfpm, packaging/nfpm.yaml) and a CycloneDX SBOM of
# scratchrun's modules (cyclonedx-gomod); for darwin/amd64, darwin/arm64 and
# windows/amd64 a tarball of scratchrun alone (the client: scratchrun mcp
# forwarding to a server); the Claude Desktop extension of those clients,
# scratchrun-mcp-VERSION.mcpb (packaging/mcpb/); server.json, the MCP
# Registry's entry for this version (packaging/server-json.sh); then
# SHA256SUMS over all of them.
# nfpm and cyclonedx-gomod are go.mod tools: no download step of their own.
#
#   scripts/release.sh [VERSION]     # default: git describe --tags --always --dirty
#   DIST=/tmp/out scripts/release.sh # into another folder than dist/ (emptied first)
#
# Needs Go, a C compiler for this machine and Debian's cross compiler for
# the other architecture (gcc-aarch64-linux-gnu and libc6-dev-arm64-cross on
# amd64; scripts/test.sh installs them), and Node.js with npm for mcpb
# (npm ci in packaging/mcpb, which scripts/test.sh runs and this script
# runs when it has not been). It needs no root and no network beyond the
# Go module proxy and npm's registry. The Go binaries are static (CGO_ENABLED=0) and
# built with -trimpath; the files' times are the commit's (SOURCE_DATE_EPOCH),
# so that two runs on one commit give the same tarballs and packages.
# docs/install.md says how to install what it makes.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"

die() { echo "release.sh: $*" >&2; exit 1; }
step() { printf '\n==> %s\n' "$*" >&2; }

command -v go >/dev/null || die "Go 1.26 is needed (https://go.dev/doc/install)"
version="${1:-$(git describe --tags --always --dirty)}"
[[ -n "$version" && "$version" != -* && "$version" =~ ^[A-Za-z0-9.+~_-]+$ ]] ||
  die "version \"$version\": want letters, digits and . + ~ _ - only"
commit="$(git rev-parse HEAD)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}"
date="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
# dpkg and rpm want a version that starts with a digit and has no "-" (the
# revision's separator): v1.2.3 -> 1.2.3, v1.2.3-4-gabc -> 1.2.3+4+gabc,
# a bare commit abc123 -> 0~abc123 (before any tagged release).
pkg_version="${version#v}"
pkg_version="${pkg_version//-/+}"
[[ "$pkg_version" =~ ^[0-9] ]] || pkg_version="0~$pkg_version"

# The C helper's compiler for each architecture: the host's own cc for its
# architecture, Debian's cross gcc for the other.
host_arch="$(go env GOHOSTARCH)"
c_compiler() {
  local arch=$1
  if [[ "$arch" == "$host_arch" ]]; then
    echo "${CC:-cc}"
    return
  fi
  case $arch in
    amd64) echo x86_64-linux-gnu-gcc ;;
    arm64) echo aarch64-linux-gnu-gcc ;;
    *) die "no cross compiler known for $arch" ;;
  esac
}
arches=(amd64 arm64)
for arch in "${arches[@]}"; do
  cc="$(c_compiler "$arch")"
  command -v "$cc" >/dev/null || die "$cc is missing (scratchrun-spawn for $arch): apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross (for arm64) or gcc-x86-64-linux-gnu libc6-dev-amd64-cross (for amd64); scripts/test.sh installs them"
done

dist="${DIST:-$repo/dist}" # DIST: another folder (the tests use their own)
rm -rf "$dist"
mkdir -p "$dist/build"
ldflags="-X github.com/scratchrun/scratchrun/internal/buildinfo.version=$version -X github.com/scratchrun/scratchrun/internal/buildinfo.commit=$commit -X github.com/scratchrun/scratchrun/internal/buildinfo.date=$date"

# cyclonedx-gomod reads the main module's version with go-git, which cannot
# open a linked worktree (git worktree add): there, it reads a one-commit
# copy of this commit with the worktree's files copied over it.
sbom_src="$repo"
if [[ "$(git rev-parse --git-dir)" != "$(git rev-parse --git-common-dir)" ]]; then
  sbom_src="$dist/build/sbom-src"
  git init -q "$sbom_src"
  git -C "$sbom_src" fetch -q --depth 1 --upload-pack "git -c uploadpack.allowAnySHA1InWant=true upload-pack" \
    "file://$(cd "$(git rev-parse --git-common-dir)" && pwd)" "$commit"
  git -C "$sbom_src" checkout -q --detach FETCH_HEAD
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$sbom_src" 2>/dev/null || true
fi

# Built for this machine once: GOARCH below is the SBOM's target, and `go
# tool` would build the tool itself for that architecture.
cyclonedx="$dist/build/cyclonedx-gomod"
go build -o "$cyclonedx" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

for arch in "${arches[@]}"; do
  build="$dist/build/linux_$arch"
  mkdir -p "$build"
  step "$version linux/$arch: scratchrun and scratchrun-init (Go), scratchrun-spawn (C, $(c_compiler "$arch"))"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$build/" ./cmd/scratchrun ./cmd/scratchrun-init
  CC="$(c_compiler "$arch")" internal/sandbox/namespaces/spawner/c/build.sh "$build/scratchrun-spawn"

  # Completions come from the built scratchrun itself, so they match its
  # flags; the host's architecture's build can run here.
  if [[ "$arch" == "$host_arch" ]]; then
    completions=()
    if "$build/scratchrun" completion bash >/dev/null 2>&1; then
      mkdir -p "$build/completions"
      for shell in bash zsh fish; do
        "$build/scratchrun" completion "$shell" >"$build/completions/$shell"
      done
    else
      echo "release.sh: warning: this scratchrun has no completion command: the packages carry no shell completions" >&2
    fi
  fi

  step "$version linux/$arch: tarball"
  name="scratchrun_${version}_linux_$arch"
  staging="$dist/build/$name"
  mkdir -p "$staging"
  cp "$build/scratchrun" "$build/scratchrun-init" "$build/scratchrun-spawn" "$staging/"
  tar -C "$dist/build" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"

  step "$version linux/$arch: SBOM (CycloneDX)"
  (cd "$sbom_src" && GOOS=linux GOARCH=$arch CGO_ENABLED=0 "$cyclonedx" app -json -std -noserial -notimestamp \
    -main cmd/scratchrun -output "$dist/$name.cdx.json" .)
done

# The completions of the host's build go into both architectures' packages
# (they are text, the same for both).
host_completions="$dist/build/linux_$host_arch/completions"
for arch in "${arches[@]}"; do
  build="$dist/build/linux_$arch"
  config="$dist/build/nfpm-$arch.yaml"
  # nfpm expands variables in some fields only (not mtime): the script
  # fills them all in itself.
  sed -e "s|\${ARCH}|$arch|g" -e "s|\${PKG_VERSION}|$pkg_version|g" -e "s|\${BUILD}|$build|g" -e "s|\${MTIME}|$date|g" \
    packaging/nfpm.yaml >"$config"
  if [[ -d "$host_completions" ]]; then
    cat >>"$config" <<EOF
  - src: $host_completions/bash
    dst: /usr/share/bash-completion/completions/scratchrun
    file_info: {mode: 0644}
  - src: $host_completions/zsh
    dst: /usr/share/zsh/vendor-completions/_scratchrun
    file_info: {mode: 0644}
  - src: $host_completions/fish
    dst: /usr/share/fish/vendor_completions.d/scratchrun.fish
    file_info: {mode: 0644}
EOF
  fi
  for packager in deb rpm; do
    step "$version linux/$arch: .$packager (nfpm)"
    go tool nfpm package --config "$config" --packager "$packager" --target "$dist/"
  done
done

# Desktop clients: scratchrun alone (there it is the client, `scratchrun
# mcp` forwarding to a server; the engine and its helpers are Linux's), in
# a tarball of the same shape (Windows 10 and later have tar).
for platform in darwin/amd64 darwin/arm64 windows/amd64; do
  goos=${platform%/*} goarch=${platform#*/}
  name="scratchrun_${version}_${goos}_$goarch"
  step "$version $platform: scratchrun (the client), tarball"
  mkdir -p "$dist/build/$name"
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -ldflags "$ldflags" -o "$dist/build/$name/" ./cmd/scratchrun
  tar -C "$dist/build" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"
done

# The Claude Desktop extension (MCPB, packaging/mcpb/): the clients above
# and linux/amd64's scratchrun under server/, the manifest with this
# version, packed by mcpb (packaging/mcpb/package.json pins it). The
# manifest chooses a command by OS only, so macOS gets one universal
# binary of both architectures (internal/tools/machofat) and Linux amd64's.
step "$version: the Claude Desktop extension (mcpb pack)"
mcpb="$repo/packaging/mcpb/node_modules/.bin/mcpb"
if [[ ! -x "$mcpb" ]]; then
  command -v npm >/dev/null || die "npm is needed for mcpb (the Claude Desktop extension): apt-get install nodejs npm"
  (cd packaging/mcpb && npm ci --no-audit --no-fund) >&2
fi
bundle="$dist/build/mcpb"
mkdir -p "$bundle/server"
sed -e "s|\${VERSION}|${version#v}|g" packaging/mcpb/manifest.json >"$bundle/manifest.json"
cp packaging/mcpb/icon.png "$bundle/"
cp "$dist/build/linux_amd64/scratchrun" "$bundle/server/scratchrun-linux-amd64"
go run ./internal/tools/machofat -o "$bundle/server/scratchrun-darwin" \
  "$dist/build/scratchrun_${version}_darwin_amd64/scratchrun" "$dist/build/scratchrun_${version}_darwin_arm64/scratchrun"
cp "$dist/build/scratchrun_${version}_windows_amd64/scratchrun.exe" "$bundle/server/scratchrun-windows-amd64.exe"
# mcpb stamps every entry with the moment it packs; zipstamp gives them
# the commit's time instead, so that two runs make the same bundle too.
"$mcpb" pack "$bundle" "$dist/scratchrun-mcp-$version.mcpb" >&2
go run ./internal/tools/zipstamp -time "$SOURCE_DATE_EPOCH" "$dist/scratchrun-mcp-$version.mcpb"

step "$version: server.json (the MCP Registry's entry)"
packaging/server-json.sh "$version" "$dist/scratchrun-mcp-$version.mcpb" >"$dist/server.json"

step "SHA256SUMS"
(cd "$dist" && sha256sum -- *.tar.gz *.deb *.rpm *.cdx.json *.mcpb server.json >SHA256SUMS)
rm -rf "$dist/build"
cat "$dist/SHA256SUMS" >&2
