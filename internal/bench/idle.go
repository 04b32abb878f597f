package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/images"
)

// IdleCommand is a command line that starts rt's interpreter bare and leaves
// it waiting on stdin, as a pre-started warm interpreter waits for its job
// (nil for runtimes without a warm start).
func IdleCommand(rt images.Runtime) []string {
	if len(rt.Command) == 0 {
		return nil
	}
	switch rt.Warm {
	case "python":
		return []string{rt.Command[0], "-c", "import sys; sys.stdin.read()"}
	case "node":
		return []string{rt.Command[0], "-e", "require('fs').readFileSync(0)"}
	}
	return nil
}

// BareIdleMemory starts argv chrooted into rootfs, lets it settle, and
// returns its anonymous resident memory (what a memory cgroup charges a
// process beyond shared file pages): the interpreter's own cost, to set a
// pooled sandbox's memory against.
func BareIdleMemory(ctx context.Context, rootfs string, argv []string) (int64, error) {
	cmd := exec.CommandContext(ctx, "chroot", append([]string{rootfs}, argv...)...)
	cmd.Env = pyEnv
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	// chroot execs the interpreter in place: same pid. Wait until its
	// memory stops growing (start-up done).
	var last int64 = -1
	for i := 0; i < 50; i++ {
		time.Sleep(200 * time.Millisecond)
		anon, err := rssAnon(cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		if anon == last {
			return anon, nil
		}
		last = anon
	}
	return last, nil
}

func rssAnon(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no RssAnon for pid %d", pid)
}

// InitMemory returns the average anonymous memory of the sandbox inits
// started by the engine in process enginePid (directly, or through its
// spawner helper), and how many there are: the part of an idle sandbox's
// memory that is ScratchRun's own rather than the interpreter's.
func InitMemory(enginePid int) (avg int64, n int, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	parents := map[int]bool{enginePid: true}
	type proc struct{ pid, ppid int }
	var inits []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so cut at ") ".
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndex(s, ") ")
		if open < 0 || end < open {
			continue
		}
		comm, rest := s[open+1:end], strings.Fields(s[end+2:])
		if len(rest) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(rest[1])
		switch {
		case strings.HasPrefix(comm, "scratchrun-spaw") && ppid == enginePid:
			parents[pid] = true
		case comm == "init": // the spawner's child names itself so (spawner/c/spawn.c)
			inits = append(inits, proc{pid, ppid})
		}
	}
	var total int64
	for _, p := range inits {
		if !parents[p.ppid] {
			continue
		}
		anon, err := rssAnon(p.pid)
		if err != nil {
			continue
		}
		total += anon
		n++
	}
	if n == 0 {
		return 0, 0, nil
	}
	return total / int64(n), n, nil
}
