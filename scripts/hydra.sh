#!/usr/bin/env bash
# Builds Ory Hydra, the external authorization server of the OAuth tests
# (internal/testenv/hydra), from the tools module test/tools/hydra, so that
# none of its dependencies enter ScratchRun's go.mod. The binary is cached
# in /var/cache/scratchrun/hydra/<version>-<hash of its go.sum>: the first
# build is long (a large dependency tree, with cgo for SQLite); a second run
# is instant. Prints progress on stderr and the binary's path on stdout, for
#
#   export SCRATCHRUN_HYDRA="$(scripts/hydra.sh)"
#
# CGO and the tags sqlite,sqlite_omit_load_extension: the tests run Hydra
# with DSN=memory, which only a Hydra built with SQLite handles.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$repo/test/tools/hydra"
export PATH="$PATH:/usr/local/go/bin"
version="$(cd "$mod" && go list -m -f '{{.Version}}' github.com/ory/hydra/v2)"
sum="$(sha256sum "$mod/go.sum" | cut -c1-12)"
dir="/var/cache/scratchrun/hydra/$version-$sum"
if [[ ! -x "$dir/hydra" ]]; then
  echo "==> building Ory Hydra $version from the Go module proxy into $dir (long the first time)" >&2
  mkdir -p "$dir"
  (cd "$mod" && CGO_ENABLED=1 go build -trimpath -tags sqlite,sqlite_omit_load_extension \
    -o "$dir/hydra.tmp" github.com/ory/hydra/v2)
  mv "$dir/hydra.tmp" "$dir/hydra"
  echo "==> built $dir/hydra" >&2
fi
echo "$dir/hydra"
