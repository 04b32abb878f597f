#!/usr/bin/env bash
# Compares ScratchRun with bubblewrap and gVisor's runsc on the same workloads,
# the same interpreter and the same image, on this machine, in one sitting, and
# writes the table into BENCHMARKS.md. Run as root after scripts/install.sh:
#
#   sudo bench/compare.sh [N]
#
# runsc is built from the Go module proxy by scripts/install-runsc.sh (pinned,
# cached in /var/cache/scratchrun/runsc). Egress workloads run inside a network
# namespace of their own, so the host's tables and sysctls stay untouched.
#
#   sudo bench/compare.sh --microvm [N]   # only the microvm section (BENCHMARKS.md's end)
#
# The microvm column is measured with the accelerator the host gives it: on this
# project's machines that is software emulation (TCG), and the table says so.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
microvm_only=0
[[ "${1:-}" == "--microvm" ]] && { microvm_only=1; shift; }
n="${1:-30}"
interval="${INTERVAL:-2s}"
export PATH="$PATH:/usr/local/go/bin"
for tool in jq bwrap; do command -v "$tool" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${tool/bwrap/bubblewrap}" >&2; done
runsc="$("$repo/scripts/install-runsc.sh" --print-path)"
rootfs_of() { scratchrun images list | awk -v img="$1" '$1 == img {print $2}' | xargs -I{} echo "/var/lib/scratchrun/images/$1-{}/rootfs"; }
trixie="$(rootfs_of trixie)"
((microvm_only)) || [[ -d "$trixie" ]] || { echo "compare.sh: trixie image not found; run scripts/install.sh" >&2; exit 1; }

chart_py='import sys
import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 4 * np.pi, 400)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(x, np.sin(x)); ax.plot(x, np.sin(x) * np.exp(-x / 6))
fig.tight_layout(); fig.savefig(sys.stdout.buffer, format="png", dpi=100)'

# cmd_for WORKLOAD sets cmd to the workload's command line inside the image.
cmd_for() {
  case "$1" in
    python-print) cmd=(/usr/bin/python3.13 -c 'print(1)') ;;
    bash-echo) cmd=(/bin/bash -c 'echo hi') ;;
    node-print) cmd=(/usr/bin/node -e 'console.log(1)') ;;
    chart) cmd=(/usr/bin/python3.13 -c "$chart_py") ;;
  esac
}

# median_ms CMD...: runs CMD n times, prints the median wall time in ms.
median_ms() {
  local times=()
  for ((i = 0; i < n; i++)); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
    t1=$(date +%s%N)
    times+=($(((t1 - t0) / 1000)))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

bwrap_run() {
  bwrap --unshare-all --die-with-parent --ro-bind "$trixie" / --tmpfs /tmp --proc /proc --dev /dev \
    --setenv HOME /root --setenv MPLBACKEND Agg "$@"
}

bundle="$(mktemp -d /tmp/scratchrun-runsc-bundle.XXXXXX)"
trap 'umount /run/scratchrun-runsc/null-netns 2>/dev/null; rm -rf "$bundle" /run/scratchrun-runsc' EXIT
runsc_run() {
  python3 - "$bundle/config.json" "$trixie" "$@" <<'PY'
import json, sys
path, rootfs, args = sys.argv[1], sys.argv[2], sys.argv[3:]
json.dump({"ociVersion": "1.0.2", "root": {"path": rootfs, "readonly": True},
  "process": {"args": args, "cwd": "/tmp", "env": ["PATH=/usr/bin:/bin", "HOME=/root", "MPLBACKEND=Agg"], "user": {"uid": 0, "gid": 0}},
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}, {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}],
  "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")]}}, open(path, "w"))
PY
  "$runsc" --root /run/scratchrun-runsc --platform=systrap --network=none --ignore-cgroups run --bundle "$bundle" "bench-$$-$RANDOM"
}
mkdir -p /run/scratchrun-runsc

# microvm_section prints the microvm section: python-print booting every guest,
# restoring a saved one, and warm (calls 8 s apart, the pool refilling), and
# the memory of idle warm VMs (their QEMU cgroups: guest RAM touched and QEMU).
microvm_section() {
  local nvm=$(((n + 3) / 4)) accel cold restore warm idle
  vm() { SCRATCHRUN_ISOLATION=microvm scratchrun bench "$@" --json 2>>/tmp/compare-microvm.err; }
  : >/tmp/compare-microvm.err
  cold="$(SCRATCHRUN_MICROVM_SNAPSHOTS=0 vm --workload python-print --n "$nvm" --warmup 1 --pool=false)"
  restore="$(vm --workload python-print --n "$nvm" --warmup 1 --pool=false)"
  warm="$(vm --workload python-print --n "$nvm" --warmup 1 --interval 8s)"
  idle="$(vm --idle-memory)"
  accel="KVM"
  grep -q "software emulation" /tmp/compare-microvm.err && accel="TCG (software emulation: no usable KVM here)"
  echo "## microvm: a virtual machine per call, $accel"
  echo
  echo "python-print, p50 ms per call over $nvm calls, concurrency 1, against bare in the same run. *Boot*: every call boots a guest (SCRATCHRUN_MICROVM_SNAPSHOTS=0, no pool). *Restore*: every call restores the saved booted guest (no pool). *Warm*: calls 8 s apart, each finding a VM the pool booted. Under TCG every guest instruction is translated: the figures say what this host can do for testing, not what the level costs with KVM (not measured here)."
  echo
  echo "| $accel | boot | restore | warm | bare |"
  echo "|---|---|---|---|---|"
  echo "| python-print | $(jq -r .sandbox.p50_ms <<<"$cold") | $(jq -r .sandbox.p50_ms <<<"$restore") | $(jq -r .sandbox.p50_ms <<<"$warm") | $(jq -r .bare.p50_ms <<<"$warm") |"
  echo
  echo "Idle warm VM, memory of its QEMU cgroup (the guest RAM it touched, QEMU and the translation cache), MiB:"
  echo
  echo "| warm VM | MiB |"
  echo "|---|---|"
  jq -r '.pooled_mib | to_entries | sort_by(.key)[] | "| \(.key) | \(.value * 10 | round / 10) |"' <<<"$idle"
}

if ((microvm_only)); then
  section="$(microvm_section)"
  # Replace the section at the end of BENCHMARKS.md, or add it.
  awk '/^## microvm:/ {exit} {print}' "$repo/BENCHMARKS.md" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$repo/BENCHMARKS.md.new"
  printf '\n%s\n' "$section" >>"$repo/BENCHMARKS.md.new"
  mv "$repo/BENCHMARKS.md.new" "$repo/BENCHMARKS.md"
  cat "$repo/BENCHMARKS.md"
  exit 0
fi

rows=()
for w in python-print bash-echo node-print chart; do
  echo "==> $w" >&2
  # Warm latency: calls spaced as an agent's are, so the pool refills.
  ours="$(scratchrun bench --workload "$w" --n "$n" --interval "$interval" --json)"
  bare=$(jq -r .bare.p50_ms <<<"$ours"); mine=$(jq -r .sandbox.p50_ms <<<"$ours")
  # Back to back: every call consumes a sandbox faster than one is built.
  b2b="$(scratchrun bench --workload "$w" --n "$n" --json)"
  cmd_for "$w"
  bw=$(median_ms bwrap_run "${cmd[@]}")
  rs=$(median_ms runsc_run "${cmd[@]}")
  egress="$(unshare --net sh -c "ip link set lo up; SCRATCHRUN_DNS=192.0.2.53 scratchrun bench --workload $w --n $n --interval $interval --network egress --json" | jq -r .sandbox.p50_ms)"
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
  rows+=("| $w | $bare | $mine ($(ratio "$mine" "$bare")×) | $(jq -r .sandbox.p50_ms <<<"$b2b") ($(jq -r '.ratio_p50' <<<"$b2b" | xargs printf '%.2f')×) | $egress ($(ratio "$egress" "$bare")×) | $bw ($(ratio "$bw" "$bare")×) | $rs ($(ratio "$rs" "$bare")×) |")
done
tput="$(scratchrun bench --workload python-print --n "$((n * 5))" --concurrency 4 --json)"
tput_cold="$(scratchrun bench --workload python-print --n "$((n * 5))" --concurrency 4 --pool=false --json)"
idle="$(scratchrun bench --idle-memory --json)"
microvm="$(microvm_section)"
# Sections measured by other commands (the admission sweeps of `scratchrun
# bench --sweep`, say) are kept as they are; this script rewrites only its own.
kept="$(awk '/^## / { keep = !($0 ~ /^## (Throughput: python-print|Memory of an idle warm sandbox|microvm:)/) } keep' "$repo/BENCHMARKS.md" 2>/dev/null || true)"

{
  echo "# Benchmarks"
  echo
  echo "Measured by \`bench/compare.sh $n\` on $(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)."
  echo "p50 wall time per call in ms, concurrency 1, $n runs per cell; ratios are against the same interpreter from the same image run bare (chroot, no isolation), measured in the same run."
  echo "*ScratchRun, warm*: calls $interval apart, as an agent's are, so each finds a warm sandbox. *Back to back*: each call starts when the last ends, so most find the pool empty and build a sandbox on the spot. *Egress*: warm, with a network slot. bubblewrap and runsc start cold every time (they have no pool)."
  echo
  echo "| workload | bare | ScratchRun, warm | ScratchRun, back to back | ScratchRun, warm, egress | bubblewrap | gVisor runsc (systrap) |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Machine load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "## Throughput: python-print at concurrency 4, back to back, $((n * 5)) runs"
  echo
  echo "Machine CPU is all busy CPU time on the machine during the run (/proc/stat) divided by runs: it includes building and tearing down sandboxes and the kernel's deferred namespace cleanup."
  echo
  echo "| | runs/s | × of bare | machine CPU ms per run |"
  echo "|---|---|---|---|"
  for pair in "warm pool:$tput" "no pool:$tput_cold"; do
    label="${pair%%:*}"; j="${pair#*:}"
    echo "| ScratchRun, $label | $(jq -r .sandbox.throughput_per_s <<<"$j" | xargs printf '%.1f') | $(jq -r .ratio_throughput <<<"$j" | xargs printf '%.2f') | $(jq -r .sandbox.cpu_ms_per_run <<<"$j" | xargs printf '%.1f') |"
    echo "| bare (same run) | $(jq -r .bare.throughput_per_s <<<"$j" | xargs printf '%.1f') | 1 | $(jq -r .bare.cpu_ms_per_run <<<"$j" | xargs printf '%.1f') |"
  done
  echo
  echo "## Memory of an idle warm sandbox"
  echo
  echo "\`scratchrun bench --idle-memory\`: cgroup memory of ready warm sandboxes (init, the pre-started interpreter, file systems, kernel objects), next to the same interpreter waiting bare (its anonymous memory). bash sandboxes have no pre-started interpreter: theirs is the sandbox's own cost, of which $(jq -r '.init_mib * 10 | round / 10' <<<"$idle") MiB is its init's anonymous memory (init joins its cgroup before it starts, so it is counted)."
  echo
  echo "| warm sandbox | MiB | interpreter bare, MiB |"
  echo "|---|---|---|"
  jq -r '.bare_interpreter_mib as $b | .pooled_mib | to_entries | sort_by(.key)[] | "| \(.key) | \(.value * 10 | round / 10) | \(if (.key | endswith("/light")) then ($b[(.key | split("/")[0])] // "-" | if type == "number" then (. * 10 | round / 10) else . end) else "-" end) |"' <<<"$idle"
  echo
  if [[ -n "$kept" ]]; then
    printf '%s\n\n' "$kept"
  fi
  printf '%s\n' "$microvm"
} > "$repo/BENCHMARKS.md.new"
mv "$repo/BENCHMARKS.md.new" "$repo/BENCHMARKS.md"
cat "$repo/BENCHMARKS.md"
