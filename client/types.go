package client

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// The request and the server's description are the contract's own types
// (package execapi, the wire format the server decodes), aliased so that
// programs outside this module can name them: a field added to the
// contract is in the client at once, and the two cannot drift.
type (
	// Request is one call: run Code with Runtime in a fresh sandbox.
	// Binary input files go in FilesBase64 (standard base64).
	Request = execapi.Request
	// Limits bound one run; zero fields take the server's defaults.
	Limits = execapi.Limits
	// Info is what GET /v1/runtimes answers: runtimes, limits, admission.
	Info = execapi.Info
	// RuntimeInfo is one installed runtime.
	RuntimeInfo = execapi.RuntimeInfo
	// AdmissionInfo is the server's admission at one moment.
	AdmissionInfo = execapi.AdmissionInfo
	// Outcome is how a run ended, in one word.
	Outcome = execapi.Outcome
	// Facts are what a result's note says, as data.
	Facts = execapi.Facts
	// OutputCut says which output stream was cut at its cap.
	OutputCut = execapi.OutputCut
)

// Network modes of a Request.
const (
	NetworkNone   = execapi.NetworkNone
	NetworkEgress = execapi.NetworkEgress
)

// Outcomes of a run, and the exit codes with a fixed meaning.
const (
	OutcomeSuccess       = execapi.OutcomeSuccess
	OutcomeNonzeroExit   = execapi.OutcomeNonzeroExit
	OutcomeTimeout       = execapi.OutcomeTimeout
	OutcomeMemoryLimit   = execapi.OutcomeMemoryLimit
	OutcomeMachineMemory = execapi.OutcomeMachineMemory
	ExitTimeout          = execapi.ExitTimeout
	ExitKilled           = execapi.ExitKilled
)

// Result is what one run produced: the server's result document, with the
// returned files decoded. It is this package's own type (not the
// contract's, whose Files are base64 text as on the wire) so that a
// program gets the bytes; its JSON is the wire's.
type Result struct {
	// ExitCode is the program's exit status: 128+N when killed by signal
	// N, ExitTimeout (124) on timeout, ExitKilled (137) at the memory limit.
	ExitCode int `json:"exit_code"`
	// Stdout and Stderr are the program's output, each capped (see Facts).
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// ExecutionMS is the wall-clock time the program ran in the sandbox.
	ExecutionMS int64 `json:"execution_ms"`
	// StatePurged says teardown verifiably finished.
	StatePurged bool `json:"state_purged"`
	// Files maps each returned path to its content (base64 on the wire,
	// decoded by encoding/json's []byte rule).
	Files map[string][]byte `json:"files"`
	// Note is for people and models; programs read Outcome and Facts.
	Note    string  `json:"note"`
	Outcome Outcome `json:"outcome"`
	Facts   Facts   `json:"facts"`
}

// decodeResult reads a result document, filling in what an older server
// (or the hosted API) leaves out.
func decodeResult(data []byte) (Result, error) {
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return Result{}, err
	}
	if res.Files == nil {
		res.Files = map[string][]byte{}
	}
	if res.Outcome == "" {
		// A server older than outcomes sends none; its exit code is the
		// best there is.
		res.Outcome = execapi.OutcomeOf(res.ExitCode, res.Facts)
	}
	return res, nil
}

// Save writes the returned file at sandbox path to dest (mode 0o644),
// creating dest's directory. It fails for a path the run did not return.
func (r Result) Save(path, dest string) error {
	data, ok := r.Files[path]
	if !ok {
		return fmt.Errorf("save %s: the run returned no such file (returned: %v)", path, r.paths())
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.WriteFile(dest, data, 0o644); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// SaveAll writes every returned file under dir, at its sandbox path below
// it (/tmp/out/a.png goes to dir/tmp/out/a.png), and returns the paths
// written. A sandbox path is absolute and clean (the server checks), so it
// cannot leave dir.
func (r Result) SaveAll(dir string) ([]string, error) {
	var written []string
	for _, p := range r.paths() {
		dest := filepath.Join(dir, filepath.FromSlash(filepath.Clean("/"+p)))
		if err := r.Save(p, dest); err != nil {
			return written, err
		}
		written = append(written, dest)
	}
	return written, nil
}

// paths are the returned files' sandbox paths, sorted.
func (r Result) paths() []string {
	paths := make([]string, 0, len(r.Files))
	for p := range r.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}
