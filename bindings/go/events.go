// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include "s3lect_go.h"
*/
import "C"

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
)

// LostReason says why this node stopped being leader. OnLoseLeadership
// reads it from its context with LostReasonFrom; it is also the "reason"
// attribute of the "Lost leadership" log record.
type LostReason string

const (
	// LostReleased: the lock was released (an explicit release or an
	// acquire-hook veto).
	LostReleased LostReason = "released"
	// LostLeaseExpired: renew_deadline passed with no renewal even tried:
	// the process was paused, suspended or starved.
	LostLeaseExpired LostReason = "lease_expired"
	// LostRace: another node wrote the record (a confirmed failed
	// condition, or the record vanished).
	LostRace LostReason = "lost_race"
	// LostHookFailed: OnAcquireLeadership vetoed.
	LostHookFailed LostReason = "hook_failed"
	// LostStopped: Stop, or the cancellation of Start's context.
	LostStopped LostReason = "stopped"
	// LostRenewTimeout: renewals were sent but none succeeded before
	// RenewDeadline: the store was slow, failing or unreachable.
	LostRenewTimeout LostReason = "renew_timeout"
	// LostTransferred: handed to another node (TransferCommit, after a
	// Transfer, `s3lect transfer`, a follower of higher Priority or MaxHold).
	LostTransferred LostReason = "transferred"
	// LostUnknown: a reason this package does not know (from a newer libs3lect).
	LostUnknown LostReason = "unknown"
)

// lostReasonOf maps libs3lect's reason codes; an unknown code is LostUnknown.
func lostReasonOf(r C.int) LostReason {
	switch r {
	case C.S3LECT_LOST_RELEASED:
		return LostReleased
	case C.S3LECT_LOST_LEASE_EXPIRED:
		return LostLeaseExpired
	case C.S3LECT_LOST_LOST_RACE:
		return LostRace
	case C.S3LECT_LOST_HOOK_FAILED:
		return LostHookFailed
	case C.S3LECT_LOST_STOPPED:
		return LostStopped
	case C.S3LECT_LOST_RENEW_TIMEOUT:
		return LostRenewTimeout
	case C.S3LECT_LOST_TRANSFERRED:
		return LostTransferred
	}
	return LostUnknown
}

type lostReasonKey struct{}

// LostReasonFrom returns the reason carried by the context that
// OnLoseLeadership receives; ok is false for any other context.
func LostReasonFrom(ctx context.Context) (reason LostReason, ok bool) {
	reason, ok = ctx.Value(lostReasonKey{}).(LostReason)
	return reason, ok
}

// liveHandles counts the cgo handles libs3lect holds, for leak tests.
var liveHandles atomic.Int64

// newHandle makes a handle that libs3lect will free with gos3lectFreeHandle.
func newHandle(v any) cgo.Handle {
	liveHandles.Add(1)
	return cgo.NewHandle(v)
}

// events is the Go state that libs3lect's callbacks reach through cgo
// handles. It must not refer to the S3Elector, so that an elector that is
// dropped unstarted or stopped can be garbage collected (the handles live in
// a global table until libs3lect frees them).
type events struct {
	logger *slog.Logger

	mu           sync.Mutex
	hooks        hooks
	ctx          context.Context // Start's context, for the hooks
	changed      chan struct{}   // closed and replaced on every change below
	acquired     bool            // between ACQUIRED and LOST
	stopped      bool
	lastElection time.Time // when this node last acquired (after the hook)
	lastCycleAt  time.Time // when the binding saw the last CYCLE event
	cycles       uint64
}

type hooks struct {
	onAcquire      func(context.Context) error
	onLose         func(context.Context) error
	onLeaderChange func(leaderID, leaderAddr string, term int64)
	onTransfer     func(targetID string, term int64)
}

func hooksOf(c *ElectorConfig) hooks {
	return hooks{c.OnAcquireLeadership, c.OnLoseLeadership, c.OnLeaderChange, c.OnTransfer}
}

func newEvents(logger *slog.Logger, h hooks) *events {
	return &events{logger: logger, hooks: h, ctx: context.Background(), changed: make(chan struct{})}
}

// broadcast wakes every waiter. Called with mu held.
func (ev *events) broadcast() {
	close(ev.changed)
	ev.changed = make(chan struct{})
}

func (ev *events) setHooks(h hooks) {
	ev.mu.Lock()
	ev.hooks = h
	ev.mu.Unlock()
}

func (ev *events) setContext(ctx context.Context) {
	ev.mu.Lock()
	ev.ctx = ctx
	ev.mu.Unlock()
}

func (ev *events) markStopped() {
	ev.mu.Lock()
	if !ev.stopped {
		ev.stopped = true
		ev.acquired = false
		ev.broadcast()
	}
	ev.mu.Unlock()
}

// snapshot returns the state and the channel that closes on its next change.
type eventState struct {
	changed      <-chan struct{}
	acquired     bool
	stopped      bool
	lastElection time.Time
	lastCycleAt  time.Time
	cycles       uint64
}

func (ev *events) snapshot() eventState {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return eventState{ev.changed, ev.acquired, ev.stopped, ev.lastElection, ev.lastCycleAt, ev.cycles}
}

func (ev *events) current() (hooks, context.Context) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.hooks, ev.ctx
}

// eventData is a copy of a C event (whose strings die with the callback).
type eventData struct {
	typ        C.int
	term       int64
	reason     C.int
	leaderID   string
	leaderAddr string
	code       C.int
	message    string
	cycle      uint64
}

func copyEvent(ev *C.s3lect_event) eventData {
	return eventData{
		typ:        C.s3lect_event_type(ev),
		term:       int64(C.s3lect_event_term(ev)),
		reason:     C.s3lect_event_reason(ev),
		leaderID:   C.GoString(C.s3lect_event_leader_id(ev)),
		leaderAddr: C.GoString(C.s3lect_event_leader_addr(ev)),
		code:       C.s3lect_event_code(ev),
		message:    C.GoString(C.s3lect_event_message(ev)),
		cycle:      uint64(C.s3lect_event_cycle(ev)),
	}
}

// handle delivers one event of elector c (valid during the call: libs3lect
// frees an elector only once its callbacks have returned).
func (ev *events) handle(c *C.s3lect_elector, d eventData) {
	switch d.typ {
	case C.S3LECT_EVENT_ACQUIRED:
		ev.mu.Lock()
		ev.acquired = true
		ev.lastElection = time.Now()
		ev.broadcast()
		ev.mu.Unlock()
		ev.logger.Info("Acquired leadership", "term", d.term)
	case C.S3LECT_EVENT_LOST:
		ev.mu.Lock()
		ev.acquired = false
		ev.broadcast()
		ev.mu.Unlock()
		reason := lostReasonOf(d.reason)
		ev.logger.Info("Lost leadership", "term", d.term, "reason", string(reason))
		h, ctx := ev.current()
		if h.onLose != nil {
			hctx := context.WithValue(context.WithoutCancel(ctx), lostReasonKey{}, reason)
			if err := ev.callHook("OnLoseLeadership", func() error { return h.onLose(hctx) }); err != nil {
				ev.logger.Warn("OnLoseLeadership hook failed", "error", err)
			}
		}
	case C.S3LECT_EVENT_LEADER_CHANGED:
		ev.logger.Info("Leader changed", "leaderID", d.leaderID, "leaderAddr", d.leaderAddr, "term", d.term)
		h, _ := ev.current()
		if h.onLeaderChange != nil {
			_ = ev.callHook("OnLeaderChange", func() error {
				h.onLeaderChange(d.leaderID, d.leaderAddr, d.term)
				return nil
			})
		}
		ev.mu.Lock()
		ev.broadcast()
		ev.mu.Unlock()
	case C.S3LECT_EVENT_ERROR:
		ev.logger.Warn("Leader election error", "code", Code(d.code).String(), "error", d.message)
		// Wake WaitForLeadershipFailFast, which returns on a permanent error.
		ev.mu.Lock()
		ev.broadcast()
		ev.mu.Unlock()
	case C.S3LECT_EVENT_TRANSFER:
		ev.logger.Info("Handing leadership over", "targetID", d.leaderID, "term", d.term)
		h, _ := ev.current()
		if h.onTransfer == nil {
			// Nothing stops the program's leader work before the target
			// starts: never hand over by itself (the transfer is abandoned
			// and this node keeps leading).
			ev.logger.Warn("Asked to hand leadership over, but no OnTransfer stops the leader "+
				"work first: not handed over (set OnTransfer and call TransferCommit in it)",
				"targetID", d.leaderID)
			break
		}
		_ = ev.callHook("OnTransfer", func() error {
			h.onTransfer(d.leaderID, d.term)
			return nil
		})
	case C.S3LECT_EVENT_CYCLE:
		ev.mu.Lock()
		ev.lastCycleAt = time.Now()
		ev.cycles = d.cycle
		ev.broadcast()
		ev.mu.Unlock()
	}
}

// callHook runs a user hook, turning a panic into an error so that it can
// never unwind into C.
func (ev *events) callHook(name string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", name, r)
			ev.logger.Error("hook panicked", "hook", name, "panic", r)
		}
	}()
	return f()
}

// acquire runs OnAcquireLeadership; a non-nil error vetoes the acquisition.
func (ev *events) acquire(term int64) error {
	h, ctx := ev.current()
	if h.onAcquire == nil {
		return nil
	}
	err := ev.callHook("OnAcquireLeadership", func() error { return h.onAcquire(ctx) })
	if err != nil {
		ev.logger.Error("OnAcquireLeadership hook failed, resigning leadership", "term", term, "error", err)
	}
	return err
}

//export gos3lectEvent
func gos3lectEvent(c *C.s3lect_elector, cev *C.s3lect_event, h C.uintptr_t) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("s3lect: event callback panicked", "panic", r)
		}
	}()
	cgo.Handle(h).Value().(*events).handle(c, copyEvent(cev))
}

//export gos3lectAcquire
func gos3lectAcquire(_ *C.s3lect_elector, cev *C.s3lect_event, h C.uintptr_t) (rc C.int) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("s3lect: acquire hook panicked", "panic", r)
			rc = 1
		}
	}()
	if cgo.Handle(h).Value().(*events).acquire(int64(C.s3lect_event_term(cev))) != nil {
		return 1
	}
	return 0
}

//export gos3lectFreeHandle
func gos3lectFreeHandle(h C.uintptr_t) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("s3lect: freeing a handle panicked", "panic", r)
		}
	}()
	cgo.Handle(h).Delete()
	liveHandles.Add(-1)
}
