package hostside

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Sandboxes are named after the engine that made them, so that a later
// engine can tell a dead engine's leftovers (which it sweeps) from a live
// one's (which it must never touch), whatever backend made them.

// InstanceName identifies the engine process pid in sandbox names as
// "e<pid>_<start time>".
func InstanceName(pid int) (string, error) {
	start, err := processStartTime(pid)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("e%d_%d", pid, start), nil
}

// EngineAlive reports whether the engine that named sandbox id
// ("e<pid>_<start>_<seq>") still runs. Names that are not of that shape count
// as alive, so that nothing not ours is ever touched.
func EngineAlive(id string) bool {
	i := strings.LastIndexByte(id, '_')
	if i < 0 {
		return true
	}
	if _, err := strconv.ParseUint(id[i+1:], 10, 64); err != nil {
		return true
	}
	return InstanceAlive(id[:i])
}

// InstanceAlive reports whether the engine named instance (InstanceName's
// "e<pid>_<start>") still runs; other shapes count as alive.
func InstanceAlive(instance string) bool {
	var pid int
	var start uint64
	if n, err := fmt.Sscanf(instance, "e%d_%d", &pid, &start); err != nil || n != 2 {
		return true
	}
	got, err := processStartTime(pid)
	return err == nil && got == start
}

func processStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
