// The zygote: the spawner's serve loop run from inside an initialized
// interpreter (see docs/zygotes.md), whose sandboxes' pre-started
// interpreter is a fork of it rather than a new program.
#ifndef SCRATCHRUN_ZYGOTE_H
#define SCRATCHRUN_ZYGOTE_H

#include <setjmp.h>
#include <stdint.h>

// zygote_mode is set in a zygote (scratchrun_zygote_serve); zygote_entering
// only while init pre-starts the interpreter, so that start_process hands
// that one child back to the interpreter instead of executing argv.
extern int zygote_mode;
extern int zygote_entering;

// zygote_host_paths, set while init pre-starts the interpreter in a
// zygote, are init's copies of host paths (the image's view, the mount
// directory): zygote_enter zeroes them in the interpreter's process, which
// is a copy of init's memory where an exec would have left none.
extern char *zygote_host_paths[2];

// zygote_entry is scratchrun_zygote_serve's frame (zygote_serve.c). Every
// process the zygote makes is a copy of it that has not returned from that
// frame (the sandbox's init is a clone inside spawn(), the interpreter a
// fork inside init's start_process), so the jump back is to a live frame
// of its own stack.
extern sigjmp_buf zygote_entry;

// zygote_enter finishes, in the pre-start's child, what an execve would
// have done (capabilities recomputed, close-on-exec descriptors closed, the
// name and dumpability of a fresh program), then jumps back into
// scratchrun_zygote_serve, which returns 1 into the interpreter. It
// returns only when a step failed, with errno set.
void zygote_enter(const char *argv0);

// zygote_as_owner makes the zygote able to write a child's uid and gid
// maps; zygote_as_root undoes it (and ends the zygote if it cannot, or if
// its engine died meanwhile). The helper writes them with root's
// capabilities; the zygote, holding only CAP_SETUID and CAP_SETGID, needs
// CAP_SYS_ADMIN in the child's user namespace for that, which it has as
// its owner: its effective uid becomes owner's (CAP_SETUID and CAP_SETGID
// kept effective, for the map's ranges), its file system uid stays 0 (the
// map files are root's, the child being non-dumpable). The cgroup.procs
// writes that follow want the effective uid 0 again.
int zygote_as_owner(unsigned owner);
void zygote_as_root(int engine_pid);

// spawner_forget zeroes spawn.c's copy of the request being served (the
// sandbox's maps and cgroup paths), which a forked job would otherwise
// find in its memory.
void spawner_forget(void);

// spawner_serve is spawn.c's loop (hello, then requests until the engine
// closes fd 3).
int spawner_serve(void);

// zygote_launch is `scratchrun-spawn --zygote ...` (zygote_launch.c).
int zygote_launch(int argc, char **argv);

// zygote_seccomp installs the zygote's filter (zygote_seccomp.c), which
// lets it take no uid but 0, a sandbox namespace's own ids and the
// owner_count owner uids from owner_lo. no_new_privs must be set.
int zygote_seccomp(uint32_t owner_lo, uint32_t owner_count);

#endif
