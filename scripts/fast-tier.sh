#!/usr/bin/env bash
# The fast test tier: `go test -short -race ./...` run by an ordinary user,
# with no runtime images, no PostgreSQL and no root. It runs the tests of
# logic (the engine on a fake backend, the front ends on scripted services,
# admission, the request API, the cluster over in-process NATS, the key
# store on SQLite) under the race detector in a few minutes; every test that
# needs root, images or a service skips under -short and says why. The full
# tier (scripts/test.sh's last step, as root, -tags hostile) runs them all.
# See docs/design.md, "Test tiers".
#
#   sudo scripts/fast-tier.sh      # as the scratchrun-test user (made if missing)
#   scripts/fast-tier.sh           # as yourself, when you are not root
#
# Needs Go and gcc (the race detector is cgo's); scripts/install.sh installs gcc.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$PATH:/usr/local/go/bin"
# -timeout bounds one package's test binary (a hang), not the tier: the
# tier takes ~2 min with a warm cache; on a fresh machine the race build and
# cmd/scratchrun's cross-builds of the client (darwin, windows) take longer.
tier=(go test -short -race -count=1 -timeout 10m "$@" ./...)

if [[ "$(id -u)" != 0 ]]; then
  cd "$repo"
  CGO_ENABLED=1 exec "${tier[@]}"
fi

# As root, the tier runs as an ordinary system user of its own, with its own
# Go build and module caches in its home (root's are not readable by it, and
# kept between runs so that a second run builds little).
user=scratchrun-test
home=/var/lib/scratchrun-fasttier
if ! id -u "$user" >/dev/null 2>&1; then
  useradd --system --create-home --home-dir "$home" --shell /usr/sbin/nologin "$user"
fi
install -d -o "$user" -g "$(id -gn "$user")" -m 0755 "$home"

# A copy of the tree the user owns: a checkout under a root-owned directory
# may not be readable by it, and tests write next to their package. The
# copy holds what git would commit (tracked and untracked files, not
# ignored ones), or the whole tree outside a git checkout.
copy="$(mktemp -d /tmp/scratchrun-fasttier.XXXXXX)"
trap 'rm -rf "$copy"' EXIT
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -C "$repo" ls-files -z --cached --others --exclude-standard |
    (cd "$repo" && tar --null --no-recursion --ignore-failed-read -T - -cf -) | tar -x -C "$copy"
else
  cp -a "$repo/." "$copy/"
fi
chown -R "$user:" "$copy"

as_user=(runuser -u "$user" -- env HOME="$home" PATH="$PATH" CGO_ENABLED=1
  GOCACHE="$home/go-build" GOMODCACHE="$home/go/pkg/mod" GOFLAGS="-modcacherw -buildvcs=false")
cd "$copy"
"${as_user[@]}" go mod download
"${as_user[@]}" "${tier[@]}"
