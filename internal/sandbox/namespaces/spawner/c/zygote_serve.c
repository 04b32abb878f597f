// The zygote's serve loop (see zygote.h and docs/zygotes.md), the one
// symbol scratchrun-zygote.so exports. The engine hands the object to the
// zygote's interpreter as a memfd, which loads it with ctypes.PyDLL (the
// GIL stays held through the call, so the interpreter stays
// single-threaded, which clone with CLONE_NEWUSER needs) and calls it.
#define _GNU_SOURCE
#include <setjmp.h>
#include <sys/prctl.h>

#include "zygote.h"

// scratchrun_zygote_serve serves the engine's spawn requests on fd 3. It
// returns 0 once the engine closed the socket, -1 if serving failed, and 1
// in the pre-started interpreter of each sandbox made: the caller then
// runs its fork hooks and reads the job from fd 3.
__attribute__((visibility("default"))) int scratchrun_zygote_serve(void) {
	if (sigsetjmp(zygote_entry, 0))
		return 1;
	zygote_mode = 1;
	// Only the engine's requests reach it; nothing else may read it.
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -1;
	return spawner_serve() == 0 ? 0 : -1;
}
