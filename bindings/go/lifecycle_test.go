// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStartStopLifecycle(t *testing.T) {
	log := testLogger(t)
	el := newElector(t, log, fileConfig(t, "", "n"), nil)
	if err := el.Stop(); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	start(t, el)
	if err := el.Start(context.Background()); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start: %v, want ErrAlreadyStarted", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = el.Stop()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Stop %d: %v", i, err)
		}
	}
	if err := el.Stop(); err != nil {
		t.Fatalf("Stop after Stop: %v", err)
	}
	if el.IsLeader() {
		t.Fatal("leader after Stop")
	}
	if err := el.Start(context.Background()); !isStopped(err) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}
}

// Stop called from inside a hook must not deadlock.
func TestStopFromHook(t *testing.T) {
	log := testLogger(t)
	var el *S3Elector
	var mu sync.Mutex
	cfg := fileConfig(t, "", "n")
	cfg.OnAcquireLeadership = func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return el.Stop()
	}
	mu.Lock()
	el = newElector(t, log, cfg, nil)
	mu.Unlock()
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := el.WaitForLeadership(ctx)
	if !isStopped(err) && err != nil {
		t.Fatalf("WaitForLeadership: %v, want ErrStopped (or nil if it won before the stop)", err)
	}
	waitUntil(t, 20*time.Second, "the stop requested from the hook completes", func() bool {
		return el.ev.snapshot().stopped
	})
}

// Panicking hooks are recovered: a panicking OnAcquireLeadership vetoes,
// a panicking OnLeaderChange is logged, and the process survives.
func TestHookPanicsAreRecovered(t *testing.T) {
	log := testLogger(t)
	lock := filepath.Join(t.TempDir(), "lock.json")
	pc := fileConfig(t, lock, "panicky")
	var tries sync.WaitGroup
	tries.Add(1)
	var once sync.Once
	pc.OnAcquireLeadership = func(ctx context.Context) error {
		once.Do(tries.Done)
		panic("boom")
	}
	pc.OnLeaderChange = func(string, string, int64) { panic("boom too") }
	p := newElector(t, log, pc, nil)
	start(t, p)
	tries.Wait()
	g := newElector(t, log, fileConfig(t, lock, "good"), nil)
	start(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.WaitForLeadership(ctx); err != nil {
		t.Fatalf("good elector did not lead: %v", err)
	}
	if p.IsLeader() {
		t.Fatal("elector whose acquire hook panicked is leader")
	}
}

func TestLeadershipStatusJSON(t *testing.T) {
	log := testLogger(t)
	el := newElector(t, log, fileConfig(t, "", "node-1"), nil)
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(must(json.Marshal(el.GetLeadershipStatus())), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"serverID", "lockfilePath", "isLeader", "leaderID", "leaderAddr",
		"leaderLastSeen", "lastElectionTime", "consecutiveFails", "term"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status JSON lacks the Go s3lect field %q: %v", k, m)
		}
	}
	if m["isLeader"] != true || m["leaderID"] != "node-1" || m["serverID"] != "node-1" || m["term"] != float64(el.Term()) {
		t.Fatalf("status JSON: %v", m)
	}
	raw, err := el.StatusJSON()
	if err != nil {
		t.Fatal(err)
	}
	var cm map[string]any
	if err := json.Unmarshal(raw, &cm); err != nil || cm["isLeader"] != true || cm["leaderID"] != "node-1" {
		t.Fatalf("StatusJSON: %s (%v)", raw, err)
	}
}

func TestVersionCheck(t *testing.T) {
	if LibraryVersion() != HeaderVersion {
		t.Errorf("loaded libs3lect %s, compiled against %s", LibraryVersion(), HeaderVersion)
	}
	for _, tc := range []struct {
		header, lib int
		ok          bool
	}{
		{100, 100, true}, {100, 101, true}, {101, 100, false}, {100, 200, false}, {100, 10100, false},
	} {
		err := checkVersion(tc.header, tc.lib)
		if (err == nil) != tc.ok {
			t.Errorf("checkVersion(%d, %d) = %v, want ok=%v", tc.header, tc.lib, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrVersionMismatch) {
			t.Errorf("checkVersion error %v is not ErrVersionMismatch", err)
		}
	}
}

// Electors that are dropped without being started, or after Stop, are
// freed by the garbage collector, and libs3lect releases every handle.
func TestDroppedElectorsAreFreed(t *testing.T) {
	log := testLogger(t)
	base := settledHandles()
	func() {
		for i := range 10 {
			cfg := fileConfig(t, "", "n")
			var st Storage
			if i%2 == 0 {
				st = newMemStore()
			}
			el, err := NewS3Elector(S3ElectorOptions{Config: cfg, Storage: st, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			if i < 3 {
				start(t, el)
				if err := el.Stop(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}()
	if liveHandles.Load() <= base {
		t.Fatalf("no handles registered (%d, base %d)", liveHandles.Load(), base)
	}
	waitUntil(t, 20*time.Second, "every handle is released", func() bool {
		runtime.GC()
		return liveHandles.Load() <= base
	})
}

// settledHandles collects what earlier tests dropped (finalizers run
// asynchronously) and returns the handle count once it stops changing.
func settledHandles() int64 {
	last, stable := int64(-1), 0
	for i := 0; i < 500 && stable < 5; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if n := liveHandles.Load(); n == last {
			stable++
		} else {
			last, stable = n, 0
		}
	}
	return last
}

// A started elector keeps leading even if the program drops its pointer.
func TestStartedElectorSurvivesGC(t *testing.T) {
	log := testLogger(t)
	lock := filepath.Join(t.TempDir(), "lock.json")
	func() {
		el, err := NewS3Elector(S3ElectorOptions{Config: fileConfig(t, lock, "dropped"), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		start(t, el)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := el.WaitForLeadership(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	t.Cleanup(func() {
		live.Range(func(k, _ any) bool {
			if el := k.(*S3Elector); el.GetConfig().ServerID == "dropped" {
				_ = el.Stop()
			}
			return true
		})
	})
	other := newElector(t, log, fileConfig(t, lock, "other"), nil)
	start(t, other)
	until := time.Now().Add(testLease + time.Second)
	for time.Now().Before(until) {
		runtime.GC()
		if other.IsLeader() {
			t.Fatal("the dropped elector was collected and its lease taken over")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if id := other.LeaderID(); id != "dropped" {
		t.Fatalf("leader is %q, want the dropped (but running) elector", id)
	}
}

// EnablePeerMode before Start turns peer mode on: Start then starts the
// leadership endpoint; hooks keep working.
func TestEnablePeerModeBeforeStart(t *testing.T) {
	log := testLogger(t)
	var acquired sync.WaitGroup
	acquired.Add(1)
	var once sync.Once
	p := newTestPKI(t)
	cfg := fileConfig(t, "", "n")
	cfg.ServerAddr = "127.0.0.1:9"
	cfg.PeerListen = "127.0.0.1:0"
	// Before Start the config is checked as with PeerMode on: a certificate
	// without its key is refused, no certificate is zero-config.
	halfCfg := fileConfig(t, "", "half")
	halfCfg.ServerAddr, halfCfg.PeerCert = "127.0.0.1:9", p.certPEM
	half := newElector(t, log, halfCfg, nil)
	if err := half.EnablePeerMode(p.caPEM); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "both PeerCert and PeerKey") {
		t.Fatalf("EnablePeerMode before Start with PeerCert but no PeerKey: %v", err)
	}
	if half.GetConfig().PeerMode {
		t.Fatal("a refused EnablePeerMode turned PeerMode on")
	}
	bareCfg := fileConfig(t, "", "bare")
	bareCfg.ServerAddr, bareCfg.PeerListen = "127.0.0.1:9", "127.0.0.1:0"
	bare := newElector(t, log, bareCfg, nil)
	if err := bare.EnablePeerMode(p.caPEM); err != nil {
		t.Fatalf("EnablePeerMode before Start without a certificate (zero-config): %v", err)
	}
	start(t, bare)
	waitUntil(t, 10*time.Second, "Start starts the zero-config endpoint", func() bool {
		return bare.PeerPort() != 0
	})
	cfg.PeerCert, cfg.PeerKey = p.certPEM, p.keyPEM
	cfg.OnAcquireLeadership = func(context.Context) error {
		once.Do(acquired.Done)
		return nil
	}
	el := newElector(t, log, cfg, nil)
	ca := p.caPEM
	if err := el.EnablePeerMode(ca); err != nil {
		t.Fatalf("EnablePeerMode before Start: %v", err)
	}
	if got := el.GetConfig(); !got.PeerMode || string(got.PeerCACert) != string(ca) {
		t.Fatalf("GetConfig after EnablePeerMode: PeerMode %v, PeerCACert %q", got.PeerMode, got.PeerCACert)
	}
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	acquired.Wait()
	if el.PeerPort() == 0 {
		t.Fatal("Start did not start the leadership endpoint after EnablePeerMode")
	}
}

// NewLockWait: by default (zero) an elector that has never seen the lock
// waits one LeaderTimeout before creating a missing one (it may have been
// deleted under a leader still running) and says why; a negative value
// creates it at once.
func TestNewLockWaitDefaultAndAtOnce(t *testing.T) {
	log := testLogger(t)
	cfg := fileConfig(t, "", "waits")
	cfg.NewLockWait = 0
	el := newElector(t, log, cfg, nil)
	began := time.Now()
	start(t, el)
	time.Sleep(testLease - 500*time.Millisecond)
	if el.IsLeader() {
		t.Fatalf("led %v after start: before NewLockWait (%v)", time.Since(began), testLease)
	}
	if st := el.GetLeadershipStatus(); !strings.Contains(st.LastError, "new_lock_wait") && !strings.Contains(st.LastError, "NewLockWait") {
		t.Errorf("the status does not say why it waits: %q", st.LastError)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < testLease-200*time.Millisecond {
		t.Fatalf("led %v after start, before NewLockWait", took)
	}

	cfg = fileConfig(t, "", "at-once")
	if cfg.NewLockWait >= 0 {
		t.Fatal("fileConfig creates at once")
	}
	el = newElector(t, log, cfg, nil)
	began = time.Now()
	start(t, el)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if err := el.WaitForLeadership(ctx2); err != nil {
		t.Fatalf("NewLockWait < 0: not leading %v after start: %v", time.Since(began), err)
	}
}
