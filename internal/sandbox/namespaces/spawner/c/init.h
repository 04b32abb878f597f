// The built-in sandbox init of scratchrun-spawn (init.c and the files it
// names).
#ifndef SCRATCHRUN_INIT_H
#define SCRATCHRUN_INIT_H

// sandbox_init is pid 1 of a namespaces sandbox. The spawner's child calls it
// with descriptors 0 (/dev/null), 1 and 2 (the sandbox's output), 3
// (control: setup, then job) and 4 (status: ready, then result) and no
// others, every signal at its default, and the sandbox's uid and cgroups
// already set. It never returns.
void sandbox_init(void) __attribute__((noreturn));

#endif
