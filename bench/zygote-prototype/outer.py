# Makes the zygote's user namespace (root in it is host uid 1300000000, the
# range of sandboxes' own uids) and execs zygote.py in it.
import os, sys
r, w = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
    os.write(w2, b'u')
    os.read(r, 1)
    os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    os.execv("/usr/bin/python3.13", ["python3.13", "/tmp/zygote.py"] + sys.argv[1:])
os.close(r); os.close(w2); os.read(r2, 1); os.close(r2)
open("/proc/%d/uid_map" % pid, "w").write("0 1300000000 65536")
open("/proc/%d/setgroups" % pid, "w").write("deny")
open("/proc/%d/gid_map" % pid, "w").write("0 1300000000 65536")
os.write(w, b"x")
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
