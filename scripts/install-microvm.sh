#!/usr/bin/env bash
# Installs what --isolation microvm needs: QEMU and erofs-utils from Debian,
# and the guest kernel, Debian's cloud kernel package unpacked (never
# installed: the host's boot is not touched) into
# /var/cache/scratchrun/microvm/kernel/PACKAGE_VERSION, with `current`
# pointing at it. Cached by package version: a second run takes a second.
# Prints progress on stderr.
#
#   scripts/install-microvm.sh
set -euo pipefail
cache=/var/cache/scratchrun/microvm
step() { printf '\n==> %s\n' "$*" >&2; }

packages=(qemu-system-x86 erofs-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  step "installing Debian packages for microVM sandboxes: ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  step "Debian packages already installed: ${packages[*]}"
fi

if [[ -e "$cache/kernel/current/boot" ]]; then
  step "guest kernel cached: $(readlink "$cache/kernel/current")"
  exit 0
fi
# The metapackage names the current cloud kernel package.
pkg="$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')"
if [[ -z "$pkg" ]]; then
  apt-get update
  pkg="$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')"
fi
version="$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
dir="$cache/kernel/${pkg}_${version}"
step "unpacking the guest kernel $pkg $version into $dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
id _apt >/dev/null 2>&1 && chown _apt "$tmp"
(cd "$tmp" && apt-get download "$pkg=$version" >&2)
mkdir -p "$cache/kernel"
rm -rf "$dir.tmp"
dpkg-deb -x "$tmp"/*.deb "$dir.tmp"
chmod -R a+rX "$dir.tmp"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
ln -sfn "$(basename "$dir")" "$cache/kernel/current"
step "guest kernel: $(ls "$dir"/boot/vmlinuz-*)"
