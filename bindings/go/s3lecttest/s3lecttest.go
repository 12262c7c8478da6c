// SPDX-License-Identifier: Apache-2.0

// Package s3lecttest helps test leader logic deterministically and fast
// (docs/testing-your-code.md in the repository): electors on an in-memory
// "mem://" lock, run in virtual time by a s3lect.Clock on the test's own
// goroutine, hooks included, the same way every time; sub-second leases
// are fine.
//
//	func TestJobRunsOnlyWhileLeading(t *testing.T) {
//		clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
//		var job atomic.Bool
//		s3lecttest.Start(t, clock, &s3lect.ElectorConfig{LockfilePath: lock, ServerID: "a",
//			LeaderTimeout: 300 * time.Millisecond, NewLockWait: -1,
//			OnAcquireLeadership: func(context.Context) error { job.Store(true); return nil },
//			OnLoseLeadership:    func(context.Context) error { job.Store(false); return nil }})
//		s3lecttest.Advance(t, clock, 0)               // leads at once
//		if !job.Load() { t.Fatal("not running while leading") }
//		s3lecttest.Outage(t, lock)                    // the store goes down
//		s3lecttest.Advance(t, clock, 300*time.Millisecond)
//		if job.Load() { t.Fatal("still running after losing the lease") }
//	}
package s3lecttest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
)

// NewClock returns a virtual clock at 0, closed when the test ends.
func NewClock(tb testing.TB) *s3lect.Clock {
	tb.Helper()
	c := s3lect.NewClock(time.Time{})
	tb.Cleanup(c.Close)
	return c
}

var locks atomic.Int64

// MemLock returns a "mem://" lock URL no other lock of this process has
// used; its objects are dropped when the test ends.
func MemLock(tb testing.TB) string {
	tb.Helper()
	lock := fmt.Sprintf("mem://s3lecttest-%d", locks.Add(1))
	tb.Cleanup(func() { _ = s3lect.MemReset(lock) })
	return lock
}

// Start makes an elector of cfg on clock and starts it (its first step
// runs at the next Advance); it is stopped when the test ends.
func Start(tb testing.TB, clock *s3lect.Clock, cfg *s3lect.ElectorConfig) *s3lect.S3Elector {
	tb.Helper()
	e, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{Config: cfg, Clock: clock})
	if err != nil {
		tb.Fatalf("s3lecttest.Start: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		tb.Fatalf("s3lecttest.Start: %v", err)
	}
	tb.Cleanup(func() { _ = e.Stop() })
	return e
}

// Advance runs clock's electors through d of virtual time, failing the
// test on an error.
func Advance(tb testing.TB, clock *s3lect.Clock, d time.Duration) {
	tb.Helper()
	if err := clock.Advance(d); err != nil {
		tb.Fatalf("s3lecttest.Advance: %v", err)
	}
}

// Outage makes every request to lock's in-memory store fail, as a store
// outage does, until Recover (or the test's end).
func Outage(tb testing.TB, lock string) {
	tb.Helper()
	if err := s3lect.MemFail(lock, 1<<62); err != nil {
		tb.Fatalf("s3lecttest.Outage: %v", err)
	}
	tb.Cleanup(func() { _ = s3lect.MemFail(lock, 0) })
}

// Recover ends an Outage of lock's store.
func Recover(tb testing.TB, lock string) {
	tb.Helper()
	if err := s3lect.MemFail(lock, 0); err != nil {
		tb.Fatalf("s3lecttest.Recover: %v", err)
	}
}
