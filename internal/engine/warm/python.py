# ScratchRun warm start for Python. Started in a fresh sandbox before any job
# exists; it imports the heavy, common libraries (heavy variant only), then
# reads the job from fd 3 to end of file (working directory, program file,
# environment; each ended by NUL: see sandbox.PrestartJob) and runs the program
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
    # SCRATCHRUN_PRELOAD names the modules of a "heavy" warm sandbox; a
    # "light" one preloads nothing and only saves the interpreter's start.
    names = [n for n in os.environ.pop("SCRATCHRUN_PRELOAD", "").split(",") if n]
    if not names:
        return
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


def _main():
    chunks = []
    while True:
        chunk = os.read(3, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(3)
    workdir, path, *env = [os.fsdecode(f) for f in b"".join(chunks).split(b"\0")[:-1]]
    os.environ.clear()
    os.environ.update(kv.split("=", 1) for kv in env if "=" in kv)
    os.chdir(workdir)
    sys.argv = [path]
    sys.orig_argv = [sys.executable, path]
    sys.path[0] = os.path.dirname(path)
    # A fresh __main__ module, as the interpreter makes for `python3 FILE`
    # (runpy.run_path would do the same at several times the cost, and
    # would put its own frames in tracebacks).
    main = type(sys)("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = SourceFileLoader("__main__", path)
    main.__builtins__ = __builtins__
    if _MAIN_HAS_ANNOTATIONS:
        main.__annotations__ = {}
    sys.modules["__main__"] = main
    with open(path, "rb") as f:
        source = f.read()
    try:
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        # Show the traceback as `python3 FILE` would: from the user's file
        # on, and none at all for a syntax error (no frame of it ran).
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        import traceback
        traceback.print_exception(type(e), e, tb)
        sys.exit(1)


_preload()
del _preload
_main()
