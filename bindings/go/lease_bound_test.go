// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"bytes"
	"context"
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

// recordingLogger logs to t.Log and keeps the text, for assertions on it.
func recordingLogger(t *testing.T) (*slog.Logger, func() string) {
	w := &recordWriter{t: t}
	t.Cleanup(w.close)
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return log, w.text
}

type recordWriter struct {
	mu   sync.Mutex
	t    *testing.T
	buf  bytes.Buffer
	done bool
}

func (w *recordWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *recordWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *recordWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// MaxLeaseTimeout round-trips, and libs3lect's bounds on it come back with
// libs3lect's message in Go field names.
func TestMaxLeaseTimeoutConfig(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock.json")
	c := ElectorConfig{LockfilePath: lock, ServerID: "n", LeaderTimeout: 3 * time.Second,
		MaxLeaseTimeout: 12 * time.Second}
	el := newElector(t, testLogger(t), &c, nil)
	if got := el.GetConfig().MaxLeaseTimeout; got != 12*time.Second {
		t.Fatalf("GetConfig().MaxLeaseTimeout = %v, want 12s", got)
	}

	for _, tc := range []struct {
		name string
		max  time.Duration
		want string
	}{
		{"below the lease", 2 * time.Second, "MaxLeaseTimeout (2s) must not be less than LeaderTimeout (3s)"},
		{"above a day", 24*time.Hour + time.Millisecond, "MaxLeaseTimeout must be between 0 ms and 86400000 ms, got 86400001 ms"},
		{"negative", -time.Second, "MaxLeaseTimeout must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := ElectorConfig{LockfilePath: lock, ServerID: "n", LeaderTimeout: 3 * time.Second, MaxLeaseTimeout: tc.max}
			el, err := NewS3Elector(S3ElectorOptions{Config: &bad})
			if err == nil {
				_ = el.Stop()
				t.Fatalf("NewS3Elector accepted MaxLeaseTimeout %v", tc.max)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrInvalidConfig containing %q", err, tc.want)
			}
		})
	}

	// UpdateConfig checks the lease against the bound, and cannot change the
	// bound (libs3lect's s3lect_update_config does not apply it).
	longer := *el.GetConfig()
	longer.LeaderTimeout, longer.RenewDeadline, longer.RenewInterval = 13*time.Second, 8*time.Second, 2*time.Second
	if err := el.UpdateConfig(longer); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "MaxLeaseTimeout (12s) must not be less than LeaderTimeout (13s)") {
		t.Fatalf("UpdateConfig with a lease above MaxLeaseTimeout: %v", err)
	}
	other := *el.GetConfig()
	other.MaxLeaseTimeout = 20 * time.Second
	if err := el.UpdateConfig(other); err == nil || !strings.Contains(err.Error(), "cannot change MaxLeaseTimeout") {
		t.Fatalf("UpdateConfig changing MaxLeaseTimeout: %v, want an error naming it", err)
	}
	if got := el.GetConfig(); got.MaxLeaseTimeout != 12*time.Second || got.LeaderTimeout != 3*time.Second {
		t.Fatalf("a rejected UpdateConfig changed the config: %+v", got)
	}
}

// A record that advertises leaseMs = 10^15 is read as MaxLeaseTimeout and
// taken over once it has stayed unchanged that long.
func TestHostileRecordIsTakenOverAfterMaxLeaseTimeout(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "lock.json") // the file store keeps the record in this file
	rec := fmt.Sprintf(`{"leaderID":"hostile","leaderAddr":"","lastUpdated":%q,"term":7,"leaseMs":1000000000000000,"incarnation":"x"}`,
		time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	if err := os.WriteFile(lock+".tmp-test", []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(lock+".tmp-test", lock); err != nil {
		t.Fatal(err)
	}
	log, logText := recordingLogger(t)
	cfg := &ElectorConfig{
		LockfilePath: lock, ServerID: "a",
		LeaderTimeout: time.Second, RenewDeadline: 600 * time.Millisecond, RenewInterval: 200 * time.Millisecond,
		FrequentInterval: 100 * time.Millisecond, InfrequentInterval: 200 * time.Millisecond,
		MaxLeaseTimeout: 2 * time.Second,
	}
	el := newElector(t, log, cfg, nil)
	begin := time.Now()
	start(t, el)
	waitUntil(t, 10*time.Second, "the elector takes over the hostile record", el.IsLeader)
	took := time.Since(begin)
	// The bound is 2s; without it the default would be 4 × 1s.
	if took < 1900*time.Millisecond || took > 3500*time.Millisecond {
		t.Fatalf("took over after %v, want about 2s", took)
	}
	t.Logf("took over after %v", took)
	if term := el.Term(); term != 8 {
		t.Fatalf("term %d after taking over term 7, want 8", term)
	}
	if !strings.Contains(logText(), "leaseMs 1000000000000000 ms is above max_lease_timeout 2000 ms") {
		t.Fatalf("the clamping of leaseMs was not reported; log:\n%s", logText())
	}
}

// flakyPuts is a memStore whose puts fail (transiently) once told to.
type flakyPuts struct {
	*memStore
	failing atomic.Bool
}

func (f *flakyPuts) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	if f.failing.Load() {
		return errors.New("connection refused (test)")
	}
	return f.memStore.PutIfMatch(ctx, key, data, etag)
}

// Renewals that are sent but fail until RenewDeadline end leadership with
// LostRenewTimeout, which OnLoseLeadership reads from its context.
func TestRenewTimeoutReason(t *testing.T) {
	store := &flakyPuts{memStore: newMemStore()}
	reasons := make(chan LostReason, 4)
	log, logText := recordingLogger(t)
	cfg := &ElectorConfig{
		LockfilePath: "k", ServerID: "a",
		LeaderTimeout: 1500 * time.Millisecond, RenewDeadline: time.Second, RenewInterval: 300 * time.Millisecond,
		FrequentInterval: 200 * time.Millisecond, InfrequentInterval: 400 * time.Millisecond,
		OnLoseLeadership: func(ctx context.Context) error {
			r, ok := LostReasonFrom(ctx)
			if !ok {
				r = "(no reason in the context)"
			}
			reasons <- r
			return nil
		},
	}
	el := newElector(t, log, cfg, store)
	start(t, el)
	waitUntil(t, 10*time.Second, "leadership", el.IsLeader)
	store.failing.Store(true)
	begin := time.Now()
	select {
	case r := <-reasons:
		if r != LostRenewTimeout {
			t.Fatalf("OnLoseLeadership got reason %q, want %q", r, LostRenewTimeout)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no OnLoseLeadership within 5s of the puts failing")
	}
	if took := time.Since(begin); took > 2500*time.Millisecond {
		t.Fatalf("stepped down %v after the puts began to fail; RenewDeadline is 1s", took)
	}
	if el.IsLeader() {
		t.Fatal("still leader after OnLoseLeadership")
	}
	if !strings.Contains(logText(), `msg="Lost leadership"`) || !strings.Contains(logText(), "reason=renew_timeout") {
		t.Fatalf("no log record with reason=renew_timeout:\n%s", logText())
	}
	if _, ok := LostReasonFrom(context.Background()); ok {
		t.Fatal("LostReasonFrom found a reason in a plain context")
	}
}

// Every libs3lect reason code maps to its name; one this package does not
// know becomes LostUnknown rather than a failure.
func TestLostReasonMapping(t *testing.T) {
	want := map[int]LostReason{
		1: LostReleased, 2: LostLeaseExpired, 3: LostRace, 4: LostHookFailed, 5: LostStopped,
		6: LostRenewTimeout, 7: LostTransferred, 0: LostUnknown, 8: LostUnknown, 1000: LostUnknown,
		-1: LostUnknown,
	}
	for code, w := range want {
		if got := lostReasonOf(_Ctype_int(code)); got != w {
			t.Errorf("lostReasonOf(%d) = %q, want %q", code, got, w)
		}
	}
}

// Region names are checked by libs3lect ([A-Za-z0-9_-]{1,64}).
func TestRegionIsValidated(t *testing.T) {
	for _, region := range []string{"us east 1", "../../etc", strings.Repeat("x", 65)} {
		c := ElectorConfig{LockfilePath: "k", Bucket: "bucket", ServerID: "n", Region: region}
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "is not a region name") {
			t.Errorf("Region %q: %v, want ErrInvalidConfig naming the region", region, err)
		}
	}
	c := ElectorConfig{LockfilePath: "k", Bucket: "bucket", ServerID: "n", Region: "eu-west_3"}
	if err := c.Validate(); err != nil {
		t.Fatalf("Region eu-west_3: %v", err)
	}
}
