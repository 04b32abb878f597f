#!/usr/bin/env bash
# Runs each Go fuzz target of the trust boundaries for a short budget, one
# after another: the hostile-tar extractor, init's message decoder, cluster
# frames and registrations, the strict request decoder and output capture.
# Their seed corpora (testdata/fuzz/<target>/) also run as ordinary tests
# under `go test`, so the fast tier covers them; this adds new inputs.
#
#   scripts/fuzz.sh                  # every target, 5000 inputs each
#   FUZZTIME=200000x scripts/fuzz.sh # longer (or a duration, e.g. 2m: see below)
#   scripts/fuzz.sh FuzzFrame        # some targets only
#
# A failing input is written to the package's testdata/fuzz/<target>/ by
# `go test`: fix the cause and commit the input as the test that shows it.
# Root is not needed (the extractor shifts ownership only as root).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$PATH:/usr/local/go/bin"
cd "$repo"

# A budget of inputs, not of time: with a duration, Go 1.26's fuzz
# coordinator can report its own deadline as a failure ("context deadline
# exceeded", no crasher: go.dev/issue/75804, fixed in Go 1.27), which CI
# here hit once. 5000 inputs are about 10 s of the slowest target (the tar
# extractor) and a second or less of the decoders.
fuzztime="${FUZZTIME:-5000x}"
# Minimising each new input for the default 60s would eat a short budget
# (an extraction takes milliseconds): a few tries keep the cache small.
minimize="${FUZZMINIMIZETIME:-20x}"
# The machine is shared: one worker unless told otherwise.
parallel="${FUZZPARALLEL:-1}"

targets=(
  "FuzzExtract ./internal/images/layertar"
  "FuzzExtractStream ./internal/images/layertar"
  "FuzzReadMessage ./internal/sandbox/initproto"
  "FuzzFrame ./internal/cluster"
  "FuzzDecodeRegistration ./internal/cluster"
  "FuzzDecodeRequest ./internal/execapi"
  "FuzzValidatePath ./internal/execapi"
  "FuzzCappedOutput ./internal/engine"
)

want=("$@")
for t in "${targets[@]}"; do
  read -r name pkg <<<"$t"
  if ((${#want[@]})) && [[ " ${want[*]} " != *" $name "* ]]; then
    continue
  fi
  echo "== $name ($pkg, $fuzztime)"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" \
    -parallel "$parallel" "$pkg"
done
