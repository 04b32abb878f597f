#!/usr/bin/env bash
# Installs everything ScratchRun needs on a Debian 12 host (apt packages, the
# scratchrun binary, the runtime images), then runs the chart example, which
# writes chart.png into the current directory.
#
#   sudo scripts/install.sh               # everything, then the example
#   sudo scripts/install.sh --no-example  # everything but the example (CI)
#
# Safe to run again: packages already present are skipped and images are cached
# by recipe hash in /var/lib/scratchrun/images, so a second run takes seconds.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run_example=1
[[ "${1:-}" == "--no-example" ]] && run_example=0

step() { printf '\n==> %s\n' "$*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
  echo "install.sh: run as root (sudo): it installs packages and builds images" >&2
  exit 1
fi
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "install.sh: Go 1.26 is needed (https://go.dev/doc/install)" >&2; exit 1; }

# gcc and libc6-dev build scratchrun-spawn, the small C helper that starts
# sandboxes and carries their init (internal/sandbox/namespaces/spawner/c).
# postgresql is for the tests only: they start throwaway servers of their own
# (internal/testenv/postgres) to test the key store shared by front ends;
# scratchrun itself never needs it unless --db names a postgres:// URL.
packages=(mmdebstrap ca-certificates nftables iproute2 curl gcc libc6-dev postgresql)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  step "installing Debian packages: ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  if [[ " ${missing[*]} " == *" postgresql "* ]] && [[ -d /run/systemd/system ]]; then
    # The package starts a cluster of its own, which nothing here uses: a
    # database listening that nobody asked for is not left running.
    systemctl disable --now postgresql >/dev/null 2>&1 || true
  fi
else
  step "Debian packages already installed: ${packages[*]}"
fi

# The version, commit and date go in by the release's flags (package
# internal/buildinfo; the names are fixed). Outside a checkout the build
# says what the toolchain stamps, else "dev".
ldflags="" version=""
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  bi=github.com/scratchrun/scratchrun/internal/buildinfo
  version="$(git -C "$repo" describe --tags --always --dirty)"
  commit="$(git -C "$repo" rev-parse HEAD)"
  ldflags="-X $bi.version=$version -X $bi.commit=$commit -X $bi.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi
step "building scratchrun${version:+ $version}, scratchrun-init and scratchrun-spawn into /usr/local/bin"
(cd "$repo" && go build -trimpath -ldflags "$ldflags" -o /usr/local/bin/ ./cmd/scratchrun ./cmd/scratchrun-init)
# The engine's fallback build (spawner.Build) uses the same recipe.
"$repo"/internal/sandbox/namespaces/spawner/c/build.sh /usr/local/bin/scratchrun-spawn
scratchrun version

# Debian's packages come from the mirror; the trixie image also takes npm from
# registry.npmjs.org, checked against the SHA-512 its recipe pins.
step "building runtime images (cached by recipe hash; the first build takes a few minutes)"
scratchrun images build
scratchrun images list
"$repo/scripts/install-runsc.sh" # gVisor's runsc for --isolation gvisor: pinned, built once, cached by version
"$repo/scripts/install-microvm.sh" # QEMU, erofs-utils and the guest kernel for --isolation microvm, cached by package version

if ((run_example)); then
  step "running the chart example: scratchrun exec --runtime python3.13 examples/chart.py --return /tmp/chart.png"
  scratchrun exec --runtime python3.13 "$repo/examples/chart.py" --return /tmp/chart.png
  step "done: chart.png is in $(pwd)"
fi
