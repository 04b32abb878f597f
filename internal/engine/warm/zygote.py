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


class _PageOwner:
    """Copies, in a fork waiting for its job, the private writable pages it
    shares with its zygote that a job would write (MADV_POPULATE_WRITE), so
    that the job does not: each such page is otherwise a copy-on-write
    fault on the job's path (about 650 for print(1): 1.4 ms of an 8.3 ms
    call on the machine we measured). Which pages: those the zygote's probe
    saw a job write (_written_by_a_job), or every private writable page
    when it saw nothing; of those, only the ones the zygote has (mincore),
    since populating the rest would allocate memory nobody used (an
    allocator's reserve, a library's untouched buffers), charged to the
    sandbox before its job starts. Pages no job was seen to write stay
    shared: copying them all cost a waiting light fork 4 ms of CPU for 830
    pages of 1380 it never wrote. Made in the zygote, once: a fork only
    copies."""

    _PAGE = 1 << 12
    _CHUNK = 64  # pages copied between two looks for the job

    def __init__(self, ctypes, ranges):
        libc = ctypes.CDLL(None, use_errno=True)
        self._madvise, self._ioctl = libc.madvise, libc.ioctl
        self._madvise.restype, self._madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self._ioctl.restype, self._ioctl.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        self._waiting = ctypes.c_int(0)
        self._ref = ctypes.byref(self._waiting)
        self.runs = self._resident(ctypes, libc, ranges or _private_writable())

    def _resident(self, ctypes, libc, ranges):
        mincore = libc.mincore
        mincore.restype, mincore.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        page, chunk = self._PAGE, self._CHUNK * self._PAGE
        present = (ctypes.c_ubyte * self._CHUNK)()
        low_bit = bytes(i & 1 for i in range(256))
        runs = []
        for start, end in ranges:
            for at in range(start, end, chunk):
                n = min(chunk, end - at) // page
                if mincore(at, n * page, present) != 0:
                    continue
                bits = bytes(present)[:n].translate(low_bit)
                i = bits.find(1)
                while i >= 0:
                    j = bits.find(0, i)
                    if j < 0:
                        j = n
                    if runs and runs[-1][1] == at + i * page:
                        runs[-1] = (runs[-1][0], at + j * page)
                    else:
                        runs.append((at + i * page, at + j * page))
                    i = bits.find(1, j)
        return runs

    def own(self):
        """Copies the runs, and stops when the job arrives: copying the rest
        then would cost the job more than the faults it saves, so a sandbox
        made ahead for its caller's next call, with time before the call,
        gets every page and one made on the call's path almost none."""
        try:
            chunk = self._CHUNK * self._PAGE
            since = chunk  # bytes copied since the last look
            for start, end in self.runs:
                for at in range(start, end, chunk):
                    if since >= chunk:
                        if self._ioctl(3, 0x541B, self._ref) != 0 or self._waiting.value:  # FIONREAD on the job's pipe
                            return
                        since = 0
                    n = min(chunk, end - at)
                    self._madvise(at, n, 23)  # MADV_POPULATE_WRITE; an error leaves the pages to fault
                    since += n
        except Exception:
            pass  # the pages fault in the job instead: slower, not wrong


def _private_writable():
    """The address ranges of this process's private writable mappings."""
    with open("/proc/self/maps", "rb") as f:
        maps = f.read().splitlines()
    ranges = []
    for line in maps:
        fields = line.split()
        if len(fields) >= 2 and fields[1] == b"rw-p":
            ranges.append(tuple(int(x, 16) for x in fields[0].split(b"-")))
    return ranges


# What the zygote's probe runs as its job, by variant: print(1), the most
# common call, and for the heavy variant a chart, what it is for.
_PROBE_LIGHT = "print(1)\n"
_PROBE_HEAVY = (
    "import io\nimport matplotlib.pyplot as plt\nimport numpy as np\n"
    "fig, ax = plt.subplots()\nax.plot(np.arange(10), np.arange(10) ** 2)\n"
    "fig.savefig(io.BytesIO(), format='png')\nprint(1)\n"
)


def _written_by_a_job(heavy, libc_exit):
    """Runs one job, the engine's own (_PROBE_LIGHT or _PROBE_HEAVY), in a
    fork of this zygote before it serves, exactly as a sandbox's fork runs
    a caller's (the job on fd 3, _main, the fast exit; output to /dev/null),
    and returns the address ranges of the pages that job wrote: pages of
    the fork's private writable mappings that are no longer shared with the
    zygote when it ends (/proc/self/pagemap's present and exclusively
    mapped bits), merged into runs. Each fork then copies those ahead
    (_PageOwner). Nothing of a caller's reaches this: no call exists yet.
    An empty list (no pagemap, a failed probe) makes forks copy every
    page, as before."""
    try:
        report_r, report_w = os.pipe()
        job_r, job_w = os.pipe()
        source_r, source_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(report_r)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.dup2(job_r, 3)  # the engine's socket, in this fork only
                os.write(source_w, (_PROBE_HEAVY if heavy else _PROBE_LIGHT).encode())
                os.close(source_w)
                os.write(job_w, b"/\0/proc/self/fd/%d\0PATH=/usr/bin:/bin\0" % source_r)
                os.close(job_w)
                global _before_exit
                _before_exit = lambda: _report_written(report_w)
                _warm_compiler()
                _main(heavy, libc_exit)
            finally:
                os._exit(1)  # _report_written ends the probe: here it failed
        for fd in (report_w, job_r, job_w, source_r, source_w):
            os.close(fd)
        chunks = []
        while True:
            chunk = os.read(report_r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(report_r)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return []
        ranges = []
        for line in b"".join(chunks).split():
            start, end = line.split(b"-")
            ranges.append((int(start, 16), int(end, 16)))
        return ranges
    except Exception:
        return []


def _report_written(fd):
    """The probe's last act: writes the ranges of its exclusively mapped
    present pages (start-end, hex, one per line) to fd, and ends."""
    page = 1 << 12
    out = []
    with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
        for start, end in _private_writable():
            pagemap.seek((start // page) * 8)
            entries = memoryview(pagemap.read((end - start) // page * 8)).cast("Q")
            run = None
            for i, entry in enumerate(entries):
                written = entry >> 63 and (entry >> 56) & 1
                if written and run is None:
                    run = start + i * page
                elif not written and run is not None:
                    out.append(b"%x-%x\n" % (run, start + i * page))
                    run = None
            if run is not None:
                out.append(b"%x-%x\n" % (run, end))
    data = b"".join(out)
    while data:
        data = data[os.write(fd, data):]
    os._exit(0)


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
    try:
        owner = _PageOwner(ctypes, _written_by_a_job(heavy, libc_exit))
    except Exception:
        owner = None  # every page the job writes faults: slower, not wrong
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
    if owner is not None:
        owner.own()
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
