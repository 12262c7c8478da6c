// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Tests of the Go s3lect (c45cfbd) API that this package adds for drop-in
// use: MockStorage, LeaderRecord, NewLeadershipHandler(elector, logger),
// NewHealthServer, and WaitForLeadership(FailFast) on a permanent store error.

// Both kinds of MockStorage have S3's conditional-write semantics.
func TestMockStorageSemantics(t *testing.T) {
	dirStore, err := NewMockStorage(filepath.Join(t.TempDir(), "new", "dir"))
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*MockStorage{"memory": NewMock(), "zero": {}, "dir": dirStore} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, _, err := m.Get(ctx, "leader/a.json"); !errors.Is(err, ErrStorageNotFound) {
				t.Fatalf("Get of a missing key: %v, want ErrStorageNotFound", err)
			}
			if err := m.PutIfMatch(ctx, "leader/a.json", []byte("one"), `"nope"`); !errors.Is(err, ErrStoragePrecondition) {
				t.Fatalf("PutIfMatch with an etag on a missing key: %v, want ErrStoragePrecondition", err)
			}
			if err := m.PutIfMatch(ctx, "leader/a.json", []byte("one"), ""); err != nil {
				t.Fatalf("create: %v", err)
			}
			if err := m.PutIfMatch(ctx, "leader/a.json", []byte("two"), ""); !errors.Is(err, ErrStoragePrecondition) {
				t.Fatalf("create over an existing key: %v, want ErrStoragePrecondition", err)
			}
			data, e1, err := m.Get(ctx, "leader/a.json")
			if err != nil || string(data) != "one" || e1 == "" {
				t.Fatalf("Get: %q %q %v", data, e1, err)
			}
			e2, err := m.PutIfMatchETag(ctx, "leader/a.json", []byte("two"), e1)
			if err != nil || e2 == "" || e2 == e1 {
				t.Fatalf("PutIfMatchETag: etag %q (was %q), %v", e2, e1, err)
			}
			if err := m.PutIfMatch(ctx, "leader/a.json", []byte("three"), e1); !errors.Is(err, ErrStoragePrecondition) {
				t.Fatalf("PutIfMatch with a stale etag: %v, want ErrStoragePrecondition", err)
			}
			if data, e, err := m.Get(ctx, "leader/a.json"); err != nil || string(data) != "two" || e != e2 {
				t.Fatalf("Get after the stale write: %q %q %v; want \"two\" %q", data, e, err, e2)
			}
			if err := m.Cleanup(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := m.Get(ctx, "leader/a.json"); !errors.Is(err, ErrStorageNotFound) {
				t.Fatalf("Get after Cleanup: %v, want ErrStorageNotFound", err)
			}
		})
	}
	if _, _, err := dirStore.Get(context.Background(), "../escape"); !errors.Is(err, ErrStorageFatal) {
		t.Fatalf("a key outside the directory: %v, want ErrStorageFatal", err)
	}
}

// Concurrent creators of one key through several directory MockStorage
// values on one directory: exactly one wins.
func TestMockStorageDirectoryRace(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		m, err := NewMockStorage(dir)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := m.PutIfMatch(context.Background(), "k", []byte(fmt.Sprint(i)), "")
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrStoragePrecondition):
				t.Errorf("writer %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if w := wins.Load(); w != 1 {
		t.Fatalf("%d writers created the key, want exactly 1", w)
	}
}

// Electors sharing a MockStorage elect one leader, hand over on Stop, and
// the stored record decodes as a LeaderRecord.
func TestElectorsOnMockStorage(t *testing.T) {
	dirStore, err := NewMockStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*MockStorage{"memory": NewMock(), "dir": dirStore} {
		t.Run(name, func(t *testing.T) {
			log := testLogger(t)
			a := newElector(t, log, fileConfig(t, "leader/group.json", "a"), m)
			b := newElector(t, log, fileConfig(t, "leader/group.json", "b"), m)
			start(t, a, b)
			els := []*S3Elector{a, b}
			first := waitOneLeader(t, els, 20*time.Second)
			data, etag, err := m.Get(context.Background(), "leader/group.json")
			if err != nil {
				t.Fatal(err)
			}
			var rec LeaderRecord
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatalf("the record is not a LeaderRecord: %v: %s", err, data)
			}
			rec.Metadata.ETag = etag
			if rec.LeaderID != first.GetConfig().ServerID || rec.Released() || rec.Term < 1 || rec.LeaseMs != testLease.Milliseconds() {
				t.Fatalf("record %+v; leader is %s", rec, first.GetConfig().ServerID)
			}
			if err := first.Stop(); err != nil {
				t.Fatal(err)
			}
			second := waitOneLeader(t, els, 20*time.Second)
			if second == first {
				t.Fatal("the stopped elector still leads")
			}
		})
	}
}

// A Go s3lect resignation record (leaderID kept, zero lastUpdated) reads as
// released.
func TestLeaderRecordReleased(t *testing.T) {
	for _, tc := range []struct {
		json     string
		released bool
	}{
		{`{"leaderID":"a","leaderAddr":"10.0.0.1:8993","lastUpdated":"2025-06-01T10:00:00.123456789+02:00"}`, false},
		{`{"leaderID":"a","lastUpdated":"0001-01-01T00:00:00Z"}`, true},
		{`{"leaderID":"","lastUpdated":"2025-06-01T10:00:00Z","term":4}`, true},
	} {
		var r LeaderRecord
		if err := json.Unmarshal([]byte(tc.json), &r); err != nil {
			t.Fatal(err)
		}
		if r.Released() != tc.released {
			t.Errorf("%s: Released() = %v, want %v", tc.json, r.Released(), tc.released)
		}
	}
}

// fakeElector is a test double written against Go s3lect's Elector
// interface, as a user's own tests might have one.
type fakeElector struct {
	leader atomic.Bool
}

func (f *fakeElector) Start(context.Context) error                 { return nil }
func (f *fakeElector) Stop() error                                 { return nil }
func (f *fakeElector) IsLeader() bool                              { return f.leader.Load() }
func (f *fakeElector) WaitForLeadership(ctx context.Context) error { return nil }
func (f *fakeElector) LeaderID() string                            { return "fake" }
func (f *fakeElector) GetLeadershipStatus() *LeadershipStatus {
	return &LeadershipStatus{IsLeader: f.leader.Load(), LeaderID: "fake", LeaderAddr: "10.0.0.9:8993"}
}
func (f *fakeElector) EnablePeerMode([]byte) error                { return nil }
func (f *fakeElector) UpdateConfig(newConfig ElectorConfig) error { return nil }
func (f *fakeElector) GetConfig() *ElectorConfig                  { return &ElectorConfig{} }

// NewLeadershipHandler has Go s3lect's signature and serves an Elector that
// is not an *S3Elector as Go s3lect does.
func TestLeadershipHandlerForeignElector(t *testing.T) {
	var _ func(Elector, *slog.Logger) http.HandlerFunc = NewLeadershipHandler
	f := &fakeElector{}
	mux := http.NewServeMux()
	mux.HandleFunc("/health/leadership", NewLeadershipHandler(f, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := srv.Client()
	c.Timeout = 10 * time.Second
	u := srv.URL + healthPath
	if st, _, _, raw := get(t, c, "GET", u); st != http.StatusNotFound {
		t.Fatalf("not leader: %d %s, want 404", st, raw)
	}
	f.leader.Store(true)
	st, _, _, raw := get(t, c, "GET", u)
	var rec LeaderRecord
	if st != http.StatusOK || json.Unmarshal(raw, &rec) != nil || rec.LeaderID != "fake" ||
		rec.LeaderAddr != "10.0.0.9:8993" || rec.LastUpdated.IsZero() {
		t.Fatalf("leader: %d %s", st, raw)
	}
	if st, _, _, _ := get(t, c, "POST", u); st != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d, want 405", st)
	}
}

// NewHealthServer serves the endpoint over HTTPS for a running elector,
// refuses incomplete configurations and stops on Stop and on ctx.
func TestHealthServer(t *testing.T) {
	pki := newTestPKI(t)
	cert, err := tls.X509KeyPair(pki.certPEM, pki.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	log := testLogger(t)
	el := newElector(t, log, fileConfig(t, "", "hs"), nil)

	for _, bad := range []HealthServerConfig{
		{Certificate: cert, Elector: el},
		{BindAddress: "127.0.0.1:0", Certificate: cert},
		{BindAddress: "127.0.0.1:0", Elector: el},
	} {
		if _, err := NewHealthServer(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewHealthServer(%+v): %v, want ErrInvalidConfig", bad.BindAddress, err)
		}
	}

	hs, err := NewHealthServer(HealthServerConfig{BindAddress: "127.0.0.1:0", Certificate: cert, Elector: el, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := hs.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hs.Start(ctx); err == nil {
		t.Fatal("a second Start succeeded")
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.pool}}}
	defer c.CloseIdleConnections()
	u := "https://" + hs.Addr() + healthPath
	if st, _, _, raw := get(t, c, "GET", u); st != http.StatusNotFound {
		t.Fatalf("before the elector leads: %d %s", st, raw)
	}
	start(t, el)
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := el.WaitForLeadership(wctx); err != nil {
		t.Fatal(err)
	}
	if st, _, rec, raw := get(t, c, "GET", u); st != http.StatusOK || rec.LeaderID != "hs" || rec.ETag == "" {
		t.Fatalf("while leading: %d %s", st, raw)
	}
	if err := hs.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	if _, err := c.Get(u); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	if err := hs.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}

	// Cancelling Start's context stops the server too.
	hs2, err := NewHealthServer(HealthServerConfig{BindAddress: "127.0.0.1:0", Certificate: cert, Elector: el, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	if err := hs2.Start(ctx2); err != nil {
		t.Fatal(err)
	}
	addr := hs2.Addr()
	cancel2()
	waitUntil(t, 10*time.Second, "the health server stops on ctx", func() bool {
		c.CloseIdleConnections()
		resp, err := c.Get("https://" + addr + healthPath)
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	// A port in use is an error from Start, not only a log line.
	hs3, err := NewHealthServer(HealthServerConfig{BindAddress: hs.Addr(), Certificate: cert, Elector: el, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	busy, err := NewHealthServer(HealthServerConfig{BindAddress: "127.0.0.1:0", Certificate: cert, Elector: el, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := busy.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer busy.Stop(context.Background())
	hs3.cfg.BindAddress = busy.Addr()
	if err := hs3.Start(context.Background()); err == nil {
		hs3.Stop(context.Background())
		t.Fatalf("Start on %s, a port in use, succeeded", busy.Addr())
	}
}

// While the store fails permanently, WaitForLeadership waits for its
// context as Go s3lect's does (and returns ctx.Err() itself), whereas
// WaitForLeadershipFailFast returns at once; both lead once the store
// recovers.
func TestWaitForLeadershipPermanentError(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
		code     Code
	}{
		{"fatal", fmt.Errorf("NoSuchBucket: the bucket does not exist: %w", ErrStorageFatal), ErrStorageFatal, CodeFatal},
		{"auth", fmt.Errorf("InvalidAccessKeyId: %w", ErrStorageAuth), ErrStorageAuth, CodeAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testLogger(t)
			st := &switchStore{mem: newMemStore()}
			st.fail.Store(&tc.err)
			el := newElector(t, log, fileConfig(t, "k", "n"), st)
			start(t, el)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			begin := time.Now()
			err := el.WaitForLeadershipFailFast(ctx)
			took := time.Since(begin)
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code || !errors.Is(err, tc.sentinel) {
				t.Fatalf("WaitForLeadershipFailFast: %v (%T), want an *Error with code %v matching %v", err, err, tc.code, tc.sentinel)
			}
			if took > 15*time.Second {
				t.Fatalf("WaitForLeadershipFailFast took %v; it must not wait for the context", took)
			}
			// A second waiter, arriving after the error, returns too.
			if err := el.WaitForLeadershipFailFast(ctx); !errors.Is(err, tc.sentinel) {
				t.Fatalf("second WaitForLeadershipFailFast: %v", err)
			}
			// WaitForLeadership waits for its context whatever the store says.
			short, cancelShort := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancelShort()
			begin = time.Now()
			err = el.WaitForLeadership(short)
			if took := time.Since(begin); err != context.DeadlineExceeded || took < 1400*time.Millisecond {
				t.Fatalf("WaitForLeadership on a failing store: %v after %v, want context.DeadlineExceeded itself after 1.5s", err, took)
			}
			if msg := el.GetLeadershipStatus().LastError; !strings.Contains(msg, tc.err.Error()) {
				t.Fatalf("LastError %q does not carry the store's error %q", msg, tc.err)
			}
			// The store recovers: the elector was retrying all along, and a
			// WaitForLeadership begun while it failed returns leading.
			waited := make(chan error, 1)
			go func() { waited <- el.WaitForLeadership(ctx) }()
			time.Sleep(200 * time.Millisecond)
			st.fail.Store(nil)
			if err := <-waited; err != nil || !el.IsLeader() {
				t.Fatalf("WaitForLeadership across the store's recovery: %v (leader: %v)", err, el.IsLeader())
			}
			if err := el.WaitForLeadershipFailFast(ctx); err != nil {
				t.Fatalf("WaitForLeadershipFailFast after the store recovered: %v", err)
			}
		})
	}
}

// A file lock whose directory vanished after NewS3Elector is a permanent
// error too.
func TestWaitForLeadershipFileStoreFatal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := testLogger(t)
	el := newElector(t, log, fileConfig(t, filepath.Join(dir, "lock.json"), "n"), nil)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := el.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	begin := time.Now()
	err := el.WaitForLeadershipFailFast(ctx)
	if !errors.Is(err, ErrStorageFatal) || time.Since(begin) > 15*time.Second {
		t.Fatalf("WaitForLeadershipFailFast on a lock in a missing directory: %v after %v, want ErrStorageFatal at once",
			err, time.Since(begin))
	}
	t.Logf("WaitForLeadershipFailFast: %v", err)
}

// switchStore is a memStore that fails every call with *fail while set.
type switchStore struct {
	mem  *memStore
	fail atomic.Pointer[error]
}

func (s *switchStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	if e := s.fail.Load(); e != nil {
		return nil, "", *e
	}
	return s.mem.Get(ctx, key)
}

func (s *switchStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	if e := s.fail.Load(); e != nil {
		return *e
	}
	return s.mem.PutIfMatch(ctx, key, data, etag)
}

// Against MinIO: a missing bucket and refused credentials make
// WaitForLeadershipFailFast return at once with the matching sentinel.
func TestWaitForLeadershipPermanentErrorS3(t *testing.T) {
	s := needS3(t)
	for _, tc := range []struct {
		name     string
		edit     func(*ElectorConfig)
		sentinel error
	}{
		{"missing bucket", func(c *ElectorConfig) { c.Bucket = "s3lect-missing-" + randomSuffix() }, ErrStorageFatal},
		{"bad credentials", func(c *ElectorConfig) {
			// Throwaway values that MinIO does not know.
			c.AccessKeyID, c.SecretAccessKey = "NOTAKEY"+randomSuffix(), "not-a-secret-"+randomSuffix()
		}, ErrStorageAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testLogger(t)
			cfg := s3Config(s, uniqueKey(t), "n")
			tc.edit(cfg)
			el := newElector(t, log, cfg, nil)
			start(t, el)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			begin := time.Now()
			err := el.WaitForLeadershipFailFast(ctx)
			if !errors.Is(err, tc.sentinel) || time.Since(begin) > 15*time.Second {
				t.Fatalf("WaitForLeadershipFailFast: %v after %v, want %v at once", err, time.Since(begin), tc.sentinel)
			}
		})
	}
}

// A Go s3lect program's retry loop around WaitForLeadership, ported
// unchanged, with a missing bucket on MinIO: WaitForLeadership waits for
// its context as Go s3lect's does, so the loop sleeps instead of spinning a
// core (it once returned at once, millions of times in 3s).
func TestWaitForLeadershipRetryLoopMissingBucketCPU(t *testing.T) {
	s := needS3(t)
	log := testLogger(t)
	cfg := s3Config(s, uniqueKey(t), "n")
	cfg.Bucket = "s3lect-missing-" + randomSuffix()
	el := newElector(t, log, cfg, nil)
	start(t, el)
	waitUntil(t, 30*time.Second, "the missing bucket to be reported", func() bool {
		return el.GetLeadershipStatus().LastError != ""
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cpu0, wall0 := processCPU(t), time.Now()
	errs := 0
	for ctx.Err() == nil { // the loop of a Go s3lect program
		if err := el.WaitForLeadership(ctx); err != nil {
			errs++
			continue
		}
		break
	}
	cpu, wall := processCPU(t)-cpu0, time.Since(wall0)
	share := float64(cpu) / float64(wall)
	t.Logf("retry loop: %d errors, %v CPU in %v (%.1f%% of a core), last error %q",
		errs, cpu, wall, 100*share, el.GetLeadershipStatus().LastError)
	if el.IsLeader() {
		t.Fatal("leader on a missing bucket")
	}
	if errs > 1 || share >= 0.05 {
		t.Fatalf("the retry loop made %d errors and used %.1f%% of a core in %v; want at most 1 and under 5%%",
			errs, 100*share, wall)
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
