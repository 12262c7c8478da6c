// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A Go Storage replaces S3: the key is LockfilePath, one of two electors
// leads, and a crash fails over through the Go store.
func TestCustomGoStorage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*memStore) Storage
	}{
		{"Storage", func(m *memStore) Storage { return m }},
		{"ETagPutter", func(m *memStore) Storage { return memStoreETag{m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testLogger(t)
			mem := newMemStore()
			const key = "leader/my-group.json"
			var els []*S3Elector
			for _, id := range []string{"a", "b"} {
				cfg := fileConfig(t, key, id)
				els = append(els, newElector(t, log, cfg, tc.store(mem)))
			}
			start(t, els...)
			l := waitOneLeader(t, els, 20*time.Second)
			if keys := mem.keys(); len(keys) != 1 || keys[0] != key {
				t.Fatalf("store holds keys %q, want just %q", keys, key)
			}
			term := l.Term()
			if err := l.StopWithoutRelease(); err != nil {
				t.Fatal(err)
			}
			other := els[0]
			if l == els[0] {
				other = els[1]
			}
			waitUntil(t, 4*testLease+5*time.Second, "the other elector takes over through the Go store", other.IsLeader)
			if other.Term() != term+1 {
				t.Fatalf("term after failover is %d, want %d", other.Term(), term+1)
			}
		})
	}
}

// A leader renews with one put and, when its Storage returns the new etag,
// without any get; otherwise with one get per put to learn the etag.
func TestCustomStorageRenewalCost(t *testing.T) {
	for _, tc := range []struct {
		name       string
		store      func(*memStore) Storage
		getsPerPut int64
	}{
		{"Storage", func(m *memStore) Storage { return m }, 1},
		{"ETagPutter", func(m *memStore) Storage { return memStoreETag{m} }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testLogger(t)
			mem := newMemStore()
			el := newElector(t, log, fileConfig(t, "k", "solo"), tc.store(mem))
			start(t, el)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := el.WaitForLeadership(ctx); err != nil {
				t.Fatal(err)
			}
			gets0, puts0 := mem.gets.Load(), mem.puts.Load()
			waitUntil(t, 20*time.Second, "the leader renews 4 times", func() bool { return mem.puts.Load()-puts0 >= 4 })
			gets, puts := mem.gets.Load()-gets0, mem.puts.Load()-puts0
			if !el.IsLeader() {
				t.Fatal("leader lost its lease on a healthy store")
			}
			// Allow one renewal in flight between the two counter reads.
			if want := tc.getsPerPut * puts; gets < want-1 || gets > want+1 {
				t.Fatalf("%d gets for %d renewals, want about %d", gets, puts, want)
			}
		})
	}
}

// failingStore fails every call with the given error (or panics).
type failingStore struct {
	err   error
	panic bool
	calls atomic.Int32
}

func (f *failingStore) Get(ctx context.Context, key string) ([]byte, string, error) {
	f.calls.Add(1)
	if f.panic {
		panic("storage exploded")
	}
	return nil, "", f.err
}

func (f *failingStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	f.calls.Add(1)
	if f.panic {
		panic("storage exploded")
	}
	return f.err
}

// Storage errors and panics are reported in the status, never crash the
// process, and never make the node leader.
func TestCustomStorageFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store *failingStore
		want  string
	}{
		{"auth", &failingStore{err: fmt.Errorf("token expired: %w", ErrStorageAuth)}, "token expired"},
		{"transient", &failingStore{err: errors.New("connection reset by peer")}, "connection reset"},
		{"panic", &failingStore{panic: true}, "panicked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := testLogger(t)
			el := newElector(t, log, fileConfig(t, "k", "n"), tc.store)
			start(t, el)
			var st *LeadershipStatus
			waitUntil(t, 20*time.Second, "the failure shows in the status", func() bool {
				st = el.GetLeadershipStatus()
				return st.LastError != "" && st.ConsecutiveFails > 0
			})
			if !strings.Contains(st.LastError, tc.want) {
				t.Fatalf("LastError %q does not contain %q", st.LastError, tc.want)
			}
			if el.IsLeader() {
				t.Fatal("leader although the store fails")
			}
			if tc.store.calls.Load() == 0 {
				t.Fatal("the store was never called")
			}
		})
	}
}

// racingStore lets a put succeed, then another writer overwrites the
// object before the read-back, as a concurrent node could.
type racingStore struct{ *memStore }

func (r racingStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) error {
	if err := r.memStore.PutIfMatch(ctx, key, data, etag); err != nil {
		return err
	}
	r.memStore.mu.Lock()
	r.memStore.gen++
	rec := fmt.Sprintf(`{"leaderID":"intruder","leaderAddr":"","lastUpdated":%q,"term":5,"leaseMs":60000,"incarnation":"x"}`,
		time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	r.memStore.objs[key] = memObj{data: []byte(rec), etag: fmt.Sprintf("\"%d\"", r.memStore.gen)}
	r.memStore.mu.Unlock()
	return nil
}

// Without an etag from the put, the binding reads the object back; if it
// is not what we wrote, we must not take the other writer's etag as ours.
func TestReadBackDetectsOtherWriter(t *testing.T) {
	log := testLogger(t)
	el := newElector(t, log, fileConfig(t, "k", "n"), racingStore{newMemStore()})
	start(t, el)
	waitUntil(t, 20*time.Second, "the elector sees the other writer as leader", func() bool {
		return el.LeaderID() == "intruder"
	})
	st := el.GetLeadershipStatus()
	if el.IsLeader() || el.ev.snapshot().acquired || st.Term != 5 {
		t.Fatalf("took another writer's record for its own: %+v", st)
	}
}
