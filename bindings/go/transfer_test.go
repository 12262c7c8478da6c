// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
	"github.com/s3lect/s3lect/bindings/go/s3lecttest"
)

// Transfer, Priority and MaxHold (issue 42 items 1, 2, 6) on a mem:// lock in
// virtual time: deterministic, no server, no real sleeping.

const xferLease = 300 * time.Millisecond

// xferNode is an elector on the shared clock with what its hooks and its
// log saw.
type xferNode struct {
	el        *s3lect.S3Elector
	mu        sync.Mutex
	acquired  int
	lost      []s3lect.LostReason
	transfers []string // OnTransfer's targets
	errors    []string // "Leader election error" log records
	warnings  []string // warnings naming OnTransfer: "message targetID=..."
}

func (n *xferNode) lostReasons() []s3lect.LostReason {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]s3lect.LostReason(nil), n.lost...)
}

// recorder is a slog handler that keeps the elector's error records and its
// warnings about OnTransfer.
type recorder struct{ n *xferNode }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r recorder) WithGroup(string) slog.Handler            { return r }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level == slog.LevelWarn && strings.Contains(rec.Message, "OnTransfer") {
		w := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "targetID" {
				w += " targetID=" + a.Value.String()
			}
			return true
		})
		r.n.mu.Lock()
		r.n.warnings = append(r.n.warnings, w)
		r.n.mu.Unlock()
		return nil
	}
	if rec.Message != "Leader election error" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			r.n.mu.Lock()
			r.n.errors = append(r.n.errors, a.Value.String())
			r.n.mu.Unlock()
		}
		return true
	})
	return nil
}

// startNode starts an elector named id on clock; commit says whether its
// OnTransfer commits at once (true), leaves it to the test (false), or
// whether it has no OnTransfer at all (nil: this node never hands over).
func startNode(t *testing.T, clock *s3lect.Clock, lock, id string, commit *bool,
	set func(*s3lect.ElectorConfig)) *xferNode {
	t.Helper()
	n := &xferNode{}
	cfg := &s3lect.ElectorConfig{LockfilePath: lock, ServerID: id,
		LeaderTimeout: xferLease, RenewInterval: 100 * time.Millisecond,
		RenewDeadline: 200 * time.Millisecond, FrequentInterval: 50 * time.Millisecond,
		InfrequentInterval: 150 * time.Millisecond, NewLockWait: -1,
		OnAcquireLeadership: func(context.Context) error {
			n.mu.Lock()
			n.acquired++
			n.mu.Unlock()
			return nil
		},
		OnLoseLeadership: func(ctx context.Context) error {
			r, _ := s3lect.LostReasonFrom(ctx)
			n.mu.Lock()
			n.lost = append(n.lost, r)
			n.mu.Unlock()
			return nil
		}}
	if commit != nil {
		cfg.OnTransfer = func(target string, term int64) {
			n.mu.Lock()
			n.transfers = append(n.transfers, target)
			n.mu.Unlock()
			if *commit {
				if err := n.el.TransferCommit(); err != nil {
					t.Errorf("%s: TransferCommit in OnTransfer: %v", id, err)
				}
			}
		}
	}
	if set != nil {
		set(cfg)
	}
	el, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{Config: cfg, Clock: clock,
		Logger: slog.New(recorder{n})})
	if err != nil {
		t.Fatal(err)
	}
	n.el = el
	if err := el.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = el.Stop() })
	return n
}

// advanceUntil advances in 10 ms steps until cond holds or limit passes,
// failing on two leaders at once; it returns the virtual time it took.
func advanceUntil(t *testing.T, clock *s3lect.Clock, cond func() bool, limit time.Duration,
	nodes ...*xferNode) time.Duration {
	t.Helper()
	t0 := clock.Now()
	for !cond() && clock.Now()-t0 < limit {
		s3lecttest.Advance(t, clock, 10*time.Millisecond)
		leaders := 0
		for _, n := range nodes {
			if n.el.IsLeader() {
				leaders++
			}
		}
		if leaders > 1 {
			t.Fatalf("two leaders at %v", clock.Now())
		}
	}
	return clock.Now() - t0
}

func never() bool { return false }

// twoNodes: a leads, b has followed it for a few leases.
func twoNodes(t *testing.T, commit *bool) (*s3lect.Clock, *xferNode, *xferNode) {
	clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
	a := startNode(t, clock, lock, "a", commit, nil)
	s3lecttest.Advance(t, clock, 0)
	b := startNode(t, clock, lock, "b", commit, nil)
	advanceUntil(t, clock, never, 4*xferLease, a, b)
	if !a.el.IsLeader() || b.el.IsLeader() {
		t.Fatal("a should lead and b follow")
	}
	return clock, a, b
}

func TestTransferToNamedFollower(t *testing.T) {
	yes := true
	clock, a, b := twoNodes(t, &yes)
	term := a.el.Term()
	if err := a.el.Transfer("b"); err != nil {
		t.Fatal(err)
	}
	took := advanceUntil(t, clock, b.el.IsLeader, 5*xferLease, a, b)
	if !b.el.IsLeader() || took > xferLease+200*time.Millisecond {
		t.Fatalf("b leads: %v, %v after the request", b.el.IsLeader(), took)
	}
	if got := a.lostReasons(); len(got) != 1 || got[0] != s3lect.LostTransferred {
		t.Errorf("a lost leadership as %v, want [transferred]", got)
	}
	if len(a.transfers) != 1 || a.transfers[0] != "b" {
		t.Errorf("OnTransfer targets %v, want [b]", a.transfers)
	}
	if b.el.Term() <= term {
		t.Errorf("b leads with term %d, not above a's %d", b.el.Term(), term)
	}
	advanceUntil(t, clock, never, 20*xferLease, a, b)
	if !b.el.IsLeader() || a.el.IsLeader() {
		t.Error("b should keep the lock")
	}
}

func TestTransferCommitLater(t *testing.T) {
	no := false
	clock, a, b := twoNodes(t, &no)
	if err := a.el.TransferCommit(); err == nil || !errors.Is(err, s3lect.ErrInvalidConfig) {
		t.Errorf("TransferCommit with nothing pending: %v, want CodeInvalid", err)
	}
	if err := a.el.Transfer(""); err != nil { // the best live follower: b
		t.Fatal(err)
	}
	advanceUntil(t, clock, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.transfers) > 0 },
		5*xferLease, a, b)
	s3lecttest.Advance(t, clock, 100*time.Millisecond)
	if !a.el.IsLeader() || b.el.IsLeader() || len(a.transfers) != 1 || a.transfers[0] != "b" {
		t.Fatalf("before the commit a should still lead (targets %v)", a.transfers)
	}
	if err := a.el.TransferCommit(); err != nil {
		t.Fatal(err)
	}
	took := advanceUntil(t, clock, b.el.IsLeader, 5*xferLease, a, b)
	if !b.el.IsLeader() || took > 100*time.Millisecond {
		t.Fatalf("b leads: %v, %v after the commit", b.el.IsLeader(), took)
	}
	if got := a.lostReasons(); len(got) != 1 || got[0] != s3lect.LostTransferred {
		t.Errorf("a lost leadership as %v, want [transferred]", got)
	}
}

func TestTransferRefused(t *testing.T) {
	yes := true
	clock, a, b := twoNodes(t, &yes)
	term := a.el.Term()
	if err := b.el.Transfer("a"); !errors.Is(err, s3lect.ErrNotLeader) {
		t.Errorf("Transfer on a follower: %v, want ErrNotLeader", err)
	}
	if err := a.el.Transfer("a"); !errors.Is(err, s3lect.ErrInvalidConfig) {
		t.Errorf("Transfer to itself: %v, want ErrInvalidConfig", err)
	}
	if err := a.el.Transfer("nobody"); err != nil {
		t.Fatal(err)
	}
	refused := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, e := range a.errors {
			if strings.Contains(e, "transfer refused") {
				return true
			}
		}
		return false
	}
	advanceUntil(t, clock, refused, 10*xferLease, a, b)
	if !refused() {
		t.Fatalf("no error refused the transfer to 'nobody' (errors %v)", a.errors)
	}
	advanceUntil(t, clock, never, 10*xferLease, a, b)
	if !a.el.IsLeader() || a.el.Term() != term || len(a.lostReasons()) != 0 || b.acquired != 0 {
		t.Errorf("a should keep leading with term %d (term %d, lost %v, b acquired %d)",
			term, a.el.Term(), a.lostReasons(), b.acquired)
	}
}

// Without OnTransfer nothing would stop a's leader work before b starts its
// own: a logs a warning, the transfer is abandoned after its commit window
// (2 × max(lease, LeaderHold)) and a keeps leading; b never leads.
func TestTransferWithoutOnTransferNeverHandsOver(t *testing.T) {
	clock, a, b := twoNodes(t, nil)
	cfg := a.el.GetConfig()
	window := cfg.LeaderTimeout
	if cfg.LeaderHold > window {
		window = cfg.LeaderHold
	}
	window *= 2
	term := a.el.Term()
	if err := a.el.Transfer("b"); err != nil {
		t.Fatal(err)
	}
	warned := func() int { a.mu.Lock(); defer a.mu.Unlock(); return len(a.warnings) }
	advanceUntil(t, clock, func() bool { return warned() > 0 }, 5*xferLease, a, b)
	if warned() != 1 {
		t.Fatalf("want one warning about OnTransfer once b confirmed, got %v", a.warnings)
	}
	w := a.warnings[0]
	if !strings.Contains(w, "not handed over") || !strings.HasSuffix(w, "targetID=b") {
		t.Errorf("the warning %q should say it was not handed over to b", w)
	}
	abandoned := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, e := range a.errors {
			if strings.Contains(e, "did not stop its leader work") {
				return true
			}
		}
		return false
	}
	// Through the commit window and past it: a leads at every step.
	t0 := clock.Now()
	for !abandoned() && clock.Now()-t0 < window+2*xferLease {
		s3lecttest.Advance(t, clock, 10*time.Millisecond)
		if !a.el.IsLeader() || b.el.IsLeader() {
			t.Fatalf("%v after the confirmation: a leads %v, b leads %v",
				clock.Now()-t0, a.el.IsLeader(), b.el.IsLeader())
		}
	}
	took := clock.Now() - t0
	if !abandoned() {
		t.Fatalf("the transfer was never abandoned (errors %v)", a.errors)
	}
	if took < window-10*time.Millisecond || took > window+200*time.Millisecond {
		t.Errorf("abandoned %v after the confirmation, window %v", took, window)
	}
	advanceUntil(t, clock, never, 10*xferLease, a, b)
	if !a.el.IsLeader() || a.el.Term() != term || len(a.lostReasons()) != 0 || b.el.IsLeader() {
		t.Errorf("a should keep leading with term %d (term %d, lost %v, b leads %v)",
			term, a.el.Term(), a.lostReasons(), b.el.IsLeader())
	}
	b.mu.Lock()
	if b.acquired != 0 {
		t.Errorf("b led %d times", b.acquired)
	}
	b.mu.Unlock()
	if warned() != 1 {
		t.Errorf("warnings %v, want one", a.warnings)
	}
}

func TestPriorityGetsTheLock(t *testing.T) {
	clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
	yes := true
	a := startNode(t, clock, lock, "a", &yes, nil) // OnTransfer commits
	advanceUntil(t, clock, never, 4*xferLease, a)
	b := startNode(t, clock, lock, "b", &yes, func(c *s3lect.ElectorConfig) { c.Priority = 10 })
	if got := b.el.GetConfig().Priority; got != 10 {
		t.Errorf("GetConfig().Priority = %d", got)
	}
	took := advanceUntil(t, clock, b.el.IsLeader, 10*xferLease, a, b)
	if !b.el.IsLeader() || took < xferLease || took > 3*xferLease {
		t.Fatalf("b (priority 10) leads: %v, %v after it started", b.el.IsLeader(), took)
	}
	advanceUntil(t, clock, never, 30*xferLease, a, b)
	if !b.el.IsLeader() {
		t.Error("b should keep the lock")
	}
	if got := a.lostReasons(); len(got) != 1 || got[0] != s3lect.LostTransferred {
		t.Errorf("a lost leadership as %v, want [transferred]", got)
	}
	if len(a.transfers) != 1 || a.transfers[0] != "b" {
		t.Errorf("a's OnTransfer targets %v, want [b]", a.transfers)
	}
	changed := *b.el.GetConfig()
	changed.Priority = 3
	if err := b.el.UpdateConfig(changed); err == nil || !strings.Contains(err.Error(), "Priority") {
		t.Errorf("UpdateConfig changing Priority: %v, want an error naming it", err)
	}
}

func TestMaxHoldRotates(t *testing.T) {
	clock, lock := s3lecttest.NewClock(t), s3lecttest.MemLock(t)
	hold := func(c *s3lect.ElectorConfig) { c.MaxHold = time.Second }
	yes := true
	a := startNode(t, clock, lock, "a", &yes, hold)
	s3lecttest.Advance(t, clock, 0)
	b := startNode(t, clock, lock, "b", &yes, hold)
	advanceUntil(t, clock, never, 10*time.Second, a, b)
	handed := 0
	for _, n := range []*xferNode{a, b} {
		for _, r := range n.lostReasons() {
			if r == s3lect.LostTransferred {
				handed++
			}
		}
	}
	if handed < 5 || handed > 11 {
		t.Errorf("%d transfers in 10 s of 1 s tenure, want about 8", handed)
	}
}
