// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Timings short enough for tests; bounds below are generous multiples.
const (
	testLease      = 3 * time.Second
	testRenew      = 500 * time.Millisecond
	testDeadline   = 2 * time.Second
	testFrequent   = 250 * time.Millisecond
	testInfrequent = 500 * time.Millisecond
)

// s3Target is the MinIO the test harness started (scripts/with-minio).
type s3Target struct {
	endpoint, bucket string
}

// needS3 returns the harness's MinIO. Without it the test fails, so that a
// CI run that forgot to start MinIO cannot pass by skipping; `go test
// -short` skips instead, saying why.
func needS3(t *testing.T) s3Target {
	t.Helper()
	var missing []string
	for _, v := range []string{"S3LECT_TEST_ENDPOINT", "S3LECT_TEST_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("this test needs MinIO: %s not set; run it as `scripts/with-minio scripts/test-go` "+
			"from the repository root (or pass -short to skip the S3 tests)", strings.Join(missing, ", "))
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return s3Target{os.Getenv("S3LECT_TEST_ENDPOINT"), os.Getenv("S3LECT_TEST_BUCKET")}
}

func randomSuffix() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// uniqueKey gives every test its own lock object.
func uniqueKey(t *testing.T) string {
	return "go-tests/" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + randomSuffix() + ".json"
}

// s3Config is a fast-timing config for the lock key in the harness's bucket.
func s3Config(s s3Target, key, id string) *ElectorConfig {
	return &ElectorConfig{
		LockfilePath:       key,
		Bucket:             s.bucket,
		Endpoint:           s.endpoint,
		ServerID:           id,
		ServerAddr:         "127.0.0.1:0",
		LeaderTimeout:      testLease,
		RenewInterval:      testRenew,
		RenewDeadline:      testDeadline,
		FrequentInterval:   testFrequent,
		InfrequentInterval: testInfrequent,
		MaxClockSkew:       500 * time.Millisecond,
		PeerTimeout:        time.Second,
		RequestTimeout:     2 * time.Second,
		NewLockWait:        -1, // each test's lock is new: create it at once
	}
}

// fileConfig is the same with the file store, for tests that need no S3.
func fileConfig(t *testing.T, lock, id string) *ElectorConfig {
	if lock == "" {
		lock = filepath.Join(t.TempDir(), "lock.json")
	}
	return &ElectorConfig{
		LockfilePath:       lock,
		ServerID:           id,
		LeaderTimeout:      testLease,
		RenewInterval:      testRenew,
		RenewDeadline:      testDeadline,
		FrequentInterval:   testFrequent,
		InfrequentInterval: testInfrequent,
		MaxClockSkew:       500 * time.Millisecond,
		PeerTimeout:        time.Second,
		NewLockWait:        -1, // each test's lock is new: create it at once
	}
}

// testLogger sends the electors' logs to t.Log until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close) // registered before the electors' cleanups, so it runs after them
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// newElector creates an elector that is stopped when the test ends.
func newElector(t *testing.T, log *slog.Logger, cfg *ElectorConfig, st Storage) *S3Elector {
	t.Helper()
	el, err := NewS3Elector(S3ElectorOptions{Config: cfg, Storage: st, Logger: log})
	if err != nil {
		t.Fatalf("NewS3Elector(%s): %v", cfg.ServerID, err)
	}
	t.Cleanup(func() {
		if err := el.Stop(); err != nil {
			t.Errorf("Stop(%s): %v", cfg.ServerID, err)
		}
	})
	return el
}

func start(t *testing.T, els ...*S3Elector) {
	t.Helper()
	for _, el := range els {
		if err := el.Start(context.Background()); err != nil {
			t.Fatalf("Start(%s): %v", el.GetConfig().ServerID, err)
		}
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for !cond() {
		if time.Since(begin) > within {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(begin)
}

// leaders returns the electors that report leadership now.
func leaders(els []*S3Elector) []*S3Elector {
	var out []*S3Elector
	for _, el := range els {
		if el.IsLeader() {
			out = append(out, el)
		}
	}
	return out
}

func ids(els []*S3Elector) []string {
	var out []string
	for _, el := range els {
		out = append(out, el.GetConfig().ServerID)
	}
	return out
}

// waitOneLeader waits until exactly one of els leads and returns it.
func waitOneLeader(t *testing.T, els []*S3Elector, within time.Duration) *S3Elector {
	t.Helper()
	var l *S3Elector
	waitUntil(t, within, "exactly one elector leads", func() bool {
		ls := leaders(els)
		if len(ls) > 1 {
			t.Fatalf("two leaders at once: %v", ids(ls))
		}
		if len(ls) == 1 {
			l = ls[0]
		}
		return l != nil
	})
	return l
}

// memStore is an in-memory Storage with the conditional-write semantics of
// S3, counting calls. It is a real store for the custom-store path, not a
// stand-in for S3.
type memStore struct {
	mu   sync.Mutex
	objs map[string]memObj
	gen  int
	gets atomic.Int64
	puts atomic.Int64
}

type memObj struct {
	data []byte
	etag string
}

func newMemStore() *memStore { return &memStore{objs: map[string]memObj{}} }

func (m *memStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	m.gets.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return nil, "", fmt.Errorf("get %q: %w", key, ErrStorageNotFound)
	}
	return append([]byte(nil), o.data...), o.etag, nil
}

func (m *memStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	_, err := m.put(key, data, etag)
	return err
}

func (m *memStore) put(key string, data []byte, etag string) (string, error) {
	m.puts.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.objs[key]
	if (etag == "" && ok) || (etag != "" && (!ok || cur.etag != etag)) {
		return "", fmt.Errorf("put %q: %w", key, ErrStoragePrecondition)
	}
	m.gen++
	o := memObj{data: append([]byte(nil), data...), etag: fmt.Sprintf("\"%d\"", m.gen)}
	m.objs[key] = o
	return o.etag, nil
}

func (m *memStore) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objs {
		out = append(out, k)
	}
	return out
}

// memStoreETag also returns the new etag from its put.
type memStoreETag struct{ *memStore }

func (m memStoreETag) PutIfMatchETag(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return m.put(key, data, etag)
}

func isStopped(err error) bool { return errors.Is(err, ErrStopped) }
