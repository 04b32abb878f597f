package kernel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bashSession runs calls as a session's bash calls run: a fresh shell each,
// through BashCommand, with one state directory.
type bashSession struct {
	t     *testing.T
	shell string
	dir   string
	state string
	calls int
}

func newBashSession(t *testing.T) *bashSession {
	dir := t.TempDir()
	return &bashSession{t: t, shell: interpreter(t, "bash"), dir: dir, state: filepath.Join(dir, ".session")}
}

// run runs src with the request's env; the process's environment is the
// base (PATH) and the request's, as the engine composes it.
func (s *bashSession) run(src string, env ...string) (stdout string, status int) {
	s.t.Helper()
	s.calls++
	file := filepath.Join(s.dir, "call-"+itoa(s.calls)+".sh")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		s.t.Fatal(err)
	}
	argv := BashCommand(s.shell, file, s.state, env)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "BASE=base"}, env...)
	var errs strings.Builder
	cmd.Stderr = &errs
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	if errs.Len() > 0 {
		s.t.Logf("call %d stderr: %s", s.calls, errs.String())
	}
	return string(out), status
}

func (s *bashSession) expect(src, want string, env ...string) {
	s.t.Helper()
	if got, status := s.run(src, env...); got != want || status != 0 {
		s.t.Errorf("%q: %q status %d, want %q", src, got, status, want)
	}
}

func TestBashStateRoundTrip(t *testing.T) {
	s := newBashSession(t)
	s.expect("export A=1 SPACED='a b\n\"c\"$x'\nplain=2\nmkdir -p sub && cd sub\necho \"$0 $#\"", s.dir+"/call-1.sh 0\n")
	// Exported variables and the directory are back; a plain variable is not.
	s.expect("echo \"$A|$SPACED|${plain-unset}|$PWD\"", "1|a b\n\"c\"$x|unset|"+s.dir+"/sub\n")
	// The request's variables win over the saved ones, and are kept.
	s.expect("echo $A", "9\n", "A=9")
	s.expect("echo $A", "9\n")
	// unset and unexport persist too, even for what the environment brings.
	s.expect("unset A BASE", "")
	s.expect("echo \"${A-unset} ${BASE-unset}\"", "unset unset\n")
	// exit and set -e still save; the call's status is its own.
	if _, status := s.run("export B=exit\ncd /\nexit 7"); status != 7 {
		t.Errorf("exit status %d, want 7", status)
	}
	if _, status := s.run("set -e\nexport C=errexit\nfalse\necho not reached"); status != 1 {
		t.Errorf("set -e status %d, want 1", status)
	}
	s.expect("echo \"$B $C $PWD\"", "exit errexit /\n")
	// A readonly variable is not saved, so it cannot break the next call.
	s.expect("declare -rx RO=1\nexport D=d", "")
	s.expect("echo \"${RO-unset} $D\"; RO=2; echo $RO", "unset d\n2\n")
	// A directory that is gone leaves the call where the engine started it.
	s.expect("mkdir -p "+s.dir+"/gone && cd "+s.dir+"/gone", "")
	if err := os.Remove(s.dir + "/gone"); err != nil {
		t.Fatal(err)
	}
	s.expect("pwd", s.dir+"\n")
}

// A call's own IFS or options do not spoil what is saved.
func TestBashSaveIgnoresTheCallsShellSettings(t *testing.T) {
	s := newBashSession(t)
	s.expect("set -euf\nIFS=:\nexport E='x y' F=\"*\"", "")
	s.expect("echo \"$E $F\"", "x y *\n")
}

func TestBashCommandSkipsNamesAShellCannotHave(t *testing.T) {
	argv := BashCommand("/bin/bash", "/code/call-1.sh", "/code/.session", []string{"A=1", "B-C=2", "=x", "_D=3"})
	want := []string{"/code/call-1.sh", "/code/.session", "A", "_D"}
	if got := argv[3:]; strings.Join(got, " ") != strings.Join(want, " ") || argv[1] != "-c" {
		t.Errorf("argv %q", argv)
	}
}
