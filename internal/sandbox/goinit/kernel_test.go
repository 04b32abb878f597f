package goinit

import "testing"

// A kernel's reply is read as strictly as the C init reads it
// (parse_kernel_reply): "exit=N\0", N in 0-255 as strconv.Itoa writes it.
func TestParseKernelReply(t *testing.T) {
	for body, want := range map[string]int{"exit=0\x00": 0, "exit=7\x00": 7, "exit=130\x00": 130, "exit=255\x00": 255} {
		if got, ok := parseKernelReply([]byte(body)); !ok || got != want {
			t.Errorf("%q: %d, %v", body, got, ok)
		}
	}
	for _, body := range []string{"", "exit=\x00", "exit=256\x00", "exit=07\x00", "exit=1", "exit=1\x00\x00", "exit=-1\x00", "exit=1000\x00", "exot=1\x00", "exit= 1\x00"} {
		if got, ok := parseKernelReply([]byte(body)); ok {
			t.Errorf("%q accepted as %d", body, got)
		}
	}
}

// A kernel keeper's report goes over its pipe whole, within PIPE_BUF, and
// back unchanged.
func TestKernelReportRoundTrip(t *testing.T) {
	const pipeBuf = 4096 // PIPE_BUF on Linux
	if kernelReportSize > pipeBuf {
		t.Fatalf("a report of %d bytes may not be written whole", kernelReportSize)
	}
	var r kernelReport
	r.Started, r.Pid, r.Ended, r.Status = 1, 42, 1, 3<<8
	copy(r.Error[:], "why")
	got, err := decodeKernelReport(r.encode())
	if err != nil || got != r || got.errorText() != "why" {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := decodeKernelReport(r.encode()[1:]); err == nil {
		t.Error("a short report decoded")
	}
}
