package settings

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parse reads text by s's type, the one rule of each, and checks the
// range. The error says what is wanted; the caller names the source.
func parse(s *Setting, text string) (any, error) {
	switch s.Type {
	case Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return nil, errors.New("want 1 or 0 (or true, false)")
		}
		return b, nil
	case Int:
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil || !inRange(s, n) {
			return nil, rangeError(s, n, err == nil)
		}
		return n, nil
	case Share:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return nil, errors.New("want " + Allowed(s))
		}
		return f, nil
	case Size:
		n, err := parseSize(text, s.Unit)
		if err != nil || !inRange(s, n) {
			return nil, rangeError(s, n, err == nil)
		}
		return n, nil
	case Duration:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil || !inRange(s, int64(d)) {
			return nil, rangeError(s, int64(d), err == nil)
		}
		return d, nil
	case String:
		return text, nil
	case Enum:
		if !slices.Contains(s.Allowed, text) {
			return nil, errors.New("want " + Allowed(s))
		}
		return text, nil
	case List:
		return SplitList(text), nil
	case Addr:
		if _, _, err := net.SplitHostPort(text); err != nil {
			return nil, errors.New("want HOST:PORT, e.g. 127.0.0.1:8722")
		}
		return text, nil
	case IPs:
		var out []netip.Addr
		for _, f := range fields(text) {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an IP address", f)
			}
			out = append(out, a)
		}
		return out, nil
	case Prefixes:
		var out []netip.Prefix
		for _, f := range fields(text) {
			p, err := parsePrefixOrAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR prefix or address", f)
			}
			out = append(out, p)
		}
		return out, nil
	case Prefix:
		p, err := netip.ParsePrefix(text)
		if err != nil {
			return nil, errors.New("want a CIDR prefix, e.g. 10.203.0.0/16")
		}
		return p, nil
	case URL:
		u, err := url.Parse(text)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("want an http:// or https:// URL")
		}
		return text, nil
	}
	panic("settings: " + s.Name + " has no type")
}

func inRange(s *Setting, n int64) bool {
	return n >= s.Min && (s.Max == 0 || n <= s.Max)
}

// errNegative is the error of a negative number where 0 is the least.
var errNegative = errors.New("must not be negative")

// rangeError says what s takes; a negative number where none is allowed
// gets the plainest words.
func rangeError(s *Setting, n int64, parsed bool) error {
	if parsed && n < 0 && s.Min == 0 {
		return errNegative
	}
	return errors.New("want " + Allowed(s))
}

// Allowed says in words what s takes: its type and range.
func Allowed(s *Setting) string {
	var w string
	switch s.Type {
	case Bool:
		return "1 or 0 (or true, false)"
	case Int:
		w = intRange(s.Min, s.Max, func(n int64) string { return strconv.FormatInt(n, 10) }, "an integer")
		if s.Unit != "" {
			w += " (" + s.Unit + ")"
		}
	case Share:
		w = "a share from 0 to 1, e.g. 0.8"
	case Size:
		unit := "bytes"
		if s.Unit != "" {
			unit = s.Unit
		}
		w = intRange(s.Min, s.Max, FormatSize, "a size") + ", e.g. 16GiB (a bare number is in " + unit + ")"
	case Duration:
		w = intRange(s.Min, s.Max, func(n int64) string { return time.Duration(n).String() }, "a duration") + ", e.g. 2s"
	case Enum:
		w = orList(s.Allowed)
	case List:
		w = "a comma-separated list"
	case Addr:
		w = "HOST:PORT"
	case IPs:
		w = "IP addresses, comma-separated"
	case Prefixes:
		w = "CIDR prefixes or addresses, comma-separated"
	case Prefix:
		w = "a CIDR prefix"
	case URL:
		w = "an http:// or https:// URL"
	default:
		w = "any text"
	}
	if s.Zero != "" {
		w += " (0: " + s.Zero + ")"
	}
	return w
}

// intRange words a range of numbers: "a positive integer", "an integer
// from 1 to 100".
func intRange(lo, hi int64, format func(int64) string, what string) string {
	switch {
	case hi == 0 && lo == 0:
		return "a non-negative " + strings.TrimPrefix(strings.TrimPrefix(what, "an "), "a ")
	case hi == 0 && lo == 1:
		return "a positive " + strings.TrimPrefix(strings.TrimPrefix(what, "an "), "a ")
	case hi == 0:
		return what + " of at least " + format(lo)
	}
	return what + " from " + format(lo) + " to " + format(hi)
}

func orList(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = strconv.Quote(w)
	}
	if len(quoted) < 2 {
		return strings.Join(quoted, "")
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// SplitList reads a comma-separated list, ignoring blanks.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

func parsePrefixOrAddr(f string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(f); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(f)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// sizeUnits are the suffixes a size may carry, longest first so that
// "KiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}

// ParseSize reads "1048576", "512KiB" or "10MiB" (also KB/MB/K/M, all
// binary) as a positive number of bytes, at most 1 TiB.
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s, "")
	if err != nil || n <= 0 || n > 1<<40 {
		return 0, errors.New(strconv.Quote(s) + " is not a positive size (e.g. 10MiB, 512KiB, 1048576)")
	}
	return n, nil
}

// parseSize reads a size whose bare number counts unit ("" bytes, "MiB").
func parseSize(s, unit string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	if unit == "MiB" {
		mult = 1 << 20
	}
	for _, u := range sizeUnits {
		if strings.HasSuffix(strings.ToUpper(t), u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult {
		return 0, errors.New("not a size")
	}
	return n * mult, nil
}

// FormatSize writes bytes in the largest binary unit that holds them
// whole.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
