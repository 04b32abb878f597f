package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Version is the cgroup hierarchy a Manager drives.
type Version int

// The hierarchies a Manager can drive.
const (
	V1 Version = 1
	V2 Version = 2
)

// v1Controllers are the controllers a sandbox needs on cgroup v1.
var v1Controllers = []string{"memory", "pids", "cpu"}

// v2Controllers are enabled in the parent's cgroup.subtree_control on v2.
var v2Controllers = []string{"memory", "pids", "cpu"}

type mountInfo struct {
	fsType     string
	mountPoint string
	superOpts  []string
}

func readMounts() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// Fields: id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		line := sc.Text()
		dash := strings.Index(line, " - ")
		if dash < 0 {
			continue
		}
		pre := strings.Fields(line[:dash])
		post := strings.Fields(line[dash+3:])
		if len(pre) < 5 || len(post) < 3 {
			continue
		}
		out = append(out, mountInfo{fsType: post[0], mountPoint: unescapeMount(pre[4]), superOpts: strings.Split(post[2], ",")})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escaping of spaces and tabs in mountinfo.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// findHierarchies returns the v2 mount point when the unified hierarchy holds
// the memory controller, otherwise the v1 mount point of each needed controller.
func findHierarchies() (v2 string, v1 map[string]string, err error) {
	mounts, err := readMounts()
	if err != nil {
		return "", nil, fmt.Errorf("read mountinfo: %w", err)
	}
	v1 = map[string]string{}
	for _, m := range mounts {
		switch m.fsType {
		case "cgroup2":
			data, err := os.ReadFile(filepath.Join(m.mountPoint, "cgroup.controllers"))
			if err == nil && hasWord(string(data), "memory") && v2 == "" {
				v2 = m.mountPoint
			}
		case "cgroup":
			for _, c := range v1Controllers {
				if hasWord(strings.Join(m.superOpts, " "), c) {
					if _, seen := v1[c]; !seen {
						v1[c] = m.mountPoint
					}
				}
			}
		}
	}
	return v2, v1, nil
}

func hasWord(s, word string) bool {
	for _, f := range strings.Fields(s) {
		if f == word {
			return true
		}
	}
	return false
}
