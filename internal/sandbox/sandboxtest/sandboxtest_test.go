package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// The fake follows its script and counts, and holds to the contract the
// real backends keep: one run per sandbox, none after Destroy, a timeout
// that kills.
func TestFakeFollowsScriptAndContract(t *testing.T) {
	boom := errors.New("boom")
	b := &Backend{Steps: []Step{
		{Stdout: "hi\n", Outcome: sandbox.Outcome{ExitCode: 3}, Memory: 7},
		{CreateErr: boom},
		{RunDelay: time.Hour},
	}}
	ctx := context.Background()
	s, err := b.Create(ctx, sandbox.Config{MemoryBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o, err := s.Run(ctx, sandbox.Job{Stdout: &out})
	if err != nil || o.ExitCode != 3 || out.String() != "hi\n" || o.Files == nil || s.MemoryUsage() != 7 {
		t.Errorf("run: %+v %v %q", o, err, out.String())
	}
	if _, err := s.Run(ctx, sandbox.Job{}); err == nil {
		t.Error("a second run was allowed")
	}
	if td := s.Destroy(); !td.Purged {
		t.Errorf("teardown %+v", td)
	}
	s.Destroy()
	if _, err := b.Create(ctx, sandbox.Config{}); !errors.Is(err, boom) {
		t.Errorf("second create: %v", err)
	}
	slow, err := b.Create(ctx, sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	o, err = slow.Run(ctx, sandbox.Job{Timeout: time.Millisecond})
	if err != nil || !o.TimedOut || o.ExitCode != 137 {
		t.Errorf("over its timeout: %+v %v", o, err)
	}
	if b.Created() != 2 || b.Destroyed() != 1 || b.Live() != 1 || b.Runs() != 2 || len(b.Configs()) != 3 {
		t.Errorf("created %d destroyed %d live %d runs %d configs %d", b.Created(), b.Destroyed(), b.Live(), b.Runs(), len(b.Configs()))
	}
	slow.Destroy()
	if _, err := slow.Run(ctx, sandbox.Job{}); err == nil {
		t.Error("a run after Destroy was allowed")
	}
}
