// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Three electors on one S3 lock: exactly one leads, the others agree on
// who, and there are never two leaders at once.
func TestElectionAmongThree(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	key := uniqueKey(t)
	type seen struct {
		sync.Mutex
		leaderID string
		term     int64
	}
	var els []*S3Elector
	var views [3]seen
	for i := range 3 {
		cfg := s3Config(s, key, fmt.Sprintf("node-%d", i))
		v := &views[i]
		cfg.OnLeaderChange = func(id, addr string, term int64) {
			v.Lock()
			v.leaderID, v.term = id, term
			v.Unlock()
		}
		els = append(els, newElector(t, log, cfg, nil))
	}
	start(t, els...)

	leader := waitOneLeader(t, els, 30*time.Second)
	leaderID := leader.GetConfig().ServerID
	term := leader.Term()
	if term < 1 {
		t.Fatalf("leader %s has term %d, want >= 1", leaderID, term)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leader.WaitForLeadership(ctx); err != nil {
		t.Fatalf("WaitForLeadership on the leader: %v", err)
	}

	// Followers learn who leads, with the same term, through LeaderID and
	// OnLeaderChange.
	waitUntil(t, 15*time.Second, "every elector names "+leaderID+" as leader", func() bool {
		for i, el := range els {
			views[i].Lock()
			ok := el.LeaderID() == leaderID && views[i].leaderID == leaderID && views[i].term == term
			views[i].Unlock()
			if !ok {
				return false
			}
		}
		return true
	})

	// Watch for a few lease periods: the same single leader throughout.
	until := time.Now().Add(2 * testLease)
	for time.Now().Before(until) {
		ls := leaders(els)
		if len(ls) > 1 {
			t.Fatalf("two leaders at once: %v", ids(ls))
		}
		if len(ls) == 1 && ls[0] != leader {
			t.Fatalf("leadership moved from %s to %s without any failure", leaderID, ls[0].GetConfig().ServerID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !leader.IsLeader() {
		t.Fatalf("leader %s lost its lease with a healthy store: %+v", leaderID, leader.GetLeadershipStatus())
	}
	if got := leader.Term(); got != term {
		t.Fatalf("term changed from %d to %d without a change of leader", term, got)
	}
	st := leader.GetLeadershipStatus()
	if !st.IsLeader || st.LeaderID != leaderID || st.Term != term || st.LastElectionTime.IsZero() || st.State != "leader" {
		t.Fatalf("leader's status is inconsistent: %+v", st)
	}
}

// A leader that dies without releasing (kill -9) is replaced once its
// lease has expired, not before, with the next term.
func TestFailoverAfterCrash(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	key := uniqueKey(t)
	els := []*S3Elector{
		newElector(t, log, s3Config(s, key, "a"), nil),
		newElector(t, log, s3Config(s, key, "b"), nil),
	}
	start(t, els...)
	old := waitOneLeader(t, els, 30*time.Second)
	other := els[0]
	if other == old {
		other = els[1]
	}
	oldTerm := old.Term()
	// Let the follower see the current record so the crash is mid-lease.
	waitUntil(t, 10*time.Second, "the follower sees the leader", func() bool {
		return other.LeaderID() == old.GetConfig().ServerID
	})

	crashed := time.Now()
	if err := old.StopWithoutRelease(); err != nil {
		t.Fatalf("StopWithoutRelease: %v", err)
	}
	if old.IsLeader() {
		t.Fatal("a stopped elector still reports leadership")
	}
	waitUntil(t, 4*testLease+5*time.Second, "the follower takes over", other.IsLeader)
	took := time.Since(crashed)
	// The follower may have first seen the last record up to one renew
	// interval before the crash; it must still wait out the rest of the lease.
	if lower := testLease - testRenew - 500*time.Millisecond; took < lower {
		t.Fatalf("follower took over %v after the crash, before the lease (%v) could have expired", took, testLease)
	}
	if got := other.Term(); got != oldTerm+1 {
		t.Fatalf("new leader's term is %d, want %d (old term + 1)", got, oldTerm+1)
	}
	t.Logf("failover after crash took %v (lease %v)", took, testLease)
}

// Stop releases the lock: a follower takes over well before the lease
// would have expired, and the old leader's OnLoseLeadership runs before
// Stop returns.
func TestGracefulHandover(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	key := uniqueKey(t)
	var lost [2]atomic.Int32
	var els []*S3Elector
	for i, id := range []string{"a", "b"} {
		cfg := s3Config(s, key, id)
		cfg.LeaderTimeout = 6 * time.Second
		cfg.RenewDeadline = 4 * time.Second
		cfg.RenewInterval = time.Second
		n := &lost[i]
		cfg.OnLoseLeadership = func(ctx context.Context) error {
			n.Add(1)
			return nil
		}
		els = append(els, newElector(t, log, cfg, nil))
	}
	start(t, els...)
	old := waitOneLeader(t, els, 30*time.Second)
	oi, other := 0, els[1]
	if old == els[1] {
		oi, other = 1, els[0]
	}
	oldTerm := old.Term()
	waitUntil(t, 10*time.Second, "the follower sees the leader", func() bool {
		return other.LeaderID() == old.GetConfig().ServerID
	})

	stopped := time.Now()
	if err := old.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if lost[oi].Load() != 1 {
		t.Fatalf("OnLoseLeadership ran %d times by the time Stop returned, want 1", lost[oi].Load())
	}
	waitUntil(t, 20*time.Second, "the follower takes over", other.IsLeader)
	took := time.Since(stopped)
	if took >= 6*time.Second {
		t.Fatalf("handover took %v: as slow as a lease expiry, so the release did not work", took)
	}
	if got := other.Term(); got != oldTerm+1 {
		t.Fatalf("new leader's term is %d, want %d", got, oldTerm+1)
	}
	if st := old.GetLeadershipStatus(); st.IsLeader {
		t.Fatalf("stopped elector's status still says leader: %+v", st)
	}
	t.Logf("graceful handover took %v", took)
}

// An OnAcquireLeadership error vetoes: that node releases and the other
// node becomes leader; the vetoing node never reports leadership.
func TestAcquireHookVeto(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	key := uniqueKey(t)

	var vetoes, losses atomic.Int32
	vcfg := s3Config(s, key, "vetoer")
	vcfg.OnAcquireLeadership = func(ctx context.Context) error {
		vetoes.Add(1)
		return errors.New("not ready to lead")
	}
	vcfg.OnLoseLeadership = func(ctx context.Context) error {
		losses.Add(1)
		return nil
	}
	vetoer := newElector(t, log, vcfg, nil)
	start(t, vetoer)
	waitUntil(t, 20*time.Second, "the vetoing node acquires and vetoes", func() bool { return vetoes.Load() >= 1 })
	waitUntil(t, 10*time.Second, "OnLoseLeadership runs after the veto", func() bool { return losses.Load() >= 1 })

	var acquired atomic.Int32
	gcfg := s3Config(s, key, "good")
	gcfg.OnAcquireLeadership = func(ctx context.Context) error {
		acquired.Add(1)
		return nil
	}
	good := newElector(t, log, gcfg, nil)
	start(t, good)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := good.WaitForLeadership(ctx); err != nil {
		t.Fatalf("the non-vetoing node did not become leader: %v (status %+v)", err, good.GetLeadershipStatus())
	}
	if acquired.Load() < 1 {
		t.Fatal("WaitForLeadership returned before OnAcquireLeadership accepted")
	}
	if vetoer.IsLeader() {
		t.Fatal("the vetoing node reports leadership")
	}
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := vetoer.WaitForLeadership(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForLeadership on the vetoing node: %v, want context.DeadlineExceeded", err)
	}
	if st := vetoer.GetLeadershipStatus(); !st.LastElectionTime.IsZero() {
		t.Fatalf("vetoing node has a LastElectionTime: %+v", st)
	}
}

// WaitForLeadership honours cancellation and deadlines with many waiters,
// and wakes every waiter when leadership comes or the elector stops.
func TestWaitCancellation(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	key := uniqueKey(t)
	leader := newElector(t, log, s3Config(s, key, "leader"), nil)
	start(t, leader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := leader.WaitForLeadership(ctx); err != nil {
		t.Fatalf("first elector did not lead: %v", err)
	}
	follower := newElector(t, log, s3Config(s, key, "follower"), nil)
	start(t, follower)

	const n = 20
	run := func(ctxFor func(int) context.Context) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = follower.WaitForLeadership(ctxFor(i))
			}()
		}
		wg.Wait()
		return errs
	}

	// Deadlines.
	begin := time.Now()
	errs := run(func(int) context.Context {
		c, cl := context.WithTimeout(context.Background(), 200*time.Millisecond)
		t.Cleanup(cl)
		return c
	})
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter %d: %v, want context.DeadlineExceeded", i, err)
		}
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("waiters with a 200ms deadline returned after %v", d)
	}

	// Cancellation.
	c, cancelAll := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancelAll)
	begin = time.Now()
	errs = run(func(int) context.Context { return c })
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("waiter %d: %v, want context.Canceled", i, err)
		}
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("cancelled waiters returned after %v", d)
	}

	// Leadership arrives: every waiter returns nil.
	before := follower.GetLeadershipStatus().Cycle
	next, err := follower.WaitForNextElection(ctx, time.Now())
	if err != nil || next.Cycle <= before {
		t.Fatalf("WaitForNextElection: status %+v, err %v; want a cycle after %d", next, err, before)
	}
	time.AfterFunc(200*time.Millisecond, func() { _ = leader.Stop() })
	errs = run(func(int) context.Context { return ctx })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("waiter %d: %v, want nil after the leader stepped down", i, err)
		}
	}
	if !follower.IsLeader() {
		t.Fatal("waiters returned but the follower is not leader")
	}

	// Stop wakes waiters with ErrStopped.
	third := newElector(t, log, s3Config(s, key, "third"), nil)
	start(t, third)
	var wg sync.WaitGroup
	stopErrs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopErrs[i] = third.WaitForLeadership(ctx)
		}()
	}
	time.AfterFunc(200*time.Millisecond, func() { _ = third.Stop() })
	wg.Wait()
	for i, err := range stopErrs {
		if !isStopped(err) {
			t.Fatalf("waiter %d after Stop: %v, want ErrStopped", i, err)
		}
	}
	if _, err := third.WaitForNextElection(ctx, time.Now().Add(time.Hour)); !isStopped(err) {
		t.Fatalf("WaitForNextElection on a stopped elector: %v, want ErrStopped", err)
	}
}

// Cancelling Start's context stops the elector and releases the lock, so
// a follower takes over well before the lease would expire.
func TestStartContextCancelStops(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	key := uniqueKey(t)
	slow := func(id string) *ElectorConfig {
		cfg := s3Config(s, key, id)
		cfg.LeaderTimeout, cfg.RenewDeadline, cfg.RenewInterval = 6*time.Second, 4*time.Second, time.Second
		return cfg
	}
	a := newElector(t, log, slow("a"), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := a.WaitForLeadership(wctx); err != nil {
		t.Fatal(err)
	}
	b := newElector(t, log, slow("b"), nil)
	start(t, b)
	waitUntil(t, 10*time.Second, "b sees a", func() bool { return b.LeaderID() == "a" })

	cancelled := time.Now()
	cancel()
	if err := b.WaitForLeadership(wctx); err != nil {
		t.Fatalf("b did not take over after a's context was cancelled: %v", err)
	}
	if took := time.Since(cancelled); took >= 6*time.Second {
		t.Fatalf("takeover took %v, a lease expiry: cancelling the context did not release the lock", took)
	}
	if a.IsLeader() {
		t.Fatal("a still leads after its context was cancelled")
	}
	if err := a.WaitForLeadership(wctx); !isStopped(err) {
		t.Fatalf("after cancelling Start's context, a.WaitForLeadership: %v, want ErrStopped", err)
	}
}
