package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/leakcheck"
)

// pagesOwnedProbe prints how many of the job's private writable pages are
// present and how many of those are its own, no longer shared with its
// zygote (/proc/self/pagemap's present and exclusively mapped bits), as
// soon as the job starts.
const pagesOwnedProbe = `
page = 4096
present = owned = 0
with open("/proc/self/maps", "rb") as maps, open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
    for line in maps.read().splitlines():
        fields = line.split()
        if fields[1] != b"rw-p":
            continue
        start, end = (int(x, 16) for x in fields[0].split(b"-"))
        pagemap.seek(start // page * 8)
        for entry in memoryview(pagemap.read((end - start) // page * 8)).cast("Q"):
            if entry >> 63:
                present += 1
                owned += (entry >> 56) & 1
print(present, owned)
`

// A fork made ahead for its caller's next call copies, while it waits,
// the pages its zygote saw a job write (a probe's print(1), run in a fork
// of the zygote before it serves), not every page it shares with its
// zygote: copying them all cost a waiting fork 4 ms of CPU for pages no
// job wrote. The job then finds a part of its pages its own, not all.
func TestZygoteForkCopiesAheadWhatAJobWrites(t *testing.T) {
	newTestEngine(t, nil)
	requireRuntime(t, "python3.13")
	before := leakcheck.Take(leakOpts)
	e, _ := newPooledEngineWith(t, PoolConfig{Floor: 1, Runtimes: []string{"python3.13"}, Networks: []string{"none"}, Variants: []string{variantLight}, IdleAfter: time.Minute},
		func(c *Config) { c.Zygote = true })
	if res := run(t, e, execapi.Request{Runtime: "python3.13", Code: "print(1)"}); res.ExitCode != 0 {
		t.Fatalf("first call: %+v", res)
	}
	waitFor(t, "the next sandbox made", func() bool { return e.next.count() == 1 })
	// Its copying is done when its memory stops growing.
	last, still := int64(-1), 0
	waitFor(t, "the next sandbox's memory to settle", func() bool {
		time.Sleep(100 * time.Millisecond)
		now := nextSandboxMemory(e)
		if now == last && now > 0 {
			still++
		} else {
			still = 0
		}
		last = now
		return still >= 3
	})
	res := run(t, e, execapi.Request{Runtime: "python3.13", Code: pagesOwnedProbe})
	var present, owned int
	if _, err := fmt.Sscan(res.Stdout, &present, &owned); err != nil || res.ExitCode != 0 {
		t.Fatalf("probe: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("%d private writable pages present, %d of them the job's own", present, owned)
	if present < 256 {
		t.Fatalf("only %d private writable pages present: not a fork of a python zygote", present)
	}
	if owned*100 > present*85 {
		t.Errorf("%d of %d pages copied: the fork copied every page it shares, not what a job writes", owned, present)
	}
	e.Close()
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left after the engine closed: %v", left)
	}
}

// nextSandboxMemory is the memory of the one next sandbox made (0: none).
func nextSandboxMemory(e *Engine) int64 {
	e.next.mu.Lock()
	defer e.next.mu.Unlock()
	for _, s := range e.next.next {
		select {
		case <-s.made:
			if s.l != nil {
				return s.l.sb.MemoryUsage()
			}
		default:
		}
	}
	return 0
}
