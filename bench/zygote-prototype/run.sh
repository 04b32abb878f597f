#!/usr/bin/env bash
# Measures the zygote plan's core (docs/zygotes.md): CPU per call of a nested
# sandbox whose interpreter is forked from an initialized one, against the
# same sandbox exec'ing a fresh interpreter, in the same run.
#   sudo bench/zygote-prototype/run.sh [N]
# Needs the trixie image (scripts/install.sh); root; leaves nothing behind
# (everything lives in a private mount namespace and dies with it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
n="${1:-200}"
rootfs="$(ls -d /var/lib/scratchrun/images/trixie-*/rootfs | head -1)"
inner() {
  set -e
  local root="$1"; shift
  mount -t tmpfs tmpfs "$root"
  for d in usr etc; do mkdir -p "$root/$d"; mount --bind "$rootfs/$d" "$root/$d"; mount -o remount,bind,ro "$root/$d"; done
  for l in bin lib lib64 sbin; do ln -s "usr/$l" "$root/$l"; done
  mkdir -p "$root/tmp" "$root/proc" "$root/oldroot" && chmod 1777 "$root/tmp"
  cp "$here/zygote.py" "$here/outer.py" "$root/tmp/"
  cd "$root" && pivot_root . oldroot
  # User namespaces cannot be made in a chroot: hence pivot_root, and the
  # old root unmounted before the zygote starts.
  exec /usr/bin/python3.13 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.umount2(b"/oldroot", 2) == 0
assert libc.mount(b"proc", b"/proc", b"proc", 0, None) == 0
os.chdir("/")
os.execv("/usr/bin/python3.13", ["python3.13", "/tmp/outer.py"] + sys.argv[1:])' "$@"
}
export -f inner; export rootfs here
echo "load before: $(cat /proc/loadavg)"
for mode in fork exec fork exec; do
  root="$(mktemp -d)"
  unshare -m --propagation private bash -c 'inner "$@"' _ "$root" "$n" "$mode"
  rmdir "$root"
done
