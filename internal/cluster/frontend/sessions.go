package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// A session lives on one worker. Its open is placed as a call is (among
// the workers that hold sessions); every later operation goes to the
// worker its SessionRef names, by the same at-most-once protocol as a
// call, and never anywhere else: a worker that is gone (its registration
// deleted or expired, nobody listening, a new process of it) makes the
// operation's error a *execapi.SessionLostError, never a new session. A
// SessionRef without a worker is answered ErrSessionNotFound: the session
// rows in front of the front end always name one, and asking every worker
// would let a caller make the whole cluster look for ids.

// Bounds of session answers' JSON, whatever a worker sends.
const (
	// smallAnswerBytes: an info, an end, or nothing.
	smallAnswerBytes = 64 << 10
	// listAnswerBytes: one worker's sessions (its maximum of them, each
	// an info).
	listAnswerBytes = 4 << 20
)

// SessionPolicy implements execapi.SessionService: Config.Sessions.
func (f *Frontend) SessionPolicy() execapi.SessionPolicy { return f.cfg.Sessions }

// OpenSession implements execapi.SessionService: placed on a worker that
// holds sessions and offers the runtime, as Exec places a call. The info's
// Worker names that worker's process, for the rows that route the
// session's calls.
func (f *Frontend) OpenSession(ctx context.Context, c execapi.CheckedSession) (execapi.SessionInfo, error) {
	received := time.Now()
	parts, err := f.opParts(cluster.SessionOp{Open: &c})
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	var info execapi.SessionInfo
	err = f.place(ctx, received, c.Runtime, c.Network == execapi.NetworkEgress, true, func(w cluster.Registration) (string, error) {
		var a cluster.SessionAnswer
		spec := offerSpec{op: cluster.OpSessionOpen, runtime: c.Runtime, network: c.Network, resultLimit: smallAnswerBytes, decode: answer(&a)}
		instance, tryNext, err := f.offer(ctx, w, spec, parts, nil, received)
		if tryNext != "" || err != nil {
			return tryNext, err
		}
		if a.Info == nil {
			return "", &execapi.WorkerError{Worker: w.ID, Err: errors.New("its answer to an open holds no session")}
		}
		info = *a.Info
		info.Worker = cluster.SessionWorker(w.ID, instance)
		return "", nil
	})
	return info, err
}

// ExecInSession implements execapi.SessionService, with events streamed as
// a call's are.
func (f *Frontend) ExecInSession(ctx context.Context, ref execapi.SessionRef, c execapi.Checked, events execapi.EventSink) (execapi.SessionResult, error) {
	var a cluster.SessionAnswer
	w, err := f.onSession(ctx, ref, cluster.OpSessionExec, cluster.SessionOp{Session: ref.ID, Exec: &c}, events, &a, false)
	if err != nil {
		return execapi.SessionResult{}, err
	}
	if a.Result == nil {
		return execapi.SessionResult{}, &execapi.WorkerError{Worker: w, Err: errors.New("its answer to a call holds no result")}
	}
	res := *a.Result
	if res.Files == nil {
		res.Files = map[string]string{}
	}
	res.Worker = w
	return res, nil
}

// ReadSessionFile implements execapi.SessionService.
func (f *Frontend) ReadSessionFile(ctx context.Context, ref execapi.SessionRef, path string) ([]byte, error) {
	var a cluster.SessionAnswer
	_, err := f.onSession(ctx, ref, cluster.OpSessionGet, cluster.SessionOp{Session: ref.ID, Path: path}, nil, &a, false)
	if err != nil {
		return nil, err
	}
	if a.Data == nil {
		a.Data = []byte{}
	}
	return a.Data, nil
}

// WriteSessionFile implements execapi.SessionService: data is bounded by
// the front end's policy before it is sent.
func (f *Frontend) WriteSessionFile(ctx context.Context, ref execapi.SessionRef, path string, data []byte) error {
	if limit := f.cfg.Policy.MaxFileBytes; len(data) > limit {
		return &execapi.ValidationError{Field: "body", Message: fmt.Sprintf("is %d bytes; the limit is %d", len(data), limit)}
	}
	var a cluster.SessionAnswer
	_, err := f.onSession(ctx, ref, cluster.OpSessionPut, cluster.SessionOp{Session: ref.ID, Path: path, Data: data}, nil, &a, false)
	return err
}

// ForkSession implements execapi.SessionService: the copy stays on the
// parent's worker, which holds what it copies.
func (f *Frontend) ForkSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	var a cluster.SessionAnswer
	w, err := f.onSession(ctx, ref, cluster.OpSessionFork, cluster.SessionOp{Session: ref.ID}, nil, &a, false)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	if a.Info == nil {
		return execapi.SessionInfo{}, &execapi.WorkerError{Worker: w, Err: errors.New("its answer to a fork holds no session")}
	}
	info := *a.Info
	_, instance := cluster.ParseSessionWorker(ref.Worker)
	info.Worker = cluster.SessionWorker(w, instance)
	return info, nil
}

// Session implements execapi.SessionService: asked of the one worker
// that holds the session (a list would ask every one).
func (f *Frontend) Session(ctx context.Context, ref execapi.SessionRef) (execapi.SessionInfo, error) {
	var a cluster.SessionAnswer
	w, err := f.onSession(ctx, ref, cluster.OpSessionInfo, cluster.SessionOp{Session: ref.ID}, nil, &a, false)
	if err != nil {
		return execapi.SessionInfo{}, err
	}
	if a.Info == nil {
		return execapi.SessionInfo{}, &execapi.WorkerError{Worker: w, Err: errors.New("its answer to a look-up holds no session")}
	}
	info := *a.Info
	info.Worker = ref.Worker
	return info, nil
}

// CloseSession implements execapi.SessionService.
func (f *Frontend) CloseSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	return f.end(ctx, ref, cluster.OpSessionClose, false)
}

// EndSession implements execapi.SessionAdmin: ErrSessionNotFound for a
// session that already ended with its worker.
func (f *Frontend) EndSession(ctx context.Context, ref execapi.SessionRef) (execapi.SessionEnd, error) {
	end, err := f.end(ctx, ref, cluster.OpSessionEnd, true)
	if errors.As(err, new(*execapi.SessionEndedError)) {
		return execapi.SessionEnd{}, execapi.ErrSessionNotFound
	}
	return end, err
}

// end closes (or, for the operator, ends) a session.
func (f *Frontend) end(ctx context.Context, ref execapi.SessionRef, op string, admin bool) (execapi.SessionEnd, error) {
	var a cluster.SessionAnswer
	w, err := f.onSession(ctx, ref, op, cluster.SessionOp{Session: ref.ID}, nil, &a, admin)
	if err != nil {
		return execapi.SessionEnd{}, err
	}
	if a.End == nil {
		return execapi.SessionEnd{}, &execapi.WorkerError{Worker: w, Err: errors.New("its answer to a close holds no end")}
	}
	return *a.End, nil
}

// ListSessions implements execapi.SessionService: the caller's sessions on
// every live worker that holds sessions (the rows in front of the front
// end are the listing of record; a worker that does not answer is left
// out, and logged).
func (f *Frontend) ListSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return f.listAll(ctx, cluster.OpSessionList)
}

// AllSessions implements execapi.SessionAdmin: every caller's sessions on
// every live worker, their Owner set.
func (f *Frontend) AllSessions(ctx context.Context) ([]execapi.SessionInfo, error) {
	return f.listAll(ctx, cluster.OpSessionAll)
}

// listAll asks every live worker that holds sessions at once.
func (f *Frontend) listAll(ctx context.Context, op string) ([]execapi.SessionInfo, error) {
	received := time.Now()
	parts, err := f.opParts(cluster.SessionOp{})
	if err != nil {
		return nil, err
	}
	live := slices.DeleteFunc(f.live(), func(w cluster.Registration) bool { return !w.Sessions })
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := []execapi.SessionInfo{}
	for _, w := range live {
		wg.Go(func() {
			var a cluster.SessionAnswer
			spec := offerSpec{op: op, resultLimit: listAnswerBytes, decode: answer(&a)}
			instance, tryNext, err := f.offer(ctx, w, spec, parts, nil, received)
			if tryNext != "" || err != nil {
				f.log.Warn("a worker's sessions not listed", "worker", w.ID, "why", tryNext, "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range a.List {
				info := e.SessionInfo
				info.Worker = cluster.SessionWorker(w.ID, instance)
				if op == cluster.OpSessionAll {
					info.Owner = e.Owner
				}
				out = append(out, info)
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b execapi.SessionInfo) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// onSession runs one operation on the worker that holds ref's session,
// its answer decoded into a; worker is that worker's id. admin skips the
// caller's check of a session its worker ended.
func (f *Frontend) onSession(ctx context.Context, ref execapi.SessionRef, op string, sop cluster.SessionOp,
	events execapi.EventSink, a *cluster.SessionAnswer, admin bool) (worker string, err error) {
	received := time.Now()
	if !execapi.IsSessionID(ref.ID) {
		return "", execapi.ErrSessionNotFound
	}
	if end, ok := f.ended.lookup(ref.ID, execapi.CallerFrom(ctx), admin); ok {
		return "", &execapi.SessionEndedError{End: end}
	}
	id, instance := cluster.ParseSessionWorker(ref.Worker)
	if id == "" {
		return "", execapi.ErrSessionNotFound
	}
	w, ok := f.liveWorker(id)
	switch {
	case !ok:
		return id, &execapi.SessionLostError{Worker: id, Why: "its registration is gone or expired"}
	case instance != "" && w.Instance != instance:
		return id, &execapi.SessionLostError{Worker: id, Why: "it restarted (a new process holds none of the old one's sessions)"}
	}
	parts, err := f.opParts(sop)
	if err != nil {
		return id, err
	}
	spec := offerSpec{op: op, resultLimit: f.answerLimit(w, op, sop), decode: answer(a)}
	if sop.Exec != nil {
		spec.runtime, spec.network = sop.Exec.Runtime, sop.Exec.Network
	}
	answered, tryNext, err := f.offer(ctx, w, spec, parts, events, received)
	var lost *execapi.WorkerLostError
	switch {
	case tryNext == retryNoAnswer || tryNext == retryPublish:
		// Registered and live, but silent within the ready wait: busy or
		// slow, not gone. Nothing ran; calling it lost would end the
		// session's row for good while the session runs on.
		return id, &execapi.Refusal{Reason: execapi.RefusedSessionWorkerUnanswered, RetryAfter: f.t.ReadyWait}
	case tryNext != "" && err == nil:
		// Nothing ran, and no other worker holds the session.
		f.m.lost.Inc()
		return id, &execapi.SessionLostError{Worker: id, Why: "it did not take the operation: " + tryNext}
	case errors.As(err, &lost):
		return id, &execapi.SessionLostError{Worker: id, Why: lost.Why, MayHaveRun: op == cluster.OpSessionExec}
	case errors.Is(err, execapi.ErrSessionNotFound) && instance != "" && answered != "" && answered != instance:
		return id, &execapi.SessionLostError{Worker: id, Why: "a new process of it answered: it restarted"}
	}
	return id, err
}

// liveWorker is worker id's registration when it is live.
func (f *Frontend) liveWorker(id string) (cluster.Registration, bool) {
	for _, w := range f.live() {
		if w.ID == id {
			return w, true
		}
	}
	return cluster.Registration{}, false
}

// answerLimit bounds the answer to op on w: a call's result as a call's,
// a file as the most a read returns (base64 in JSON).
func (f *Frontend) answerLimit(w cluster.Registration, op string, sop cluster.SessionOp) int64 {
	switch op {
	case cluster.OpSessionExec:
		return f.resultLimit(w, execapi.Request{ReturnFiles: sop.Exec.ReturnFiles}) + smallAnswerBytes
	case cluster.OpSessionGet:
		ret := w.MaxReturnBytes
		if ret <= 0 {
			return f.cfg.MaxResultBytes
		}
		return min((ret+2)/3*4+smallAnswerBytes, f.cfg.MaxResultBytes)
	}
	return smallAnswerBytes
}

// opParts is a session operation's request in parts.
func (f *Frontend) opParts(op cluster.SessionOp) ([][]byte, error) {
	body, err := json.Marshal(op)
	if err != nil {
		return nil, fmt.Errorf("encode the session operation: %w", err)
	}
	return cluster.Split(body, cluster.PartSize(f.nc.MaxPayload())), nil
}

// answer decodes a session answer into a.
func answer(a *cluster.SessionAnswer) func([]byte) error {
	return func(data []byte) error { return json.Unmarshal(data, a) }
}
