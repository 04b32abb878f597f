# ScratchRun warm start for Python. Started in a fresh sandbox before any job
# exists; it imports the heavy, common libraries, then waits on fd 3 for one
# JSON line naming the program, its environment and working directory, and
# runs it as `python3 FILE` would. It never runs anything before that line.
import json, os, sys

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

_preload()
with os.fdopen(3, "r") as _control:
    _job = json.loads(_control.readline())
os.environ.clear()
os.environ.update(kv.split("=", 1) for kv in _job["env"] if "=" in kv)
os.chdir(_job["dir"])
_path = _job["argv"][-1]
sys.argv = [_path]
sys.path[0] = os.path.dirname(_path)
del _preload, _control, _job

import runpy, traceback
try:
    runpy.run_path(_path, run_name="__main__")
except SystemExit:
    raise
except BaseException as _e:
    # Show the traceback as `python3 FILE` would: from the user's file on.
    _tb = _e.__traceback__
    while _tb is not None and _tb.tb_frame.f_code.co_filename != _path:
        _tb = _tb.tb_next
    traceback.print_exception(type(_e), _e, _tb or _e.__traceback__)
    sys.exit(1)
