# ScratchRun session kernel for Python. One interpreter serves every call of a
# session: it reads a cell from fd 3 (a u32 little-endian length, then the
# working directory, the program file and the environment, each ended by NUL:
# initproto.PrestartJob's form), runs the file in one __main__ kept for the
# kernel's life, and answers on fd 4 with a u32 length and "exit=N\0". End of
# file on fd 3 ends the kernel. See kernel.go for the frame and the driver.
#
# A cell runs as `python3 FILE` would, except that a last bare expression is
# shown as the interactive interpreter shows it (sys.displayhook: its repr,
# nothing for None), SystemExit ends the cell and not the kernel, and SIGINT
# interrupts the running cell (KeyboardInterrupt, status 130). Between cells
# SIGINT is ignored, so an interrupt that arrives just after a cell ended
# cannot kill the kernel or the next cell.
#
# Like warm/python.py it imports nothing heavy at start: ast and signal only
# (both cheap), traceback only when a cell fails.
def _kernel():
    import ast, os, signal, sys
    from _frozen_importlib_external import SourceFileLoader

    # User code and its children must not inherit the kernel's pipes: a child
    # holding fd 4 would keep the driver from seeing the kernel's death, and
    # one reading fd 3 could swallow the next cell.
    os.set_inheritable(3, False)
    os.set_inheritable(4, False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    user_sigint = signal.default_int_handler
    has_annotations = "__annotations__" in globals()
    main = None
    first = True

    def read_exact(n):
        chunks = []
        while n > 0:
            chunk = os.read(3, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_cell():
        head = read_exact(4)
        if head is None:
            return None
        body = read_exact(int.from_bytes(head, "little"))
        if body is None:
            return None
        workdir, path, *env = [os.fsdecode(f) for f in body.split(b"\0")[:-1]]
        return workdir, path, env

    def reply(status):
        body = b"exit=%d\0" % status
        data = len(body).to_bytes(4, "little") + body
        while data:
            data = data[os.write(4, data):]

    def exit_status(e):
        # The status `python3 FILE` gives an uncaught SystemExit.
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        try:
            sys.stderr.write(str(code) + "\n")
        except Exception:
            pass
        return 1

    def show(e, path):
        # As `python3 FILE` shows it: from the first frame of a cell on (the
        # kernel's frames are cut), none for a syntax error.
        sys.last_type, sys.last_value = type(e), e
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        sys.last_traceback = tb
        if sys.excepthook is not sys.__excepthook__:
            sys.excepthook(type(e), e, tb)
        else:
            import traceback
            traceback.print_exception(type(e), e, tb)

    def flush():
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass

    def compile_cell(source, path):
        tree = ast.parse(source, path, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            # The last bare expression is compiled as the interactive
            # interpreter compiles a line, so it goes through displayhook.
            last = ast.Interactive(body=[tree.body.pop()])
        codes = [compile(tree, path, "exec")]
        if last is not None:
            codes.append(compile(last, path, "single"))
        return codes

    while True:
        cell = read_cell()
        if cell is None:
            return
        workdir, path, env = cell
        if first:
            # Only once: the environment and the working directory are the
            # kernel's state, and what a cell sets must outlive it. Later
            # cells' variables (the request's own) are applied over it.
            os.environ.clear()
            os.chdir(workdir)
            sys.path[0] = os.path.dirname(path)
            main = type(sys)("__main__")
            main.__cached__ = None
            main.__builtins__ = __builtins__
            if has_annotations:
                main.__annotations__ = {}
            sys.modules["__main__"] = main
            first = False
        os.environ.update(kv.split("=", 1) for kv in env if "=" in kv)
        main.__file__ = path
        main.__loader__ = SourceFileLoader("__main__", path)
        sys.argv = [path]
        status = 0
        try:
            try:
                signal.signal(signal.SIGINT, user_sigint)
                with open(path, "rb") as f:
                    source = f.read()
                for code in compile_cell(source, path):
                    exec(code, main.__dict__)
            finally:
                # The cell's own SIGINT handler is given back to the next
                # cell; the kernel ignores the signal in between.
                user_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
                if user_sigint is None:
                    user_sigint = signal.default_int_handler
        except SystemExit as e:
            status = exit_status(e)
        except KeyboardInterrupt as e:
            show(e, path)
            status = 130
        except BaseException as e:
            show(e, path)
            status = 1
        flush()
        reply(status)


_kernel()
