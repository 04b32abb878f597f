// Package sessionrecord keeps the store's rows of code sessions
// (store.CodeSession) around any execapi.SessionService: a Recorder is a
// SessionService and SessionAdmin that records each session it opens or
// forks, fills SessionRef.Worker from the row before it calls the service
// it wraps (so that a cluster's front end can route by it), and marks the
// row ended when the session ends.
//
// The rows are what outlives the process that holds the sessions. After
// `scratchrun serve` restarts, the sessions are gone with the old process,
// but their rows say why: the new Recorder ends the rows of this machine's
// dead server instances (server_restart) at start, and the owner's next
// use of such an id is a *SessionEndedError with that reason, not "not
// found". Anyone else's use of an id is ErrSessionNotFound, whatever the
// row says, so that an id reveals nothing of sessions not the caller's.
// The operator's CLI (`scratchrun sessions end`) and console cannot reach
// the process that holds a session; they set the row's end_requested, and
// the Recorder's poll loop ends those sessions through the wrapped
// service's SessionAdmin.
//
// Over a cluster's front end (Config.Cluster) the rows name each
// session's worker and are every front end's: the poll loop also ends the
// requested rows other front ends opened, finding the id (which no row
// holds) by its hash in the workers' listing, and a session seen lost with
// its worker (*SessionLostError) ends its row as worker_lost, whose owner
// keeps hearing "lost with its worker".
//
// It must never store a session's id (only its hash: the id is the
// owner's capability), and never call the wrapped service for an id whose
// row is not the caller's.
package sessionrecord
