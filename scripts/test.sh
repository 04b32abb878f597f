#!/usr/bin/env bash
# Runs the whole test suite on a real host: installs what the tests need (the
# same steps as install.sh, without the example), runs the fast tier (the
# tests of logic under -race, as an ordinary user), checks formatting and
# vet, then runs every Go test (the full tier). Needs root: tests create
# namespaces, cgroups and mounts, and switch to another user.
#
#   sudo scripts/test.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"

scripts/install.sh --no-example

# The completion tests (cmd/scratchrun/completion_test.go) drive bash, zsh
# and fish for real; they skip a shell that is missing, so CI has all three.
shells=()
for p in zsh fish; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || shells+=("$p")
done
if ((${#shells[@]})); then
  printf '\n==> installing %s (shell completion tests)\n' "${shells[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${shells[@]}"
fi

# The fast tier first: the tests of logic under the race detector, as an
# ordinary user with no images, no PostgreSQL and no root (-short skips the
# rest, saying why), in a few minutes; a failure stops the run before the
# 45-minute full tier. See docs/design.md, "Test tiers".
printf '\n==> fast tier: go test -short -race ./... as an ordinary user (scripts/fast-tier.sh)\n' >&2
scripts/fast-tier.sh

# The release's tests (packaging/) build scratchrun-spawn for arm64 with
# Debian's cross compiler and check the units with systemd-analyze.
release_packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross systemd)
missing=()
for p in "${release_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  printf '\n==> installing %s (the release tests: scripts/release.sh)\n' "${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The MCP tests drive scratchrun with real clients from npm (test/mcp-node);
# the release packs the Claude Desktop extension with mcpb, and its tests
# run mcpb and mcp-remote (packaging/mcpb); the OpenAPI document is linted
# with @redocly/cli (test/openapi).
printf '\n==> npm ci in test/mcp-node, packaging/mcpb and test/openapi (MCP client tests, the extension bundle, the OpenAPI lint)\n' >&2
command -v node >/dev/null && command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
(cd test/mcp-node && npm ci --no-audit --no-fund)
(cd packaging/mcpb && npm ci --no-audit --no-fund)
(cd test/openapi && npm ci --no-audit --no-fund)
# The TypeScript client (clients/typescript): typescript, openapi-typescript
# and @types/node, pinned by its lock file; its tests run after the Go tiers.
(cd clients/typescript && npm ci --no-audit --no-fund)

# The web console's browser tests drive Debian's chromium, headless
# (cmd/scratchrun/console_browser_test.go); their screenshots go to
# test-artifacts/console/ (SCRATCHRUN_TEST_ARTIFACTS elsewhere).
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  printf '\n==> installing chromium (browser tests of the web console)\n' >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
fi

# The container image's test (deploy/container_test.go) runs it under
# Debian's podman, with storage of its own (nothing of it persists).
if ! dpkg-query -W -f='${Status}' podman 2>/dev/null | grep -q "install ok installed"; then
  printf '\n==> installing podman (the container image test)\n' >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman
fi

# The OAuth tests run Ory Hydra as the external authorization server
# (internal/testenv/hydra): built once from test/tools/hydra and cached.
export SCRATCHRUN_HYDRA="$(scripts/hydra.sh)"

printf '\n==> gofmt and go vet\n' >&2
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed on:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet -tags hostile ./...

# No code that nothing reaches (test helpers included), and go.mod and
# go.sum exactly what the code needs: deadcode is pinned as a tool in go.mod.
printf '\n==> deadcode -test and go mod tidy -diff\n' >&2
dead="$(go tool deadcode -test -tags hostile ./...)"
if [[ -n "$dead" ]]; then
  echo "unreachable code:" >&2
  echo "$dead" >&2
  exit 1
fi
go mod tidy -diff

# The fuzz targets of the trust boundaries (tar extractor, init's messages,
# cluster frames, the strict request decoder), a short budget each; their
# seed corpora already ran in the fast tier.
printf '\n==> fuzz: each target for %s (scripts/fuzz.sh)\n' "${FUZZTIME:-5000 inputs}" >&2
scripts/fuzz.sh

# The container image the full tier runs under podman, built as a release
# builds it (scripts/container-image.sh), into a directory removed at exit.
image_dir="$(mktemp -d)"
trap 'rm -rf "$image_dir"' EXIT
printf '\n==> container image: scripts/container-image.sh test\n' >&2
export SCRATCHRUN_CONTAINER_IMAGE="$image_dir/scratchrun-test.oci.tar"
scripts/container-image.sh test "$SCRATCHRUN_CONTAINER_IMAGE" >/dev/null

# The Python client (clients/python) against a real scratchrun serve, with
# Debian's pytest, and its types with Debian's mypy --strict. Debian's
# python3 (/usr/bin/python3) by name: those packages are its, and a python3
# earlier on PATH (pyenv, a venv) has neither. The server is the binary
# install.sh built from this checkout.
python_packages=(python3-pytest python3-mypy python3-venv)
missing=()
for p in "${python_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  printf '\n==> installing %s (the Python client tests)\n' "${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
printf '\n==> Python client: mypy --strict and pytest (clients/python)\n' >&2
/usr/bin/python3 -m mypy --strict --cache-dir=/dev/null clients/python/src/scratchrun clients/python/_build/backend.py
PYTHONDONTWRITEBYTECODE=1 SCRATCHRUN_BIN=/usr/local/bin/scratchrun /usr/bin/python3 -m pytest -p no:cacheprovider -ra clients/python/tests

# -tags hostile adds the hostile-input suite. -p 1: one package's sandboxes at
# a time, so that tests with timeouts are not starved on a 2-core machine.
printf '\n==> full tier: go test as root (with the hostile-input suite)\n' >&2
go test -p 1 -count=1 -tags hostile -timeout 45m ./...

# The TypeScript client against a real `scratchrun serve` (the binary
# install.sh built from this tree): tsc builds it, type-checks it for
# browsers and its tests, then node's test runner prints its summary.
printf '\n==> TypeScript client: npm test in clients/typescript (tsc, node --test)\n' >&2
(cd clients/typescript && SCRATCHRUN_BIN=/usr/local/bin/scratchrun npm test)
