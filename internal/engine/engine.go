package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/engine/warm"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// codeDir is where the request's code is written inside the sandbox.
const codeDir = "/code"

// workDir is the program's working directory: writable, RAM-backed, so that
// relative paths in user code land somewhere return_files can name.
const workDir = "/tmp"

// basePath is the PATH every runtime starts with.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Engine runs requests in local sandboxes. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	store   Images
	backend sandbox.Backend
	// zygotes: Config.Zygote, and the backend makes them.
	zygotes bool
	adm     *admission.Controller
	// cpu samples the CPUs for admission (nil without a CPU condition).
	cpu  *admission.Sampler
	pool *pool
	// next holds callers' next sandboxes made from their zygotes.
	next *nextSandboxes
	log  *slog.Logger
	// background tracks slot deletions still running after their call.
	background sync.WaitGroup
	hostEnv    []string
	// sessions holds the open sessions (none when they are off).
	sessions *sessions
}

var _ execapi.Executor = (*Engine)(nil)

// busy reports whether there are at least as many calls in flight as CPUs:
// then a warm sandbox built now would take CPU time from them, and the pool
// builds it at background weight. With a core to spare it builds at the
// normal weight, so that it is ready for the next call sooner (back to back
// calls from one caller found the pool empty twice as often otherwise).
func (e *Engine) busy() bool { return e.adm.Running() >= runtime.NumCPU() }

// New makes an engine over an image store (an *images.Store in
// production) and a backend.
func New(cfg Config, store Images, backend sandbox.Backend) (*Engine, error) {
	if store == nil || backend == nil {
		return nil, errors.New("engine needs an image store and a backend")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy.AllowEgress && cfg.Network == nil {
		return nil, errors.New("engine: egress is allowed but no network policy manager is configured")
	}
	if cfg.Policy.NetworkDefault == execapi.NetworkEgress && !cfg.Policy.AllowEgress {
		return nil, errors.New("engine: the default network is egress but egress is not allowed")
	}
	e := &Engine{cfg: cfg, store: store, backend: backend, log: cfg.Logger}
	for _, name := range cfg.PassHostEnv {
		if v, ok := os.LookupEnv(name); ok {
			e.hostEnv = append(e.hostEnv, name+"="+v)
		}
	}
	e.adm = admission.New(cfg.Admission, e.gauges())
	if cfg.Zygote {
		if zm, ok := sandbox.BackendAs[sandbox.ZygoteMaker](backend); ok && zm.MakesZygotes() {
			e.zygotes = true
		} else {
			e.log.Warn("zygotes are on, but this backend makes none: Python calls use the warm pool", "backend", backend.Name())
		}
	}
	e.pool = newPool(e, cfg.Pool)
	e.next = newNextSandboxes(e, cfg.Pool)
	e.sessions = newSessions(e, cfg.Sessions)
	return e, nil
}

// gauges measures the machine for admission: the memory under the
// backend's cgroup parent, which gets the budget as its limit (without a
// backend that has one, or a memory controller, there is no memory
// condition), and the CPUs' pressure.
func (e *Engine) gauges() admission.Gauges {
	s := e.cfg.Admission
	var g admission.Gauges
	if s.MemoryBudget > 0 {
		mb, ok := sandbox.BackendAs[sandbox.MemoryBudget](e.backend)
		applied := false
		if ok {
			var err error
			if applied, err = mb.SetMemoryBudget(s.MemoryBudget); err != nil {
				// Usage above the new limit (v1 refuses to lower it then):
				// admission still holds calls to the budget.
				e.log.Warn("the sandboxes' cgroup parent keeps its memory limit", "budget_mib", s.MemoryBudget>>20, "err", err)
			}
		}
		if applied {
			g.Memory = mb.MemoryInUse
			// Sandboxes made ahead give back first (callers' next ones,
			// then the warm pool's: idle by definition), then idle
			// sessions.
			g.Reclaim = func(need int64) {
				freed := e.next.reclaim(need)
				if freed < need {
					freed += e.pool.reclaim(need - freed)
				}
				if freed < need {
					e.sessions.evict(need - freed)
				}
			}
		} else {
			e.log.Warn("no memory budget: this backend cannot measure its sandboxes' memory together", "backend", e.backend.Name())
		}
	}
	if s.CPUThreshold > 0 {
		e.cpu = admission.NewSampler(0, 0)
		g.CPU, g.CPUKind = e.cpu, e.cpu.Kind()
	}
	return g
}

// Close releases what the engine holds for its lifetime: the network policy
// (its table and ready slots) and the backend's cgroup parent. Runs must have
// finished.
func (e *Engine) Close() error {
	e.EndAllSessions(execapi.EndServerShutdown)
	e.pool.close()
	e.next.close()
	e.background.Wait()
	if zm, ok := sandbox.BackendAs[sandbox.ZygoteMaker](e.backend); ok && e.zygotes {
		zm.RetireZygotes()
	}
	e.adm.Close()
	if e.cpu != nil {
		e.cpu.Close()
	}
	var errs []error
	if e.cfg.Network != nil {
		errs = append(errs, e.cfg.Network.Close())
	}
	errs = append(errs, e.backend.Close())
	return errors.Join(errs...)
}

// WaitWarm blocks until the warm pool holds its floor for every runtime it
// keeps, or timeout passes; it reports whether it got there.
func (e *Engine) WaitWarm(ctx context.Context, timeout time.Duration) bool {
	return e.pool.waitWarm(ctx, timeout)
}

// PoolStats reports how many warm sandboxes are ready, per pool key (every
// key the pool keeps, with 0 when none is ready).
func (e *Engine) PoolStats() map[execapi.PoolKey]int { return e.pool.stats() }

// PoolMemory reports, per pool key, the average memory
// a ready warm sandbox uses now (its cgroup's usage: init, the pre-started
// interpreter, the sandbox's file systems and kernel objects). Empty when
// the backend cannot tell.
func (e *Engine) PoolMemory() map[execapi.PoolKey]int64 { return e.pool.memory() }

// Capacity is the upper bound on calls running at once (the operator's,
// else admission.HardCapacity); admission usually stops well below it.
func (e *Engine) Capacity() int { return e.adm.Settings().Capacity }

// Admission reports how admission stands now: what it measures, what it
// would admit, what it refused (as Describe's Info.Admission, cheaply, for
// metrics).
func (e *Engine) Admission() execapi.AdmissionInfo { return e.adm.Info() }

// AdmissionController is the controller every call of this engine goes
// through, for benchmarks and diagnostics that measure admission itself
// (bench --admission-load): a ticket acquired from it takes room from the
// engine's calls until released.
func (e *Engine) AdmissionController() *admission.Controller { return e.adm }

// Backend is the isolation backend in use.
func (e *Engine) Backend() sandbox.Backend { return e.backend }

// Runtimes lists the runtimes this engine can run now.
func (e *Engine) Runtimes() []images.Runtime { return e.store.Installed() }

// Policy implements execapi.CheckedExecutor: what requests are validated
// against, and what a Checked given to ExecChecked must have passed.
func (e *Engine) Policy() execapi.Policy { return e.cfg.Policy }

// Exec implements execapi.Executor: it validates req and runs it.
func (e *Engine) Exec(ctx context.Context, req execapi.Request, events execapi.EventSink) (execapi.Result, error) {
	checked, err := e.cfg.Policy.Validate(req)
	if err != nil {
		return execapi.Result{}, err
	}
	return e.ExecChecked(ctx, checked, events)
}

// ExecChecked implements execapi.CheckedExecutor. A runtime this engine does
// not have is a *execapi.Refusal (RefusedUnknownRuntime), before the call
// waits for anything. The call then goes through admission (Config.Admission):
// it starts when the machine has room for it, or waits in the fair queue
// for the caller (execapi.CallerFrom), and is refused with a
// *execapi.Refusal when it waited in vain.
func (e *Engine) ExecChecked(ctx context.Context, checked execapi.Checked, events execapi.EventSink) (execapi.Result, error) {
	received := time.Now()
	resolved, err := e.store.Resolve(checked.Runtime)
	if err != nil {
		return execapi.Result{}, &execapi.Refusal{Reason: execapi.RefusedUnknownRuntime, Field: "runtime", Detail: err.Error()}
	}
	ticket, err := e.adm.Acquire(ctx, execapi.CallerFrom(ctx), checked.Timeout)
	if err != nil {
		var refusal *execapi.Refusal
		if errors.As(err, &refusal) {
			return execapi.Result{}, err
		}
		return execapi.Result{}, fmt.Errorf("waiting for room to start a sandbox: %w", err)
	}
	// Released on every way out: a result, an error, a cancelled call.
	admitted := time.Now()
	ran := time.Duration(0)
	defer func() { ticket.Release(ran) }()

	var emitMu sync.Mutex
	emit := func(kind execapi.EventKind, data []byte) {
		if events == nil {
			return
		}
		emitMu.Lock()
		defer emitMu.Unlock()
		events(execapi.Event{Kind: kind, Data: data, Elapsed: time.Since(received)})
	}
	emit(execapi.EventAdmitted, nil)
	res, err := e.run(ctx, checked, resolved, ticket, emit)
	if err == nil {
		ran = time.Since(admitted)
	}
	return res, err
}

func (e *Engine) run(ctx context.Context, c execapi.Checked, rt images.Resolved, ticket *admission.Ticket, emit func(execapi.EventKind, []byte)) (execapi.Result, error) {
	memory := int64(c.MemoryMB) << 20
	key := execapi.PoolKey{Runtime: rt.Runtime.Name, Network: c.Network, Variant: warmVariant(rt.Runtime, c.Code)}
	var l *leased
	fromZygote := e.zygoteServes(rt, key)
	if fromZygote {
		caller := execapi.CallerFrom(ctx)
		var ready bool
		if l, ready = e.next.take(ctx, caller, key); l == nil && poolKeepsWithZygotes(key) {
			// The caller's first call of key: its zygote starts for
			// the next while this one runs in the pool's sandbox.
			l = e.pool.take(key)
			defer e.pool.finished(key)
		}
		if l == nil {
			var err error
			if l, err = e.leaseZygote(ctx, rt, key, memory, caller); err != nil {
				return execapi.Result{}, err
			}
		}
		if !ready && !e.busy() {
			// Calls back to back (this one found no sandbox ready) and a
			// core free: the caller's next sandbox is made while this call
			// runs, not after it, or the next call would wait for it.
			// Calls with pauses between find theirs ready, and it is made
			// after the call, so as not to compete with it.
			e.next.makeNext(rt, key, caller)
		}
	} else {
		l = e.pool.take(key)
		defer e.pool.finished(key)
	}
	if l == nil {
		var err error
		if l, err = e.lease(ctx, rt, key, memory, false, false); err != nil {
			return execapi.Result{}, err
		}
	}
	// From here the sandbox exists: the gauges see it once it has run a
	// moment, and its own CPU count says whether it computes.
	var meter func() (time.Duration, bool)
	if m, ok := sandbox.SandboxAs[sandbox.CPUMeter](l.sb); ok {
		meter = m.CPUDemand
	}
	ticket.Started(meter)
	emit(execapi.EventStarted, nil)
	stdout := &cappedOutput{limit: e.cfg.OutputLimitBytes, kind: execapi.EventStdout, emit: emit}
	stderr := &cappedOutput{limit: e.cfg.OutputLimitBytes, kind: execapi.EventStderr, emit: emit}
	job := e.job(c, rt.Runtime, memory, stdout, stderr)

	outcome, runErr := l.sb.Run(ctx, job)
	if fromZygote {
		// Unless it was started above: now, so that it is made while this
		// sandbox is destroyed and the result travels back.
		e.next.makeNext(rt, key, execapi.CallerFrom(ctx))
	}
	if errors.Is(runErr, sandbox.ErrLimitBelowUsage) {
		// The warm sandbox already uses more than this job may: nothing ran,
		// so run the job in a fresh cold one instead.
		e.release(l)
		if l, runErr = e.lease(ctx, rt, key, memory, false, false); runErr != nil {
			return execapi.Result{}, runErr
		}
		outcome, runErr = l.sb.Run(ctx, job)
	}
	teardown := e.release(l)
	if runErr != nil {
		return execapi.Result{}, runErr
	}
	var alias *execapi.Alias
	if rt.Alias != "" {
		alias = &execapi.Alias{Requested: rt.Alias, Runtime: rt.Runtime.Name, Version: rt.Runtime.Version}
	}
	return e.result(c, outcome, teardown, stdout, stderr, alias), nil
}

// leased is a sandbox with what it holds: its network slot, if any.
type leased struct {
	sb   sandbox.Sandbox
	slot *netpolicy.Slot
	key  execapi.PoolKey
	// usage is the memory a warm sandbox used when it became ready.
	usage int64
}

// lease creates a sandbox for runtime rt; warm ones pre-start the runtime's
// interpreter (when it has a warm start) and are created with the maximum
// memory limit, lowered when a job arrives. background builds it at
// background CPU weight (see sandbox.Config).
func (e *Engine) lease(ctx context.Context, rt images.Resolved, key execapi.PoolKey, memory int64, prestart, background bool) (*leased, error) {
	cfg, err := e.sandboxConfig(rt, key, memory, prestart, background)
	if err != nil {
		return nil, err
	}
	return e.leaseWith(ctx, key, cfg, e.backend.Create)
}

// sandboxConfig is what lease creates a sandbox of rt with.
func (e *Engine) sandboxConfig(rt images.Resolved, key execapi.PoolKey, memory int64, prestart, background bool) (sandbox.Config, error) {
	cfg := sandbox.Config{
		Image:         sandbox.Image{RootFS: rt.RootFS, UIDBase: rt.UIDBase},
		MemoryBytes:   memory,
		MaxPids:       e.cfg.MaxPids,
		CPUs:          e.cfg.CPUs,
		WritableBytes: e.cfg.WritableBytes,
		TmpBytes:      e.cfg.TmpBytes,
		MaxInodes:     e.cfg.MaxInodes,
		Warm:          prestart,
		Background:    background,
	}
	if prestart && rt.Runtime.Warm != "" {
		argv, err := warm.Command(rt.Runtime.Warm, rt.Runtime.WarmCommand)
		if err != nil {
			return sandbox.Config{}, err
		}
		env := append(e.environment(nil, rt.Runtime), preloadEnv(rt.Runtime, key)...)
		cfg.Prestart = &sandbox.Prestart{Argv: argv, Env: env, Dir: workDir}
	}
	return cfg, nil
}

// preloadEnv is what a warm interpreter of key's variant is told to
// import before its job (warm/python.py's _preload): the runtime's Preload
// for the heavy variant, nothing for the light one.
func preloadEnv(rt images.Runtime, key execapi.PoolKey) []string {
	if key.Variant != variantHeavy || len(rt.Preload) == 0 {
		return nil
	}
	return []string{"SCRATCHRUN_PRELOAD=" + strings.Join(rt.Preload, ",")}
}

// leaseWith creates a sandbox with cfg through create (the backend's
// Create, or a session's Fork), in an egress slot when key's network
// says so.
func (e *Engine) leaseWith(ctx context.Context, key execapi.PoolKey, cfg sandbox.Config, create func(context.Context, sandbox.Config) (sandbox.Sandbox, error)) (*leased, error) {
	l := &leased{key: key}
	if key.Network == execapi.NetworkEgress {
		slot, err := e.cfg.Network.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("network slot: %w", err)
		}
		l.slot = slot
		cfg.Network = &sandbox.Network{NetNSFD: slot.FD()}
		for _, d := range slot.DNS {
			cfg.Network.DNS = append(cfg.Network.DNS, d.String())
		}
	}
	sb, err := create(ctx, cfg)
	if err != nil {
		e.releaseSlot(l)
		return nil, err
	}
	l.sb = sb
	return l, nil
}

// release destroys a leased sandbox and frees its slot.
//
// The sandbox's own teardown (every process, mount and cgroup) is verified
// before this returns. Its network slot is detached by then too (no process
// is left in it to use it), but deleting the veth pair waits for the kernel's
// network stack to quiesce, tens of milliseconds, so it finishes in the
// background; the slot's addresses are not reused until it has.
func (e *Engine) release(l *leased) sandbox.Teardown {
	t := l.sb.Destroy()
	if !t.Purged {
		e.log.Error("sandbox teardown incomplete", "sandbox", l.sb.ID(), "err", t.Err)
	}
	if l.slot != nil {
		slot := l.slot
		l.slot = nil
		e.background.Add(1)
		go func() {
			defer e.background.Done()
			e.releaseSlot(&leased{slot: slot})
		}()
	}
	return t
}

func (e *Engine) releaseSlot(l *leased) {
	if l.slot == nil {
		return
	}
	if err := e.cfg.Network.Release(l.slot); err != nil {
		e.log.Error("releasing a network slot", "err", err)
	}
	l.slot = nil
}

// job turns a checked request into the backend's job: the code becomes a file
// in /code named as the runtime wants, and the command names it.
func (e *Engine) job(c execapi.Checked, rt images.Runtime, memory int64, stdout, stderr *cappedOutput) sandbox.Job {
	codePath := path.Join(codeDir, rt.File)
	argv := make([]string, len(rt.Command))
	for i, a := range rt.Command {
		argv[i] = strings.ReplaceAll(a, "{file}", codePath)
	}
	files := make([]sandbox.File, 0, len(c.Files)+1)
	for _, f := range c.Files {
		files = append(files, sandbox.File{Path: f.Path, Data: f.Data})
	}
	// Last, so that a file of the same path cannot replace the code.
	files = append(files, sandbox.File{Path: codePath, Data: []byte(c.Code)})
	return sandbox.Job{
		Argv:           argv,
		Env:            e.environment(c.Env, rt),
		Dir:            workDir,
		Files:          files,
		ReturnFiles:    c.ReturnFiles,
		MaxReturnBytes: e.cfg.MaxReturnBytes,
		Timeout:        c.Timeout,
		MemoryBytes:    memory,
		Stdout:         stdout,
		Stderr:         stderr,
	}
}

// environment layers, later winning: base, host pass-through, runtime,
// request (requestEnv may be nil: a warm interpreter starts without it).
func (e *Engine) environment(requestEnv map[string]string, rt images.Runtime) []string {
	env := map[string]string{
		"PATH": basePath, "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "HOSTNAME": "sandbox",
	}
	for _, kv := range e.hostEnv {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, v := range rt.Env {
		env[k] = v
	}
	for k, v := range requestEnv {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// result builds the Result from what the sandbox did: its facts, and from
// them (Result.Finish) the outcome and the note.
func (e *Engine) result(c execapi.Checked, o sandbox.Outcome, t sandbox.Teardown, stdout, stderr *cappedOutput, alias *execapi.Alias) execapi.Result {
	r := execapi.Result{
		ExitCode:    o.ExitCode,
		Stdout:      stdout.text(),
		Stderr:      stderr.text(),
		ExecutionMS: o.Duration.Milliseconds(),
		StatePurged: t.Purged,
		Files:       map[string]string{},
		Facts: execapi.Facts{
			Alias:            alias,
			TimeoutMS:        c.Timeout.Milliseconds(),
			MemoryMB:         c.MemoryMB,
			TimedOut:         o.TimedOut,
			MemoryLimitHit:   o.OOMKilled,
			MachineMemoryHit: o.MachineOOMKilled,
			ProcessLimit:     e.cfg.MaxPids,
			ProcessLimitHit:  o.PidsLimitHit,
			ForkFailures:     o.ForkFailures,
		},
	}
	if o.TimedOut {
		r.ExitCode = execapi.ExitTimeout
	}
	for _, out := range []*cappedOutput{stdout, stderr} {
		if cut, ok := out.cut(); ok {
			r.Facts.OutputCut = append(r.Facts.OutputCut, cut)
		}
	}
	r.Facts.NoSpace = e.noSpace(stdout, stderr)
	// Escaped here, once: an init composed these from paths the caller or
	// user code chose.
	for _, n := range o.Notes {
		r.Facts.SandboxNotes = append(r.Facts.SandboxNotes, execapi.EscapeNote(n))
	}
	for p, data := range o.Files {
		r.Files[p] = base64.StdEncoding.EncodeToString(data)
	}
	for _, p := range c.ReturnFiles {
		if _, ok := o.Files[p]; !ok {
			r.Facts.FilesNotReturned = append(r.Facts.FilesNotReturned, p)
		}
	}
	// Every result, not only the first: a caller must never read a run
	// that stayed under no memory limit as one that did.
	for _, l := range e.backend.UnenforcedLimits() {
		r.Facts.UnenforcedLimits = append(r.Facts.UnenforcedLimits, string(l))
	}
	r.Finish()
	return r
}
