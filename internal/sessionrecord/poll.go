package sessionrecord

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/store"
)

// serverName is a row's server: the host and the process's instance name
// (hostside.InstanceName), so that a restart is told from a server that
// still runs beside it on the same machine.
func serverName(host, instance string) string { return host + "/" + instance }

// endRestarted ends the local rows (no worker) of this host's servers
// whose process no longer runs: their sessions died with it.
func (r *Recorder) endRestarted(ctx context.Context) error {
	open, err := r.rows.OpenCodeSessions(ctx, "", true)
	if err != nil {
		return err
	}
	dead := map[string]bool{}
	for _, row := range open {
		inst, ok := strings.CutPrefix(row.Server, r.cfg.Host+"/")
		if ok && row.Worker == "" && row.Server != r.server && !hostside.InstanceAlive(inst) {
			dead[row.Server] = true
		}
	}
	at := r.cfg.now()
	for server := range dead {
		n, err := r.rows.EndServerCodeSessions(ctx, server, "", string(execapi.EndServerRestart), at)
		if err != nil {
			return err
		}
		r.log.Info("sessions of a server that no longer runs marked ended", "server", server, "sessions", n)
	}
	return nil
}

// loop runs poll every Poll until ctx is done.
func (r *Recorder) loop(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.poll(ctx)
		}
	}
}

// poll ends the sessions the operator asked to end (this server's and,
// in a cluster, every worker's), and purges old tombstones.
func (r *Recorder) poll(ctx context.Context) {
	asked, err := r.rows.EndRequestedCodeSessions(ctx, r.server)
	if err != nil {
		r.log.Warn("read the operator's session end requests", "err", err)
	}
	if r.cfg.Cluster {
		theirs, err := r.rows.EndRequestedWorkerCodeSessions(ctx)
		if err != nil {
			r.log.Warn("read the operator's session end requests", "err", err)
		}
		for _, row := range theirs {
			if row.Server != r.server { // this server's are in asked
				asked = append(asked, row)
			}
		}
	}
	ids := idsByHash{r: r}
	for _, row := range asked {
		r.endAsked(ctx, row, &ids)
	}
	r.reconcile(ctx)
	if _, err := r.rows.PurgeCodeSessions(ctx, r.cfg.now().Add(-r.cfg.TombstoneAge)); err != nil {
		r.log.Warn("purge ended sessions' rows", "err", err)
	}
}

// idsByHash finds the ids of open sessions the Recorder did not open (a
// cluster's, opened through another front end) by their hash, in the
// wrapped service's listing of every session: the rows hold no ids, and
// the operator's end needs one. The listing is asked once per poll, and
// only when a row needs it.
type idsByHash struct {
	r      *Recorder
	listed bool
	ids    map[string]execapi.SessionRef
}

// find is the ref of the open session whose id hashes to hash.
func (l *idsByHash) find(ctx context.Context, hash string) (execapi.SessionRef, bool, error) {
	if !l.listed {
		all, err := l.r.admin.AllSessions(ctx)
		if err != nil {
			return execapi.SessionRef{}, false, err
		}
		l.listed, l.ids = true, make(map[string]execapi.SessionRef, len(all))
		for _, info := range all {
			l.ids[store.HashSessionID(info.ID)] = execapi.SessionRef{ID: info.ID, Worker: info.Worker}
		}
	}
	ref, ok := l.ids[hash]
	return ref, ok, nil
}

// endAsked ends one session the operator asked to end. A row whose
// session the Recorder does not hold ended unseen: it is marked ended all
// the same, so that the request is not read forever. In a cluster a row
// missing from the listing of every worker's is no proof: the listing
// leaves out a worker that did not answer, whose session would run on
// while its row said "ended by the operator"; the request stays pending
// for the next poll until the row is past its expiry (then its session
// has ended by its idle TTL or lifetime, wherever it was).
func (r *Recorder) endAsked(ctx context.Context, row store.CodeSession, ids *idsByHash) {
	r.mu.Lock()
	ref, held := r.refs[row.IDHash]
	r.mu.Unlock()
	if !held && r.cfg.Cluster && r.admin != nil && row.Worker != "" {
		var err error
		if ref, held, err = ids.find(ctx, row.IDHash); err != nil {
			r.log.Warn("list the sessions to end one the operator asked to end", "err", err)
			return
		}
		if !held && !r.cfg.now().After(row.Expires) {
			return
		}
		ref.Worker = row.Worker
	}
	if held {
		var err error
		end := execapi.SessionEnd{Reason: execapi.EndOperator}
		if r.admin != nil {
			end, err = r.admin.EndSession(ctx, ref)
		} else {
			// Without an operator's scope, the session is closed as its
			// owner would; the reason recorded is still the operator's.
			_, err = r.inner.CloseSession(execapi.WithCaller(ctx, row.Owner), ref)
			end.At = r.cfg.now()
		}
		var gone *execapi.SessionEndedError
		var lost *execapi.SessionLostError
		switch {
		case errors.As(err, &gone):
			end = gone.End
		case errors.As(err, &lost):
			r.markEnded(ctx, row.IDHash, reasonWorkerLost, r.cfg.now())
			return
		case err != nil && !errors.Is(err, execapi.ErrSessionNotFound):
			r.log.Warn("end a session the operator asked to end", "err", err)
			return
		}
		r.markEnded(ctx, row.IDHash, end.Reason, end.At)
		return
	}
	r.markEnded(ctx, row.IDHash, execapi.EndOperator, r.cfg.now())
}

// reconcile records the ends of sessions the wrapped service ended by
// itself (idle TTL, lifetime, memory) that no call has met since: the
// operator's listings would show them open otherwise. Each such session is
// asked for its end as its owner, which for an ended session is its
// tombstone's reason and changes nothing.
func (r *Recorder) reconcile(ctx context.Context) {
	if r.admin == nil {
		return
	}
	r.mu.Lock()
	held := make(map[string]execapi.SessionRef, len(r.refs))
	for h, ref := range r.refs {
		held[h] = ref
	}
	r.mu.Unlock()
	if len(held) == 0 {
		return
	}
	// Read after the snapshot: a session held then and absent now ended.
	live, err := r.admin.AllSessions(ctx)
	if err != nil {
		r.log.Warn("list the sessions to reconcile their rows", "err", err)
		return
	}
	for _, info := range live {
		delete(held, store.HashSessionID(info.ID))
	}
	for hash, ref := range held {
		row, err := r.rows.CodeSession(ctx, hash)
		if err != nil || !row.Open() {
			r.forget(hash)
			continue
		}
		// Missing from the listing is no proof of an end: a cluster's
		// listing leaves out a worker that did not answer in time. Ask
		// for this one session, which changes nothing: only an answer
		// that it ended (or is unknown, or lost) ends its row.
		if _, err := r.inner.Session(execapi.WithCaller(ctx, row.Owner), ref); err != nil {
			r.ended(ctx, row, err)
		}
	}
}
