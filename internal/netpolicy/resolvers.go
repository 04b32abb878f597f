package netpolicy

import (
	"bufio"
	"net/netip"
	"os"
	"strings"
)

// HostResolvers returns the host's IPv4 nameservers that a sandbox can use:
// those in /etc/resolv.conf, or, when that names only a local stub (such as
// systemd-resolved's 127.0.0.53), the stub's upstream servers.
func HostResolvers() []netip.Addr {
	for _, file := range []string{"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"} {
		if addrs := nameservers(file); len(addrs) > 0 {
			return addrs
		}
	}
	return nil
}

func nameservers(file string) []netip.Addr {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil || !a.Is4() || a.IsLoopback() {
			continue
		}
		out = append(out, a)
	}
	return out
}
