package admission

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// MachineMemory reads the machine's memory, MemTotal of /proc/meminfo, in
// bytes (0 when unknown): what Defaults sizes the budget from.
func MachineMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
