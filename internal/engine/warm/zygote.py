# ScratchRun zygote bootstrap (docs/zygotes.md): the warm bootstrap's code
# (python.py, up to its entry) followed by this. It runs as the zygote, in
# a root of the image's /usr and /etc with no capability but CAP_SETUID
# and CAP_SETGID, before any call exists: it preloads what the variant
# preloads, freezes the heap, loads the engine's spawner (the shared object
# on fd 4, a sealed memfd: never a file of the image's) and serves the
# engine's spawn requests on fd 3. Nothing but those requests reaches it.
#
# serve() returns 1 in each sandbox's pre-started interpreter: a fork of
# this process inside the sandbox, confined as the exec'd one would be.
# There python's fork hooks run (random reseeds itself, locks and the
# threading module are reset), numpy's legacy global generator is
# reseeded, the signals are put back as a fresh interpreter sets them, and
# the job is read from fd 3 exactly as a warm sandbox's interpreter reads
# it.


def _own_pages(ctypes):
    """Copies every private writable page this fork shares with its zygote
    (madvise MADV_POPULATE_WRITE) while it waits for its job, so that the
    job does not: each page the job would first write is otherwise a
    copy-on-write fault on its path (about 650 for print(1): 1.4 ms of an
    8.3 ms call on the machine we measured). It stops when the job arrives:
    copying the rest then would cost the job more than the faults it saves
    (most pages are never written; at concurrency 4 on 2 cores copying
    them all took a tenth of the throughput), so a sandbox made ahead for
    its caller's next call, with time before the call, gets every page and
    one made on the call's path almost none. Only pages the zygote has
    (mincore) are copied: populating the rest would allocate memory nobody
    used (an allocator's reserve, a library's untouched buffers), charged
    to the sandbox before its job starts."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise, ioctl, mincore = libc.madvise, libc.ioctl, libc.mincore
        madvise.restype, madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        ioctl.restype, ioctl.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        mincore.restype, mincore.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        waiting = ctypes.c_int(0)
        ref = ctypes.byref(waiting)
        with open("/proc/self/maps", "rb") as f:
            maps = f.read().splitlines()
        page, pages = 1 << 12, 64
        chunk = pages * page
        present = (ctypes.c_ubyte * pages)()
        resident = bytes(i & 1 for i in range(256))  # a translation to mincore's low bit
        for line in maps:
            fields = line.split()
            if len(fields) < 2 or fields[1] != b"rw-p":
                continue
            start, end = (int(x, 16) for x in fields[0].split(b"-"))
            for at in range(start, end, chunk):
                if ioctl(3, 0x541B, ref) != 0 or waiting.value:  # FIONREAD on the job's pipe
                    return
                n = min(chunk, end - at) // page
                if mincore(at, n * page, present) != 0:
                    continue
                bits = bytes(present)[:n].translate(resident)
                i = bits.find(1)
                while i >= 0:
                    j = bits.find(0, i)
                    if j < 0:
                        j = n
                    madvise(at + i * page, (j - i) * page, 23)  # MADV_POPULATE_WRITE; an error leaves the pages to fault
                    i = bits.find(1, j)
    except Exception:
        pass  # the pages fault in the job instead: slower, not wrong


def _warm_compiler():
    """Compiles a small program once in the fork, before its job comes: a
    fork maps none of the interpreter's code until it runs it, and the
    compiler is the largest part of it a job's first steps run (the parser,
    the symbol table, the code generator). Their first run in a fork
    faulted them in and took most of 1 ms of a print(1) call after an
    agent's pause on the machine we measured; compiling here first leaves a
    job's compile a fraction of that. The program is the engine's, the
    same in every fork, and the code object is dropped: nothing of it is
    the job's to see."""
    try:
        compile("import sys\nfor i in range(2):\n    x = f'{i}' + str(i)\nprint(x)\n", "<warm>", "exec")
    except Exception:
        pass  # the job's compile pays it instead


def _zygote():
    wanted = [m for m in os.environ.get("SCRATCHRUN_PRELOAD", "").split(",") if m]  # _preload pops it
    heavy = _preload()
    # _preload skips a module that fails to import; in a zygote's world (no
    # /tmp, nothing writable but a small home) one may fail halfway and leave its
    # package without the submodules it expects, which every call would
    # then inherit. Serve nothing rather than that: the engine's sandboxes
    # go to the helper.
    missing = [m for m in wanted if m not in sys.modules]
    if missing:
        sys.stderr.write("zygote: could not preload %s\n" % ", ".join(missing))
        os._exit(2)
    import ctypes, gc, signal
    gc.collect()
    gc.freeze()
    # clone(CLONE_NEWUSER) refuses a threaded caller, and a fork keeps only
    # the calling thread: a preloaded module that started threads (numpy's
    # OpenBLAS without OPENBLAS_NUM_THREADS=1) cannot serve.
    if len(os.listdir("/proc/self/task")) != 1:
        sys.stderr.write("zygote: the interpreter is not single-threaded after preloading\n")
        os._exit(2)
    # A test's hook (spawner.TestHookEnv, refused outside tests): python
    # run in the zygote itself, as a compromised zygote would run it.
    hook = os.environ.pop("SCRATCHRUN_ZYGOTE_TEST_HOOK", None)
    if hook:
        exec(hook, {"__name__": "zygote_test_hook"})
    # PyDLL: the GIL stays held through serve(), so no thread of python's
    # can run while the spawner forks.
    lib = ctypes.PyDLL("/proc/self/fd/4")
    os.close(4)
    serve = lib.scratchrun_zygote_serve
    serve.restype, serve.argtypes = ctypes.c_int, []
    # The job's fast exit (python.py's _fast_exit) calls libc's exit
    # through this, found before serving: no fork pays for it.
    libc_exit = ctypes.CDLL(None).exit
    libc_exit.restype, libc_exit.argtypes = None, [ctypes.c_int]
    api = ctypes.pythonapi
    before, parent, child = api.PyOS_BeforeFork, api.PyOS_AfterFork_Parent, api.PyOS_AfterFork_Child
    # Every process made while serving is a fork to python: the locks its
    # fork takes (imports, the runtime's) are held across the whole loop,
    # as across one os.fork(), and each interpreter handed back releases
    # them in PyOS_AfterFork_Child.
    before()
    if serve() != 1:
        parent()
        os._exit(0)  # the engine closed the socket (or serving failed: it sees why)
    child()
    _warm_compiler()
    _own_pages(ctypes)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()
    # The job gets no handle on the zygote's machinery by name: ctypes (and
    # with it the spawner's object and the fork hooks bound above, which die
    # with this frame) leaves sys.modules, so a job that imports it loads it
    # afresh, and the bootstrap's entry is deleted below.
    for name in [n for n in sys.modules if n in ("ctypes", "_ctypes") or n.startswith("ctypes.")]:
        del sys.modules[name]
    return heavy, libc_exit


_heavy, _libc_exit = _zygote()
del _zygote
_main(_heavy, _libc_exit)
