#!/usr/bin/env bash
# Builds ScratchRun's container image, linux/amd64, without a container
# daemon, as an OCI archive that `podman load -i` (or `skopeo copy
# oci-archive:FILE docker://REGISTRY/...`) reads:
#
#   scripts/container-image.sh [VERSION] [OUT]
#
# VERSION defaults to `git describe --tags --always --dirty`; OUT to
# dist/scratchrun-VERSION-linux-amd64.oci.tar. The image is named
# localhost/scratchrun:VERSION in the archive (characters a tag cannot hold
# become "-"). It prints OUT's path on its last line.
#
# The image is Debian 12 minbase (mmdebstrap) with what the engine runs at
# run time and nothing else: ca-certificates (images pulled from a
# registry over TLS) and mmdebstrap with mount (`scratchrun images build`,
# which the Kubernetes DaemonSet's init container runs); the engine's
# nftables and network setup go through netlink, no nft or ip binary. Then
# scratchrun, scratchrun-init and scratchrun-spawn in /usr/local/bin, built
# as scripts/install.sh builds them, with the version stamped in; the
# entrypoint is scratchrun, `serve` by default (`worker ...` by argument).
# internal/tools/containerimage assembles it with go-containerregistry.
# Not in it: runsc and QEMU (the gvisor and microvm levels): the image runs
# the namespaces level. Needs Go, gcc, mmdebstrap and the Debian mirror
# (scripts/install.sh installs the first three); run as root (mmdebstrap's
# root mode) or as a user mmdebstrap's unshare mode works for.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"
step() { printf '\n==> %s\n' "$*" >&2; }

if [[ "$(uname -m)" != x86_64 ]]; then
  echo "container-image.sh: builds linux/amd64 on an amd64 host (the C helper is built with the host's gcc)" >&2
  exit 1
fi
for tool in go gcc mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "container-image.sh: $tool is needed (scripts/install.sh installs it)" >&2; exit 1; }
done

version="${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# One time for the binaries' date, the label and every file: the commit's,
# unless SOURCE_DATE_EPOCH says otherwise (mmdebstrap honours it too).
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
date="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
tag="$(printf '%s' "$version" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-128)"
[[ "$tag" =~ ^[A-Za-z0-9_] ]] || tag="v$tag"
out="${2:-dist/scratchrun-$tag-linux-amd64.oci.tar}"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

work="$(mktemp -d "${TMPDIR:-/tmp}/scratchrun-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"

step "building scratchrun and scratchrun-init $version ($commit) for linux/amd64"
bi=github.com/scratchrun/scratchrun/internal/buildinfo
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath \
  -ldflags "-X $bi.version=$version -X $bi.commit=$commit -X $bi.date=$date" \
  -o "$work/bin/" ./cmd/scratchrun ./cmd/scratchrun-init
step "building scratchrun-spawn (internal/sandbox/namespaces/spawner/c/build.sh)"
internal/sandbox/namespaces/spawner/c/build.sh "$work/bin/scratchrun-spawn"

# The same apt and dpkg options as the runtime images (internal/images/
# recipe.go): no recommends, no manuals or translations. No device nodes
# (the container runtime makes /dev), and none of the build host's
# identity or resolver (the runtime gives its own), nor logs of the build;
# mmdebstrap itself drops apt's lists and caches.
step "building the base with mmdebstrap: Debian bookworm minbase, ca-certificates, mmdebstrap, mount"
mmdebstrap --variant=minbase --include=ca-certificates,mmdebstrap,mount \
  --aptopt='APT::Install-Recommends "false"' --aptopt='APT::Install-Suggests "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='rm -f "$1/etc/hostname" "$1/etc/resolv.conf" && : > "$1/etc/resolv.conf" && echo scratchrun > "$1/etc/hostname"' \
  --customize-hook='rm -f "$1"/var/log/*.log "$1"/var/log/apt/*' \
  --skip=output/dev \
  -- bookworm "$work/base.tar"

step "assembling the image into $out (internal/tools/containerimage)"
go run ./internal/tools/containerimage -base "$work/base.tar" -bin "$work/bin" -out "$out" \
  -ref "localhost/scratchrun:$tag" -version "$version" -revision "$commit" \
  -source https://github.com/scratchrun/scratchrun -created "$date"
printf '%s  %s\n' "$(sha256sum "$out" | cut -d' ' -f1)" "$(basename "$out")" >&2
echo "$out"
