//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"unicode/utf8"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// maxRequestBytes bounds a --request document, as the HTTP API bounds bodies.
const maxRequestBytes = 10 << 20

const execHelp = `usage: scratchrun exec --runtime RUNTIME (--code TEXT | FILE | -) [flags]
       scratchrun exec --request FILE|-

Runs code in a fresh sandbox and exits with its exit code; --request takes a
whole request JSON and prints the result JSON.

flags:
`

func cmdExec(args []string) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	var (
		runtimeName          = fs.String("runtime", "", "runtime to run the code with (see `scratchrun images list`)")
		code                 = fs.String("code", "", "program text (alternatively a file argument, or - for stdin)")
		request              = fs.String("request", "", "read a full request JSON from FILE (- for stdin) and print the result JSON")
		timeoutMS            = fs.Int("timeout-ms", 0, "wall-clock limit in ms, 1000 to 30000 (default: the operator's, 10000)")
		memoryMB             = fs.Int("memory-mb", 0, "memory limit in MB, 64 to 512 (default: the operator's, 256)")
		outDir               = fs.String("out", ".", "directory where returned files are written (by base name)")
		asJSON               = fs.Bool("json", false, "print the result JSON instead of the program's output")
		network              = fs.String("network", "", `"none" (loopback only) or "egress" (the internet; needs --allow-egress)`)
		envs, files, returns listFlag
	)
	fs.Var(&envs, "env", "NAME=value added to the sandbox's environment (repeatable)")
	fs.Var(&files, "file", "SANDBOX_PATH=@HOST_FILE or SANDBOX_PATH=text, written before the run (repeatable)")
	fs.Var(&returns, "return", "sandbox path to return after the run (repeatable)")
	set := withSettings(fs, execHelp, settings.Exec)
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	// A bad setting fails the engine as it did when the engine read
	// them: exit 1, and in the machine form an error document.
	v, err := set.Resolve(os.Getenv)
	var setup engineSetup
	if err == nil {
		setup, err = parseEngine(v, settings.Exec)
	}
	if err != nil && *request != "" {
		return printError(execapi.CodeInternal, err.Error(), exitInternal)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun: %v\n", err)
		return exitInternal
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *request != "" {
		if *runtimeName != "" || *code != "" || len(positional) > 0 || len(envs)+len(files)+len(returns) > 0 {
			return usageError("--request takes the whole request; do not combine it with other request flags")
		}
		return execRequestJSON(ctx, setup, *request)
	}

	// Omitting a limit flag takes the default; giving 0 is a value out of
	// range, as it is in the request JSON (execapi.Limits reads 0 as unset).
	var zeroLimit error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "timeout-ms" && *timeoutMS == 0:
			zeroLimit = execapi.ExplicitZero("limits.timeout_ms")
		case f.Name == "memory-mb" && *memoryMB == 0:
			zeroLimit = execapi.ExplicitZero("limits.memory_mb")
		}
	})
	if zeroLimit != nil {
		return reportExecError(zeroLimit)
	}
	req := execapi.Request{Runtime: *runtimeName, Code: *code,
		Limits: execapi.Limits{TimeoutMS: *timeoutMS, MemoryMB: *memoryMB}, ReturnFiles: returns, Network: *network}
	switch {
	case len(positional) > 1:
		return usageError(fmt.Sprintf("exec takes at most one program file, got %d: %q", len(positional), positional))
	case len(positional) == 1 && *code != "":
		return usageError("give the program either with --code or as a file argument, not both")
	case len(positional) == 1:
		data, err := readInput(positional[0])
		if err != nil {
			return usageError(err.Error())
		}
		req.Code = string(data)
	}
	if req.Env, err = parseEnv(envs); err != nil {
		return usageError(err.Error())
	}
	if req.Files, req.FilesBase64, err = parseFiles(files); err != nil {
		return usageError(err.Error())
	}

	eng, err := setup.open(newLogger(setup.debug))
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun: %v\n", err)
		return exitInternal
	}
	res, err := eng.Exec(ctx, req, nil)
	if cerr := eng.Close(); cerr != nil {
		fmt.Fprintf(os.Stderr, "scratchrun: warning: %v\n", cerr)
	}
	if err != nil {
		return reportExecError(err)
	}
	if *asJSON {
		return printJSON(res, 0)
	}
	return printHuman(res, *outDir)
}

func usageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun exec: %s\n", msg)
	return exitUsage
}

// reportExecError says why there is no result: bad input exits 2, anything
// else (a refusal in its own words, a failed sandbox) 1.
func reportExecError(err error) int {
	var refusal *execapi.Refusal
	switch {
	case execapi.IsValidation(err):
		fmt.Fprintf(os.Stderr, "scratchrun exec: invalid request: %v\n", err)
		return exitUsage
	case errors.As(err, &refusal):
		fmt.Fprintf(os.Stderr, "scratchrun exec: refused: %v\n", refusal)
		return exitInternal
	}
	fmt.Fprintf(os.Stderr, "scratchrun exec: %v\n", err)
	return exitInternal
}

func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, maxRequestBytes+1))
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

func parseEnv(list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, kv := range list {
		k, v, err := keyValue("env", kv)
		if err != nil {
			return nil, err
		}
		env[k] = v
	}
	return env, nil
}

// parseFiles reads --file flags; host files that are not UTF-8 travel base64.
func parseFiles(list []string) (text, binary map[string]string, err error) {
	for _, kv := range list {
		p, v, err := keyValue("file", kv)
		if err != nil {
			return nil, nil, err
		}
		data := []byte(v)
		if len(v) > 0 && v[0] == '@' {
			if data, err = os.ReadFile(v[1:]); err != nil {
				return nil, nil, fmt.Errorf("--file %s: %w", p, err)
			}
		}
		if utf8.Valid(data) {
			if text == nil {
				text = map[string]string{}
			}
			text[p] = string(data)
			continue
		}
		if binary == nil {
			binary = map[string]string{}
		}
		binary[p] = base64.StdEncoding.EncodeToString(data)
	}
	return text, binary, nil
}

// execRequestJSON is the machine form: request JSON in, result JSON out, and
// an {"error": ...} document (exit 2 or 1) when there is no result.
func execRequestJSON(ctx context.Context, setup engineSetup, source string) int {
	var in io.Reader = os.Stdin
	if source != "-" {
		f, err := os.Open(source)
		if err != nil {
			return printError(execapi.CodeInvalidRequest, fmt.Sprintf("request: %v", err), exitUsage)
		}
		defer f.Close()
		in = f
	}
	req, err := execapi.DecodeRequest(in, maxRequestBytes)
	if err != nil {
		return printError(execapi.CodeInvalidRequest, err.Error(), exitUsage)
	}
	eng, err := setup.open(newLogger(setup.debug))
	if err != nil {
		return printError(execapi.CodeInternal, err.Error(), exitInternal)
	}
	res, err := eng.Exec(ctx, req, nil)
	if cerr := eng.Close(); cerr != nil {
		fmt.Fprintf(os.Stderr, "scratchrun: warning: %v\n", cerr)
	}
	var refusal *execapi.Refusal
	switch {
	case execapi.IsValidation(err):
		return printError(execapi.CodeInvalidRequest, err.Error(), exitUsage)
	case errors.As(err, &refusal):
		return printError(refusal.Code(), refusal.Error(), exitInternal)
	case err != nil:
		return printError(execapi.CodeInternal, err.Error(), exitInternal)
	}
	return printJSON(res, 0)
}

func printJSON(v any, status int) int {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun: write result: %v\n", err)
		return exitInternal
	}
	return status
}

func printError(code, message string, status int) int {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	return printJSON(map[string]body{"error": {Code: code, Message: message}}, status)
}

// printHuman writes the program's output as it is, returned files into
// outDir, notes on stderr, and exits with the program's exit code.
func printHuman(res execapi.Result, outDir string) int {
	os.Stdout.WriteString(res.Stdout)
	os.Stderr.WriteString(res.Stderr)
	paths := make([]string, 0, len(res.Files))
	for p := range res.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	written := map[string]string{}
	for _, p := range paths {
		data, err := base64.StdEncoding.DecodeString(res.Files[p])
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun: returned file %s: %v\n", p, err)
			continue
		}
		name := filepath.Base(p)
		if other, clash := written[name]; clash {
			fmt.Fprintf(os.Stderr, "scratchrun: returned files %s and %s share a name; keeping the first\n", other, p)
			continue
		}
		target := filepath.Join(outDir, name)
		if err := os.WriteFile(target, data, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun: write %s: %v\n", target, err)
			continue
		}
		written[name] = p
		fmt.Fprintf(os.Stderr, "scratchrun: wrote %s (%d bytes) from %s\n", target, len(data), p)
	}
	if res.Note != "" {
		fmt.Fprintf(os.Stderr, "scratchrun: note: %s\n", res.Note)
	}
	if !res.StatePurged {
		fmt.Fprintln(os.Stderr, "scratchrun: warning: sandbox teardown could not be verified")
	}
	return res.ExitCode
}
