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
# An OUTPUT ending in .so is the zygote's shared object instead
# (scratchrun-zygote.so: the same spawner and init, with zygote_serve.c, loaded
# into an interpreter; only scratchrun_zygote_serve is exported, and no
# symbol of it can be interposed by the interpreter's). CC picks the
# compiler (default cc, else gcc). The files default to the helper's; the
# tests name others (a program that runs the init's wire code on Go's
# messages) to build them the same way.
set -eu
out=${1:?usage: build.sh OUTPUT [FILE.c...]}
shift
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")"
init="init.c wire.c rootfs.c home.c confine.c job.c session.c kernel.c util.c zygote.c"
case $out in
*.so)
  [ $# -eq 0 ] && set -- spawn.c zygote_serve.c $init
  link="-fPIC -shared -fvisibility=hidden -Wl,-Bsymbolic -DSCRATCHRUN_SHARED" ;;
*)
  [ $# -eq 0 ] && set -- spawn.c zygote_launch.c zygote_seccomp.c $init
  link="-fPIE -pie" ;;
esac
cc=${CC:-}
if [ -z "$cc" ]; then
  if command -v cc >/dev/null 2>&1; then cc=cc; else cc=gcc; fi
fi
# shellcheck disable=SC2086
exec "$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -Wformat -Wformat-security \
  -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection \
  $link -Wl,-z,relro -Wl,-z,now -I. \
  -o "$out" "$@"
