// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
#include "trampolines.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Elector is the Go s3lect package's Elector interface, with the method set
// of its snapshot c45cfbd; *S3Elector implements it (and more:
// WaitForNextElection, Term, PeerResponse, ...), so a program's own Elector
// implementations written for Go s3lect still satisfy it.
type Elector interface {
	Start(ctx context.Context) error
	Stop() error
	IsLeader() bool
	WaitForLeadership(ctx context.Context) error
	LeaderID() string
	GetLeadershipStatus() *LeadershipStatus
	EnablePeerMode(caCert []byte) error
	UpdateConfig(newConfig ElectorConfig) error
	GetConfig() *ElectorConfig
}

// LeadershipStatus is a snapshot of an elector's view. The JSON tags of the
// first fields are those of the Go s3lect package; the rest are additions.
type LeadershipStatus struct {
	ServerID         string    `json:"serverID"`
	LockfilePath     string    `json:"lockfilePath"`
	IsLeader         bool      `json:"isLeader"`
	LeaderID         string    `json:"leaderID"`
	LeaderAddr       string    `json:"leaderAddr"`
	LeaderLastSeen   time.Time `json:"leaderLastSeen"`   // the lock record's lastUpdated
	LastElectionTime time.Time `json:"lastElectionTime"` // when this node last acquired
	ConsecutiveFails int       `json:"consecutiveFails"`

	// Term is the fencing token: it grows by one on every change of holder.
	Term int64 `json:"term"`
	// State is "leader", "follower", ... as named by libs3lect.
	State string `json:"state"`
	// ETag is the etag of the lock record as last seen.
	ETag string `json:"etag,omitempty"`
	// Cycle counts completed election cycles.
	Cycle uint64 `json:"cycle"`
	// LeaseRemainingMs is the lease left while leader, else 0.
	LeaseRemainingMs int64 `json:"leaseRemainingMs"`
	// LastError describes the last failed operation ("" after a success).
	LastError string `json:"lastError,omitempty"`
	// RecordCorrupt is true when the lock object is not a valid record.
	RecordCorrupt bool `json:"recordCorrupt,omitempty"`
}

// S3ElectorOptions are the arguments of NewS3Elector, as in the Go s3lect package.
type S3ElectorOptions struct {
	// Config is required. NewS3Elector fills in its zero fields with defaults.
	Config *ElectorConfig
	// Storage, optional, is a custom store used instead of the one
	// Config.LockfilePath names (S3 or file); LockfilePath is then its key.
	Storage Storage
	// Logger receives the elector's log records (default slog.Default()).
	Logger *slog.Logger
	// Clock, optional (tests), runs the elector in virtual time, driven by
	// Clock.Advance on the caller's goroutine, hooks included: only with a
	// "mem://NAME" lock and without peer mode (docs/testing-your-code.md;
	// the package s3lecttest).
	Clock *Clock
}

const (
	stateNew = iota
	stateStarted
	stateStopped
)

// S3Elector is a leader elector backed by libs3lect. Its methods are safe
// for concurrent use by multiple goroutines.
type S3Elector struct {
	storage Storage
	clock   *Clock
	logger  *slog.Logger
	ev      *events

	// hmu guards the C handle, freed by the finalizer. Readers hold it
	// during their C call.
	hmu sync.RWMutex
	c   *C.s3lect_elector

	mu     sync.Mutex // guards cfg and state; never held while waiting on libs3lect threads
	cfg    ElectorConfig
	state  int
	stopCh chan struct{} // closed once stopped
}

// live keeps started electors reachable: a running elector must not be
// garbage collected (and so stopped) because the program dropped its pointer.
var live sync.Map

// NewS3Elector validates the configuration and creates an elector. It does
// not contact the store; Start does.
func NewS3Elector(opts S3ElectorOptions) (*S3Elector, error) {
	if err := versionCheck(); err != nil {
		return nil, err
	}
	if opts.Config == nil {
		return nil, &Error{Code: CodeInvalid, Op: "NewS3Elector", Msg: "Config is required"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := opts.Config.fillDefaults(); err != nil {
		return nil, err
	}
	e := &S3Elector{
		storage: opts.Storage,
		clock:   opts.Clock,
		logger:  opts.Logger,
		ev:      newEvents(opts.Logger, hooksOf(opts.Config)),
		cfg:     *opts.Config,
		stopCh:  make(chan struct{}),
	}
	c, err := e.build(&e.cfg)
	if err != nil {
		return nil, err
	}
	e.c = c
	runtime.SetFinalizer(e, (*S3Elector).finalize)
	return e, nil
}

// build creates a C elector for cfg with the Go callbacks registered.
func (e *S3Elector) build(cfg *ElectorConfig) (*C.s3lect_elector, error) {
	var store *storeBinding
	if e.storage != nil {
		store = &storeBinding{s: e.storage}
	}
	cc, err := cfg.toC(store)
	if err != nil {
		return nil, err
	}
	defer C.s3lect_config_free(cc)
	if e.clock != nil { // the C elector takes its own reference to it
		e.clock.mu.RLock()
		h, err := e.clock.handle("NewS3Elector")
		if err == nil {
			C.s3lect_config_set_clock(cc, h)
		}
		defer e.clock.mu.RUnlock()
		if err != nil {
			return nil, err
		}
	}
	var c *C.s3lect_elector
	if rc := C.s3lect_new(cc, &c); rc != C.S3LECT_OK {
		msg := configErrmsg(cc)
		return nil, newError(rc, "config", msg)
	}
	// One handle per registration: libs3lect frees each userdata once.
	for _, t := range []C.s3lect_event_kind{C.S3LECT_EVENT_ACQUIRED, C.S3LECT_EVENT_LOST,
		C.S3LECT_EVENT_LEADER_CHANGED, C.S3LECT_EVENT_ERROR, C.S3LECT_EVENT_CYCLE,
		C.S3LECT_EVENT_TRANSFER} {
		if rc := C.gos3lect_set_callback(c, t, C.uintptr_t(newHandle(e.ev))); rc != C.S3LECT_OK {
			C.s3lect_free_elector(c)
			return nil, newError(rc, "NewS3Elector", "registering callbacks failed")
		}
	}
	if rc := C.gos3lect_set_acquire_hook(c, C.uintptr_t(newHandle(e.ev))); rc != C.S3LECT_OK {
		C.s3lect_free_elector(c)
		return nil, newError(rc, "NewS3Elector", "registering the acquire hook failed")
	}
	return c, nil
}

func (e *S3Elector) finalize() {
	e.hmu.Lock()
	defer e.hmu.Unlock()
	if e.c != nil {
		C.s3lect_free_elector(e.c)
		e.c = nil
	}
}

// Start starts the election in the background and returns at once. When
// ctx is cancelled the elector stops (as with Stop). An elector cannot be
// restarted after Stop; create a new one.
func (e *S3Elector) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.state {
	case stateStarted:
		return &Error{Code: CodeState, Op: "Start", Msg: "elector already started"}
	case stateStopped:
		return &Error{Code: CodeStopped, Op: "Start", Msg: "elector was stopped and cannot be restarted; create a new one"}
	}
	e.ev.setContext(ctx)
	e.hmu.RLock()
	rc := C.s3lect_start(e.c)
	msg := e.errmsgLocked()
	e.hmu.RUnlock()
	if rc != C.S3LECT_OK {
		return newError(rc, "Start", msg)
	}
	e.state = stateStarted
	live.Store(e, struct{}{})
	e.logger.Info("Starting leader election", "lockfilePath", e.cfg.LockfilePath,
		"serverID", e.cfg.ServerID, "serverAddr", e.cfg.ServerAddr)
	if done := ctx.Done(); done != nil {
		go func() {
			select {
			case <-done:
				_ = e.Stop()
			case <-e.stopCh:
			}
		}()
	}
	return nil
}

// Stop stops the elector. If it is leader, it stops being leader at once,
// releases the lock so that a follower can take over without waiting for
// the lease to expire, and runs OnLoseLeadership before Stop returns.
// Stop may be called any number of times, from any goroutine, and on an
// elector never started. Called from inside one of this elector's hooks, or
// from inside any elector's Storage method (libs3lect refuses to wait on a
// worker thread), it cannot wait: it then starts the stop on another
// goroutine and returns at once.
func (e *S3Elector) Stop() error {
	return e.stop(true)
}

// StopWithoutRelease stops like Stop but leaves the lock record as it is,
// so followers take over only when the lease expires, as after a crash.
// Meant for tests and failover drills.
func (e *S3Elector) StopWithoutRelease() error {
	return e.stop(false)
}

func (e *S3Elector) stop(release bool) error {
	e.mu.Lock()
	state := e.state
	e.mu.Unlock()
	if state != stateStarted {
		return nil
	}
	e.hmu.RLock()
	var rc C.int
	if release {
		rc = C.s3lect_stop(e.c)
	} else {
		rc = C.s3lect_stop_no_release(e.c)
	}
	msg := e.errmsgLocked()
	e.hmu.RUnlock()
	if rc == C.S3LECT_EBUSY {
		// Called from one of our own hooks (libs3lect would wait for the
		// very callback we are in) or from a Storage method (it could wait
		// for the worker running it). Stop from another goroutine instead.
		go func() { _ = e.stop(release) }()
		return nil
	}
	if rc != C.S3LECT_OK {
		return newError(rc, "Stop", msg)
	}
	e.mu.Lock()
	if e.state != stateStopped {
		e.state = stateStopped
		close(e.stopCh)
		live.Delete(e)
		e.logger.Info("Stopped leader election", "lockfilePath", e.cfg.LockfilePath)
	}
	e.mu.Unlock()
	e.ev.markStopped()
	return nil
}

// IsLeader reports whether this node holds a valid lease right now. It is
// computed by libs3lect at call time from the last successful renewal, so
// it turns false on its own when renewals stop succeeding.
func (e *S3Elector) IsLeader() bool {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	return C.s3lect_is_leader(e.c) != 0
}

// Term returns the highest term this node has observed or written. While
// IsLeader is true it is this leadership's fencing token: pass it to
// downstream systems so they can reject writes from an older leader.
func (e *S3Elector) Term() int64 {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	return int64(C.s3lect_term(e.c))
}

// LeaderID returns the current leader's ServerID, or "" if none is known.
func (e *S3Elector) LeaderID() string {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	buf := make([]C.char, 256)
	for {
		n := C.s3lect_leader_id(e.c, &buf[0], C.size_t(len(buf)))
		if int(n) < len(buf) {
			return C.GoStringN(&buf[0], C.int(n))
		}
		buf = make([]C.char, int(n)+1)
	}
}

// WaitForLeadership blocks until this node is leader (its
// OnAcquireLeadership hook, if any, has accepted) or ctx is done, as the Go
// s3lect package's does: it returns ctx.Err() itself on cancellation, and
// ErrStopped if the elector is or gets stopped. Any number of goroutines
// may wait at once.
//
// Like Go s3lect's, it keeps waiting whatever the store answers: a missing
// bucket or refused credentials do not end the wait (the elector keeps
// retrying, logs the error as a "Leader election error" warning and shows it
// in GetLeadershipStatus().LastError), so that a Go s3lect program's retry
// loop around it does not spin. WaitForLeadershipFailFast returns on such an
// error instead.
func (e *S3Elector) WaitForLeadership(ctx context.Context) error {
	return e.waitForLeadership(ctx, "WaitForLeadership", false)
}

// WaitForLeadershipFailFast is WaitForLeadership, except that it also
// returns at once, without waiting for ctx, while the store's last answer
// is a permanent error, one that retrying will not fix: a missing bucket or
// another misconfiguration (errors.Is(err, ErrStorageFatal), code
// CodeFatal) or refused credentials or permissions (errors.Is(err,
// ErrStorageAuth), code CodeAuth). The message is libs3lect's. The elector
// itself keeps running and retrying: once the problem is fixed (the bucket
// created, say) and a request succeeds, it waits again. A loop that calls it
// again on such an error must pause between calls, or it spins.
func (e *S3Elector) WaitForLeadershipFailFast(ctx context.Context) error {
	return e.waitForLeadership(ctx, "WaitForLeadershipFailFast", true)
}

func (e *S3Elector) waitForLeadership(ctx context.Context, op string, failFast bool) error {
	for {
		s := e.ev.snapshot()
		if s.acquired && e.IsLeader() {
			return nil
		}
		if s.stopped {
			return &Error{Code: CodeStopped, Op: op, Msg: "elector stopped while waiting for leadership"}
		}
		if failFast {
			if err := e.permanentError(op); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.changed:
		}
	}
}

// permanentError returns the store's last error if it is one that retrying
// will not fix (AUTH or FATAL), else nil.
func (e *S3Elector) permanentError(op string) error {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	var s *C.s3lect_status
	if C.s3lect_get_status(e.c, &s) != C.S3LECT_OK || s == nil {
		return nil
	}
	defer C.s3lect_status_free(s)
	code := C.s3lect_status_last_error(s)
	if code != C.S3LECT_EAUTH && code != C.S3LECT_EFATAL {
		return nil
	}
	return &Error{Code: Code(code), Op: op,
		Msg: C.GoString(C.s3lect_status_last_error_message(s))}
}

// WaitForNextElection blocks until an election cycle completes after since
// (for a zero since: until the first cycle completes), then returns the
// status. It returns ctx.Err() on cancellation and ErrStopped if the
// elector is or gets stopped first.
func (e *S3Elector) WaitForNextElection(ctx context.Context, since time.Time) (*LeadershipStatus, error) {
	for {
		s := e.ev.snapshot()
		if s.cycles > 0 && s.lastCycleAt.After(since) {
			return e.GetLeadershipStatus(), nil
		}
		if s.stopped {
			return nil, &Error{Code: CodeStopped, Op: "WaitForNextElection", Msg: "elector stopped while waiting for an election"}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.changed:
		}
	}
}

// GetLeadershipStatus returns a consistent snapshot of the elector's state.
func (e *S3Elector) GetLeadershipStatus() *LeadershipStatus {
	e.mu.Lock()
	lockfile, serverID := e.cfg.LockfilePath, e.cfg.ServerID
	e.mu.Unlock()
	st := &LeadershipStatus{LockfilePath: lockfile, ServerID: serverID}
	st.LastElectionTime = e.ev.snapshot().lastElection

	e.hmu.RLock()
	defer e.hmu.RUnlock()
	var s *C.s3lect_status
	if C.s3lect_get_status(e.c, &s) != C.S3LECT_OK || s == nil {
		st.IsLeader = C.s3lect_is_leader(e.c) != 0
		return st
	}
	defer C.s3lect_status_free(s)
	st.IsLeader = C.s3lect_status_is_leader(s) != 0
	st.LeaderID = C.GoString(C.s3lect_status_leader_id(s))
	st.LeaderAddr = C.GoString(C.s3lect_status_leader_addr(s))
	if lu := int64(C.s3lect_status_last_updated_ms(s)); lu != 0 {
		st.LeaderLastSeen = time.UnixMilli(lu)
	}
	st.ConsecutiveFails = int(C.s3lect_status_consecutive_failures(s))
	st.Term = int64(C.s3lect_status_term(s))
	st.State = C.GoString(C.s3lect_state_str(C.s3lect_status_state(s)))
	st.ETag = C.GoString(C.s3lect_status_etag(s))
	st.Cycle = uint64(C.s3lect_status_cycle(s))
	st.LeaseRemainingMs = int64(C.s3lect_status_lease_remaining_ms(s))
	if C.s3lect_status_last_error(s) != 0 {
		st.LastError = C.GoString(C.s3lect_status_last_error_message(s))
	}
	st.RecordCorrupt = C.s3lect_status_record_corrupt(s) != 0
	return st
}

// StatusJSON returns libs3lect's status document (isLeader, leaderID, term,
// etag, state, ...), for an application's own status pages. The peer
// leadership endpoint serves the lock record instead: see PeerResponse and
// NewLeadershipHandler.
func (e *S3Elector) StatusJSON() ([]byte, error) {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	var out *C.char
	if rc := C.s3lect_status_json(e.c, &out); rc != C.S3LECT_OK {
		return nil, newError(rc, "StatusJSON", e.errmsgLocked())
	}
	defer C.s3lect_free(unsafePointer(out))
	return []byte(C.GoString(out)), nil
}

// EnablePeerMode turns peer mode on, before or after Start, with the PEM CA
// bundle that verifies a leader's certificate: as a follower this node then
// asks the leader over HTTPS (a long poll) instead of reading the lock
// object while leadership is stable, and falls back to S3 on any failure (a
// leader whose record names its key, peerKeySha256, is pinned instead).
// ServerAddr must be set. On a running elector with PeerCert and PeerKey
// the built-in leadership endpoint starts too. Before Start the settings
// must make a valid peer-mode configuration, as PeerMode with this
// PeerCACert would in NewS3Elector: PeerCert and PeerKey (the endpoint
// serves them) or neither (zero-config: it serves a key made at Start).
//
// To turn peer mode on from the start, PeerMode: true alone is enough (see
// ElectorConfig.PeerMode); EnablePeerMode is for clusters with a CA of
// their own.
func (e *S3Elector) EnablePeerMode(caCert []byte) error {
	if len(caCert) == 0 {
		return &Error{Code: CodeInvalid, Op: "EnablePeerMode",
			Msg: "caCert is empty: pass the PEM CA bundle that verifies the leader's certificate"}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == stateNew {
		// Start takes the settings as they are: check them now.
		if err := e.checkPeerSettingsLocked(caCert); err != nil {
			return err
		}
	}
	e.hmu.RLock()
	rc := C.s3lect_enable_peer_mode(e.c, unsafe.Pointer(&caCert[0]), C.size_t(len(caCert)))
	msg := goFieldNames.Replace(e.errmsgLocked())
	e.hmu.RUnlock()
	if rc != C.S3LECT_OK {
		return newError(rc, "EnablePeerMode", msg)
	}
	e.cfg.PeerMode = true
	e.cfg.PeerCACert = append([]byte(nil), caCert...)
	e.logger.Info("Peer mode enabled", "serverAddr", e.cfg.ServerAddr, "peerPort", e.peerPortLocked())
	return nil
}

// checkPeerSettingsLocked validates the elector's configuration with
// PeerMode on and caCert as PeerCACert, as NewS3Elector would; e.mu must be
// held.
func (e *S3Elector) checkPeerSettingsLocked(caCert []byte) error {
	e.hmu.RLock()
	p := C.s3lect_get_config(e.c)
	e.hmu.RUnlock()
	if p == nil {
		return &Error{Code: CodeNoMemory, Op: "EnablePeerMode"}
	}
	defer C.s3lect_config_free(p)
	rc := C.s3lect_config_set_bool(p, C.S3LECT_OPT_PEER_MODE, 1)
	if rc == C.S3LECT_OK {
		rc = C.s3lect_config_set_bytes(p, C.S3LECT_OPT_PEER_CA, unsafe.Pointer(&caCert[0]),
			C.size_t(len(caCert)))
	}
	if rc == C.S3LECT_OK {
		rc = C.s3lect_config_validate(p)
	}
	if rc != C.S3LECT_OK {
		return newError(rc, "EnablePeerMode", configErrmsg(p))
	}
	return nil
}

// PeerPort returns the port the built-in leadership endpoint listens on, or
// 0 when it is not serving (not started, stopped, or no peer mode). With
// PeerListen "host:0" it is the port the system picked.
func (e *S3Elector) PeerPort() int {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	return e.peerPortLocked()
}

func (e *S3Elector) peerPortLocked() int {
	return int(C.s3lect_peer_port(e.c))
}

// PeerResponse answers one request to the leadership endpoint as the
// built-in server would, for an application that serves the endpoint from
// its own HTTP server (NewLeadershipHandler does this for net/http).
// method is "GET" or "HEAD"; target is the path and query, e.g.
// "/health/leadership?wait=5000&etag=%22...%22". status is 200 while this
// node leads (body: the lock record as JSON, with "etag" and "term"), 404
// when it does not lead or for another path, 405 for another method, 400 for
// a malformed target; body is always JSON. A long poll (wait and the current
// etag) blocks until the leader renews, leadership ends or wait passes; it
// cannot be cancelled. Do not call it from a hook.
func (e *S3Elector) PeerResponse(method, target string) (status int, body []byte, err error) {
	cm, ct := C.CString(method), C.CString(target)
	defer C.free(unsafe.Pointer(cm))
	defer C.free(unsafe.Pointer(ct))
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	var st C.int
	var out *C.char
	if rc := C.s3lect_peer_response(e.c, cm, ct, &st, &out); rc != C.S3LECT_OK {
		return 0, nil, newError(rc, "PeerResponse", e.errmsgLocked())
	}
	if out != nil {
		body = []byte(C.GoString(out))
		C.s3lect_free(unsafePointer(out))
	}
	return int(st), body, nil
}

// Transfer asks this leader to hand the lock to the follower whose ServerID
// is to ("": the best live follower, one of higher Priority first). It
// returns at once: the request travels in the lock record, the target
// confirms it is live, then OnTransfer(targetID, term) runs on this node:
// stop the leader work and call TransferCommit. A target that does not
// confirm within about a lease is refused: a "Leader election error" is
// logged saying why, and this node keeps leading.
//
// Errors: ErrNotLeader when this elector does not lead; ErrInvalidConfig
// for its own ServerID or a malformed one; CodeBusy while a transfer is
// being committed; CodeUnsupported on Route 53 (its reads may be stale).
func (e *S3Elector) Transfer(to string) error {
	ct := C.CString(to)
	defer C.free(unsafe.Pointer(ct))
	e.hmu.RLock()
	rc := C.s3lect_transfer(e.c, ct)
	msg := ""
	if rc != C.S3LECT_OK && rc != C.S3LECT_ENOTLEADER && rc != C.S3LECT_EBUSY {
		msg = e.errmsgLocked() // set by libs3lect for these
	}
	e.hmu.RUnlock()
	switch rc {
	case C.S3LECT_OK:
		return nil
	case C.S3LECT_ENOTLEADER:
		msg = "this node does not lead; only the leader can hand the lock over"
	case C.S3LECT_EBUSY:
		msg = "a transfer is being committed already"
	}
	return newError(rc, "Transfer", msg)
}

// TransferCommit hands the lock over after OnTransfer, once this node's
// leader work has stopped: the node stops leading at once
// (OnLoseLeadership, LostTransferred) and the target leads. It may be
// called from any goroutine, OnTransfer included. CodeInvalid when no
// confirmed transfer is pending (refused, abandoned, or leadership was
// lost meanwhile).
func (e *S3Elector) TransferCommit() error {
	e.hmu.RLock()
	rc := C.s3lect_transfer_commit(e.c)
	e.hmu.RUnlock()
	if rc != C.S3LECT_OK {
		return newError(rc, "TransferCommit",
			"no confirmed transfer is pending (refused or abandoned, or leadership was lost meanwhile)")
	}
	return nil
}

// UpdateConfig applies new timings (LeaderTimeout, RenewInterval,
// RenewDeadline, FrequentInterval, InfrequentInterval, MaxClockSkew,
// PeerTimeout, RequestTimeout) and hooks to a running or stopped elector,
// after validating them together (LeaderTimeout must stay at most
// MaxLeaseTimeout when that is set). Zero fields take their defaults. The
// lock, identity, MaxLeaseTimeout, runtime sizes (MaxConnections,
// WorkerThreads, CallbackThreads), S3 and peer settings cannot change:
// create a new elector.
func (e *S3Elector) UpdateConfig(newConfig ElectorConfig) error {
	if err := newConfig.fillDefaults(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f := e.cfg.immutableDiff(&newConfig); f != "" {
		return &Error{Code: CodeInvalid, Op: "UpdateConfig",
			Msg: "cannot change " + f + " of an existing elector; create a new elector"}
	}
	cc := &cconfig{p: C.s3lect_config_new()}
	if cc.p == nil {
		return &Error{Code: CodeNoMemory, Op: "UpdateConfig"}
	}
	defer C.s3lect_config_free(cc.p)
	cc.setTiming(&newConfig)
	if cc.err != nil {
		return cc.err
	}
	e.hmu.RLock()
	rc := C.s3lect_update_config(e.c, cc.p)
	msg := configErrmsg(cc.p)
	if msg == "" {
		msg = e.errmsgLocked()
	}
	e.hmu.RUnlock()
	if rc != C.S3LECT_OK {
		return newError(rc, "UpdateConfig", msg)
	}
	e.cfg = newConfig
	e.ev.setHooks(hooksOf(&newConfig))
	e.logger.Info("Configuration updated", "lockfilePath", newConfig.LockfilePath, "serverID", newConfig.ServerID)
	return nil
}

// GetConfig returns a copy of the configuration in effect, defaults filled in.
func (e *S3Elector) GetConfig() *ElectorConfig {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cfg
	for _, b := range []*[]byte{&c.PeerCACert, &c.PeerCert, &c.PeerKey, &c.PeerClientCert} {
		if *b != nil {
			*b = append([]byte(nil), *b...)
		}
	}
	return &c
}

// errmsgLocked returns the elector's last detailed error; hmu must be held.
func (e *S3Elector) errmsgLocked() string {
	var buf [1024]C.char
	C.s3lect_errmsg(e.c, &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

var _ Elector = (*S3Elector)(nil)
