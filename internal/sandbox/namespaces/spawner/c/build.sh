#!/bin/sh
# Builds scratchrun-spawn, the spawner helper and the namespaces sandbox's
# init it carries, from the C files next to this script. It is the one
# recipe: scripts/install.sh runs it from the source tree, and the engine
# (spawner.Build) runs it from a copy of the sources it embeds when no helper
# is installed. Warnings are errors; the hardening is Debian's
# (dpkg-buildflags with hardening=+all) plus stack-clash protection, all of
# it cheap here: the helper starts once per engine, and init runs in its
# forked child without an exec.
#
#   build.sh OUTPUT [FILE.c...]
#
# CC picks the compiler (default cc, else gcc). The files default to the
# helper's; the tests name others (a program that runs the init's wire code
# on Go's messages) to build them the same way.
set -eu
out=${1:?usage: build.sh OUTPUT [FILE.c...]}
shift
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")"
if [ $# -eq 0 ]; then
  set -- spawn.c init.c wire.c rootfs.c home.c confine.c job.c session.c kernel.c util.c
fi
cc=${CC:-}
if [ -z "$cc" ]; then
  if command -v cc >/dev/null 2>&1; then cc=cc; else cc=gcc; fi
fi
exec "$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -Wformat -Wformat-security \
  -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection \
  -fPIE -pie -Wl,-z,relro -Wl,-z,now -I. \
  -o "$out" "$@"
