#!/usr/bin/env bash
# Prints packaging/server.json, ScratchRun's entry for the MCP Registry,
# for one release: the release's version (without a leading "v", as the
# registry's semantic versions want it), the Claude Desktop extension's
# URL among the release's assets (the tag is VERSION as given) with the
# sha256 of BUNDLE, the .mcpb built for it, and the container image's
# tag, which scripts/container-image.sh derives from the same version.
#
#   packaging/server-json.sh VERSION BUNDLE >dist/server.json
#
# scripts/release.sh runs it; packaging/serverjson_test.go validates its
# output against the registry's own schema.
set -euo pipefail
version="${1:?usage: server-json.sh VERSION BUNDLE}"
bundle="${2:?usage: server-json.sh VERSION BUNDLE}"
sha="$(sha256sum <"$bundle")"
sha="${sha%% *}"
# The tag as scripts/container-image.sh makes it from VERSION.
tag="$(printf '%s' "$version" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-128)"
[[ "$tag" =~ ^[A-Za-z0-9_] ]] || tag="v$tag"
sed -e "s|\${VERSION}|${version#v}|g" -e "s|\${RELEASE}|$version|g" -e "s|\${MCPB_SHA256}|$sha|g" -e "s|\${IMAGE_TAG}|$tag|g" \
  "$(dirname "${BASH_SOURCE[0]}")/server.json"
