package execapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A lost worker has one wording, which says the code may have run, and is
// neither a refusal (something ran) nor a validation error; its detail
// names the worker for logs only.
func TestWorkerLostWording(t *testing.T) {
	var err error = fmt.Errorf("place the call: %w", &WorkerLostError{Worker: "w1", Why: "no word from it for 4s"})
	var lost *WorkerLostError
	if !errors.As(err, &lost) {
		t.Fatal("a wrapped WorkerLostError is not found by errors.As")
	}
	if !strings.HasPrefix(lost.Error(), "the worker running this call was lost; the code may have run") {
		t.Errorf("wording %q", lost.Error())
	}
	if strings.Contains(lost.Error(), "w1") || !strings.Contains(lost.Detail(), "w1") || !strings.Contains(lost.Detail(), "4s") {
		t.Errorf("error %q, detail %q: the worker belongs in the detail only", lost.Error(), lost.Detail())
	}
	var refusal *Refusal
	if errors.As(err, &refusal) || IsValidation(err) || errors.Is(err, ErrAtCapacity) {
		t.Error("a lost worker reads as a refusal or a validation error: the caller would think nothing ran")
	}
}
