// SPDX-License-Identifier: Apache-2.0

package s3lecttest_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
	"github.com/s3lect/s3lect/bindings/go/s3lecttest"
)

// The README's ten-line test, as written there.
func TestJobRunsOnlyWhileLeading(t *testing.T) {
	clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
	var job atomic.Bool
	s3lecttest.Start(t, clock, &s3lect.ElectorConfig{LockfilePath: lock, ServerID: "a",
		LeaderTimeout: 300 * time.Millisecond, NewLockWait: -1,
		OnAcquireLeadership: func(context.Context) error { job.Store(true); return nil },
		OnLoseLeadership:    func(context.Context) error { job.Store(false); return nil }})
	s3lecttest.Advance(t, clock, 0) // leads at once
	if !job.Load() {
		t.Fatal("not running while leading")
	}
	s3lecttest.Outage(t, lock) // the store goes down
	s3lecttest.Advance(t, clock, 300*time.Millisecond)
	if job.Load() {
		t.Fatal("still running after losing the lease")
	}
	s3lecttest.Recover(t, lock) // and comes back
	s3lecttest.Advance(t, clock, 5*time.Second)
	if !job.Load() {
		t.Fatal("not leading again after the outage")
	}
}

type entry struct {
	at   time.Duration
	who  string
	what string
}

func config(lock, id string, clock *s3lect.Clock, log *[]entry, mu *sync.Mutex) *s3lect.ElectorConfig {
	note := func(what string) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			*log = append(*log, entry{clock.Now(), id, what})
			mu.Unlock()
			return nil
		}
	}
	return &s3lect.ElectorConfig{LockfilePath: lock, ServerID: id,
		LeaderTimeout: 300 * time.Millisecond, RenewInterval: 100 * time.Millisecond,
		RenewDeadline: 200 * time.Millisecond, FrequentInterval: 50 * time.Millisecond,
		InfrequentInterval: 150 * time.Millisecond, NewLockWait: -1,
		OnAcquireLeadership: note("acquired"), OnLoseLeadership: note("lost")}
}

func TestHandoverAndCrash(t *testing.T) {
	clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
	var mu sync.Mutex
	var log []entry
	a := s3lecttest.Start(t, clock, config(lock, "a", clock, &log, &mu))
	s3lecttest.Advance(t, clock, 0)
	if !a.IsLeader() || len(log) != 1 || log[0] != (entry{0, "a", "acquired"}) {
		t.Fatalf("a leads at 0: %v", log)
	}
	b := s3lecttest.Start(t, clock, config(lock, "b", clock, &log, &mu))
	for i := 0; i < 100; i++ {
		s3lecttest.Advance(t, clock, 100*time.Millisecond)
		if !a.IsLeader() || b.IsLeader() {
			t.Fatalf("a should lead alone at %v", clock.Now())
		}
	}
	t0 := clock.Now()
	if err := a.Stop(); err != nil || log[len(log)-1].what != "lost" || clock.Now() != t0 {
		t.Fatalf("stop releases at once, hooks run inside: %v %v", err, log)
	}
	for !b.IsLeader() && clock.Now() < t0+time.Second {
		s3lecttest.Advance(t, clock, 10*time.Millisecond)
	}
	if took := clock.Now() - t0; !b.IsLeader() || took > 200*time.Millisecond {
		t.Fatalf("b took over the released lock in %v", took)
	}
	c := s3lecttest.Start(t, clock, config(lock, "c", clock, &log, &mu))
	s3lecttest.Advance(t, clock, time.Second)
	t0 = clock.Now()
	if err := b.StopWithoutRelease(); err != nil {
		t.Fatal(err)
	}
	for !c.IsLeader() && clock.Now() < t0+2*time.Second {
		s3lecttest.Advance(t, clock, 5*time.Millisecond)
	}
	if took := clock.Now() - t0; !c.IsLeader() || took < 200*time.Millisecond || took > 750*time.Millisecond {
		t.Fatalf("c took over %v after the crash (the lease is 300ms)", took)
	}
}

func TestAdvanceFromAHookIsRefused(t *testing.T) {
	clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
	var got error
	cfg := &s3lect.ElectorConfig{LockfilePath: lock, ServerID: "a", LeaderTimeout: 300 * time.Millisecond,
		NewLockWait: -1, OnAcquireLeadership: func(context.Context) error {
			got = clock.Advance(time.Second)
			return nil
		}}
	s3lecttest.Start(t, clock, cfg)
	s3lecttest.Advance(t, clock, 0)
	var e *s3lect.Error
	if !errors.As(got, &e) || e.Code != s3lect.CodeBusy || clock.Now() != 0 {
		t.Fatalf("Advance from a hook: %v at %v", got, clock.Now())
	}
}

func run(t *testing.T) []entry {
	clock := s3lecttest.NewClock(t)
	lock := "mem://go-again"
	_ = s3lect.MemReset(lock)
	var mu sync.Mutex
	var log []entry
	els := make([]*s3lect.S3Elector, 3)
	for i := range els {
		els[i] = s3lecttest.Start(t, clock, config(lock, string(rune('a'+i)), clock, &log, &mu))
	}
	for step := 0; step < 600; step++ {
		s3lecttest.Advance(t, clock, 100*time.Millisecond)
		n := 0
		for _, e := range els {
			if e.IsLeader() {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d leaders at %v", n, clock.Now())
		}
		if step%50 == 49 {
			k := (step / 50) % 3
			if step%100 == 49 {
				_ = els[k].Stop()
			} else {
				_ = els[k].StopWithoutRelease()
			}
			els[k] = s3lecttest.Start(t, clock, config(lock, string(rune('a'+k))+"2", clock, &log, &mu))
		}
	}
	for _, e := range els {
		_ = e.Stop()
	}
	return log
}

func TestTheSameRunTwice(t *testing.T) {
	first, second := run(t), run(t)
	if len(first) < 8 || !reflect.DeepEqual(first, second) {
		t.Fatalf("two runs differ (%d and %d events)", len(first), len(second))
	}
}

func TestRefused(t *testing.T) {
	clock := s3lecttest.NewClock(t)
	_, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{Clock: clock,
		Config: &s3lect.ElectorConfig{LockfilePath: "file://" + t.TempDir() + "/lock.json", ServerID: "a"}})
	if !errors.Is(err, s3lect.ErrInvalidConfig) {
		t.Fatalf("a virtual clock on a file lock: %v", err)
	}
	if err := s3lect.MemFail("mem://x", -1); err == nil {
		t.Fatal("MemFail(-1) accepted")
	}
	closed := s3lect.NewClock(time.Time{})
	closed.Close()
	if err := closed.Advance(time.Second); err == nil {
		t.Fatal("Advance of a closed clock accepted")
	}
}
