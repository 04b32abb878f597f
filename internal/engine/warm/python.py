# ScratchRun warm start for Python. Started in a fresh sandbox before any job
# exists; it imports the heavy, common libraries (heavy variant only), then
# reads the job from fd 3 to end of file (working directory, program file,
# environment; each ended by NUL: see initproto.PrestartJob) and runs the program
# as `python3 FILE` would. It never runs anything of a caller's before that.
#
# It imports nothing beyond what the interpreter has loaded at start: json
# and traceback alone cost two thirds of a bare `python3 -c 'print(1)'` on the
# machine we measured, and every call would pay for them in CPU (runpy, worse,
# on the call's latency). traceback is imported only when user code fails.
import os, sys
from _frozen_importlib_external import SourceFileLoader

# Whether the interpreter gives __main__ an __annotations__ dict of its own
# (versions differ); the fresh __main__ below must look the same.
_MAIN_HAS_ANNOTATIONS = "__annotations__" in globals()


def _preload():
    """Imports SCRATCHRUN_PRELOAD's modules (a "heavy" warm sandbox; a
    "light" one preloads nothing and only saves the interpreter's start) and
    reports whether it did."""
    names = [n for n in os.environ.pop("SCRATCHRUN_PRELOAD", "").split(",") if n]
    if not names:
        return False
    # Import-time warnings must not end up in the job's stderr.
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        import importlib
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:
                pass
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
    # Keep the preloaded objects out of every later collection: the job's
    # garbage collections (and the one at its end) then cost what its own
    # objects cost. (gc.freeze exists for exactly this pre-fork case.)
    import gc
    gc.collect()
    gc.freeze()
    return True


def _read_job():
    chunks = []
    while True:
        chunk = os.read(3, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(3)
    workdir, path, *env = [os.fsdecode(f) for f in b"".join(chunks).split(b"\0")[:-1]]
    return workdir, path, env


def _fresh_main(path):
    """A fresh __main__ module, as the interpreter makes for `python3 FILE`
    (runpy.run_path would do the same at several times the cost, and would
    put its own frames in tracebacks)."""
    main = type(sys)("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = SourceFileLoader("__main__", path)
    main.__builtins__ = __builtins__
    if _MAIN_HAS_ANNOTATIONS:
        main.__annotations__ = {}
    sys.modules["__main__"] = main
    return main


def _exit_status(e):
    """The exit status `python3 FILE` gives an uncaught SystemExit."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        if not -(1 << 63) <= code < 1 << 63:
            return 0xFF  # as the interpreter ends on a code no C long holds
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


# _before_exit, when set, runs at the very end of the fast exit: only in a
# zygote's probe (zygote.py's _written_by_a_job), never in a job's process.
_before_exit = None


def _fast_exit(status, main, libc_exit):
    """Ends the process as the interpreter would (non-daemon threads joined,
    atexit callbacks run, the program's globals released so their __del__
    methods run and files they left open are flushed and closed, standard
    streams flushed, C stdio flushed by libc's exit) without tearing down
    every module: with numpy, pandas and matplotlib loaded that teardown
    took 165-300 ms on the machine we measured, most of a chart call, and
    even a bare interpreter's took 3 ms of a 7 ms print(1). The heavy
    variant uses it (ctypes is loaded there anyway), and so does a zygote's
    fork, whose zygote hands it libc's exit (libc_exit; None: found through
    ctypes here); a light warm sandbox does not, as importing ctypes would
    cost it more than the teardown saves."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    import atexit
    atexit._run_exitfuncs()
    main.__dict__.clear()
    import gc, io
    gc.collect()
    # Files still open elsewhere (a helper module's globals, builtins, a
    # cycle gc left) are flushed as the interpreter's teardown would; the
    # preloaded modules' objects are frozen, so this sees the job's alone.
    for o in gc.get_objects():
        if type(o) in (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom) and o not in (sys.stdout, sys.stderr):
            try:
                if not o.closed:
                    o.flush()
            except Exception:
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            status = 120  # as the interpreter reports a failed final flush
    if _before_exit is not None:
        _before_exit()
    try:
        if libc_exit is None:
            import ctypes
            libc_exit = ctypes.CDLL(None).exit
        libc_exit(status)
    finally:
        os._exit(status)


def _main(heavy, libc_exit=None):
    fast = heavy or libc_exit is not None
    workdir, path, env = _read_job()
    os.environ.clear()
    os.environ.update(kv.split("=", 1) for kv in env if "=" in kv)
    os.chdir(workdir)
    sys.argv = [path]
    sys.orig_argv = [sys.executable, path]
    sys.path[0] = os.path.dirname(path)
    main = _fresh_main(path)
    with open(path, "rb") as f:
        source = f.read()
    try:
        exec(compile(source, path, "exec"), main.__dict__)
        status = 0
    except SystemExit as e:
        if not fast:
            raise
        status = _exit_status(e)
    except BaseException as e:
        # Show the traceback as `python3 FILE` would: from the user's file
        # on, and none at all for a syntax error (no frame of it ran).
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        if sys.excepthook is not sys.__excepthook__:
            sys.excepthook(type(e), e, tb)
        else:
            import traceback
            traceback.print_exception(type(e), e, tb)
        # The traceback holds the failed frames, and the files open in
        # them: released, so that the exit flushes and closes those files.
        tb = e.__traceback__ = None
        status = 1
    if fast:
        _fast_exit(status, main, libc_exit)
    sys.exit(status)


# The entry (a zygote's bootstrap, zygote.py, replaces what follows).
_heavy = _preload()
del _preload
_main(_heavy)
