# The zygote prototype's inner part (see run.sh and docs/zygotes.md): the
# zygote, root in a user namespace of its own, pivot_rooted into the image.
# Per call: fork C1; C1 unshares user, mount, pid, network, ipc and uts
# namespaces; the zygote writes C1's maps (after C1 has unshared: before,
# the write is refused); C1 forks G (pid 1 of the new pid namespace), G
# mounts a tmpfs and proc, forks J, and J runs print(1): forked from this
# initialized interpreter (mode fork) or exec'ing a new one (mode exec, the
# baseline). It prints the children's CPU per call (getrusage). A prototype
# for measuring, not the engine's code: no cgroup, no confinement.
import os, sys, resource, time, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def mount(src, dst, fs, flags, data=None):
    if libc.mount(src.encode() if src else None, dst.encode(), fs.encode() if fs else None, flags, data.encode() if data else None) != 0:
        e = ctypes.get_errno(); raise OSError(e, "mount %s: %s" % (dst, os.strerror(e)))
MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 1, 4096, 16384, 1<<18, 2, 4
def cpu():
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
MODE = sys.argv[2] if len(sys.argv) > 2 else 'fork'
out = os.open("/tmp/zout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
c0 = cpu(); t0 = time.time()
for i in range(N):
    r, w = os.pipe(); r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWNET | os.CLONE_NEWIPC | os.CLONE_NEWUTS)
        os.write(w2, b'u')
        os.read(r, 1)  # maps written
        os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
        g = os.fork()
        if g == 0:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m")
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)
            j = os.fork()
            if j == 0:
                os.dup2(out, 1)
                if MODE == "exec":
                    os.execv("/usr/bin/python3.13", ["python3.13", "-c", "print(1)"])
                exec(compile("print(1)", "main.py", "exec"), {"__name__": "__main__"})
                sys.stdout.flush(); os._exit(0)
            os.waitpid(j, 0); os._exit(0)
        os.waitpid(g, 0); os._exit(0)
    os.close(r); os.close(w2); os.read(r2, 1); os.close(r2)
    with open("/proc/%d/uid_map" % pid, "w") as f: f.write("0 %d 1" % (1000 + i % 1000))
    with open("/proc/%d/setgroups" % pid, "w") as f: f.write("deny")
    with open("/proc/%d/gid_map" % pid, "w") as f: f.write("0 %d 1" % (1000 + i % 1000))
    os.write(w, b"x"); os.close(w)
    os.waitpid(pid, 0)
c1 = cpu(); t1 = time.time()
print(MODE, "nested sandbox: children cpu ms/call %.2f wall %.2f" % ((c1 - c0) * 1000 / N, (t1 - t0) * 1000 / N))
