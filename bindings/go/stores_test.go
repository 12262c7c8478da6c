// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// Elections on every store of tests/harness/stores.py that
// tests/harness/store_servers.py serves (all but s3 and file, which the
// main suites cover). The binding hands LockfilePath (a lock URL when Bucket
// is empty) to libs3lect unchanged; these tests prove that each store's
// locks elect through it. store_servers.py, which scripts/test's suite_go
// wraps around scripts/test-go, starts the servers and says in
// S3LECT_TEST_STORES per store its lock URL, the options and the variables
// an elector needs: nothing here is per store. Without it the tests skip.

// storeTarget is one store as S3LECT_TEST_STORES describes it.
type storeTarget struct {
	kind string
	// lock is a lock URL with {key} where the lock's name goes.
	lock string
	// options are elector options by the library's names (endpoint,
	// access_key_id, ...): explicit, since scripts/with-minio's AWS_* are
	// MinIO's.
	options map[string]string
	// env are the variables the store reads from the process's environment.
	env map[string]string
	// staggered: b starts once a leads (the test server does not enforce
	// compare-and-set; see TestStoreElection).
	staggered bool
}

// lockFor is the target's lock URL for the lock name key.
func (st storeTarget) lockFor(key string) string {
	return strings.Replace(st.lock, "{key}", key, 1)
}

const storeServersHint = "run the suite as `python3 tests/harness/store_servers.py --cli build/bin/s3lect " +
	"-- scripts/with-minio scripts/test-go` from the repository root (scripts/test go does)"

// testStores parses S3LECT_TEST_STORES (tests/harness/store_servers.py's
// lines KIND<TAB>WHAT<TAB>NAME<TAB>VALUE), in its order; without it the test
// skips.
func testStores(t *testing.T) []storeTarget {
	t.Helper()
	text := os.Getenv("S3LECT_TEST_STORES")
	if text == "" {
		t.Skip("the stores' test servers are not configured (S3LECT_TEST_STORES unset): " + storeServersHint)
	}
	var out []storeTarget
	index := map[string]int{}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 {
			t.Fatalf("S3LECT_TEST_STORES: a line of %d fields, want 4: %q", len(f), line)
		}
		i, ok := index[f[0]]
		if !ok {
			i = len(out)
			index[f[0]] = i
			out = append(out, storeTarget{kind: f[0], options: map[string]string{}, env: map[string]string{}})
		}
		st := &out[i]
		switch f[1] {
		case "lock":
			st.lock = f[3]
		case "staggered":
			st.staggered = f[3] == "1"
		case "option":
			st.options[f[2]] = f[3]
		case "env":
			st.env[f[2]] = f[3]
		default:
			t.Fatalf("S3LECT_TEST_STORES: unknown setting %q in %q", f[1], line)
		}
	}
	for _, st := range out {
		if !strings.Contains(st.lock, "{key}") {
			t.Fatalf("S3LECT_TEST_STORES: store %s has no lock URL with {key}", st.kind)
		}
	}
	return out
}

// testStore is the store of that kind in S3LECT_TEST_STORES, or skips.
func testStore(t *testing.T, kind string) storeTarget {
	t.Helper()
	for _, st := range testStores(t) {
		if st.kind == kind {
			return st
		}
	}
	t.Skipf("S3LECT_TEST_STORES has no %s store", kind)
	return storeTarget{}
}

// initStore runs `$S3LECT_CLI init-store url args...` with extra environment
// variables.
func initStore(t *testing.T, url string, args []string, env ...string) string {
	t.Helper()
	cli := os.Getenv("S3LECT_CLI")
	if cli == "" {
		t.Skip("S3LECT_CLI unset: " + storeServersHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, append([]string{"init-store", url}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s init-store %s: %v\n%s", cli, url, err, out)
	}
	return string(out)
}

// storeConfig is a config with the tests' timings on the target's lock key,
// its options set on the fields of the same library options.
func storeConfig(t *testing.T, st storeTarget, key, id string) *ElectorConfig {
	t.Helper()
	cfg := &ElectorConfig{
		LockfilePath:       st.lockFor(key),
		ServerID:           id,
		LeaderTimeout:      3 * time.Second,
		RenewDeadline:      2 * time.Second,
		RenewInterval:      500 * time.Millisecond,
		FrequentInterval:   500 * time.Millisecond,
		InfrequentInterval: time.Second,
		RequestTimeout:     5 * time.Second,
	}
	for name, value := range st.options {
		set := false
		for _, o := range libOptions {
			if o.name != name {
				continue
			}
			if f, ok := cfg.configField(o); ok && f.Kind() == reflect.String {
				f.SetString(value)
				set = true
			}
		}
		if !set {
			t.Fatalf("store %s: option %q of S3LECT_TEST_STORES is no string field of ElectorConfig",
				st.kind, name)
		}
	}
	return cfg
}

// Two electors on each store's lock: exactly one leads and the other names
// it; after the leader's graceful Stop the other takes over within 6 s with
// the next term.
func TestStoreElection(t *testing.T) {
	for _, st := range testStores(t) {
		t.Run(st.kind, func(t *testing.T) {
			if st.kind == "redis" && !haveRedis {
				t.Skip("the bundle's Redis store needs the build tag s3lect_redis (scripts/test-go runs it)")
			}
			for name, value := range st.env {
				if os.Getenv(name) != value {
					t.Fatalf("store %s needs %s as store_servers.py set it; something between changed it",
						st.kind, name)
				}
			}
			testStoreElection(t, st)
		})
	}
}

type storeView struct {
	mu      sync.Mutex
	leaders []string // OnLeaderChange's leader ids, in order
	lost    []LostReason
}

func testStoreElection(t *testing.T, st storeTarget) {
	log := testLogger(t)
	var els []*S3Elector
	views := map[string]*storeView{}
	key := "go-" + randomSuffix()
	lock := st.lockFor(key)
	for _, id := range []string{"a", "b"} {
		cfg := storeConfig(t, st, key, id)
		v := &storeView{}
		views[id] = v
		cfg.OnLeaderChange = func(leaderID, _ string, _ int64) {
			v.mu.Lock()
			v.leaders = append(v.leaders, leaderID)
			v.mu.Unlock()
		}
		cfg.OnLoseLeadership = func(ctx context.Context) error {
			r, _ := LostReasonFrom(ctx)
			v.mu.Lock()
			v.lost = append(v.lost, r)
			v.mu.Unlock()
			return nil
		}
		els = append(els, newElector(t, log, cfg, nil)) // stopped at cleanup, pass or fail
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st.staggered {
		// moto accepts a CREATE of a TXT name that already exists (Route 53
		// refuses it), so two electors creating the record at once would both
		// win there: b starts once a leads, and finds a's record.
		start(t, els[0])
		if err := els[0].WaitForLeadership(ctx); err != nil {
			t.Fatalf("a did not lead %s: %v", lock, err)
		}
		start(t, els[1])
	} else {
		start(t, els...) // both race to create the lock item / row
	}

	leader := waitOneLeader(t, els, 30*time.Second)
	follower := els[0]
	if follower == leader {
		follower = els[1]
	}
	lid, fid := leader.GetConfig().ServerID, follower.GetConfig().ServerID
	term := leader.Term()
	if term < 1 {
		t.Fatalf("leader %s has term %d", lid, term)
	}
	waitUntil(t, 15*time.Second, fid+" names "+lid+" as leader", func() bool {
		return follower.LeaderID() == lid
	})
	// A few renewals and polls later: still the same single leader.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if ls := leaders(els); len(ls) != 1 || ls[0] != leader {
			t.Fatalf("leaders %v while nothing disturbed %s", ids(ls), lid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := follower.Term(); got != term {
		t.Fatalf("%s sees term %d, the leader has %d", fid, got, term)
	}
	fv := views[fid]
	fv.mu.Lock()
	seen := append([]string(nil), fv.leaders...)
	fv.mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != lid {
		t.Fatalf("%s's OnLeaderChange leader ids %q, want the last to be %s", fid, seen, lid)
	}

	// Graceful stop: the lock is released and the follower takes over.
	t0 := time.Now()
	if err := leader.Stop(); err != nil {
		t.Fatalf("Stop(%s): %v", lid, err)
	}
	if leader.IsLeader() {
		t.Fatalf("%s still leads after Stop", lid)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := follower.WaitForLeadership(wctx); err != nil {
		t.Fatalf("%s did not take over %s after %s stopped: %v", fid, lock, lid, err)
	}
	took := time.Since(t0)
	t.Logf("%s: %s took over %.2f s after %s stopped", st.kind, fid, took.Seconds(), lid)
	if took >= 6*time.Second {
		t.Fatalf("takeover after a graceful stop took %v, want < 6s", took)
	}
	if got := follower.Term(); got != term+1 {
		t.Fatalf("term after the handover %d, before %d", got, term)
	}
	if got := follower.LeaderID(); got != fid {
		t.Fatalf("%s's LeaderID() after taking over: %q", fid, got)
	}
	lv := views[lid]
	lv.mu.Lock()
	lost := append([]LostReason(nil), lv.lost...)
	lv.mu.Unlock()
	if len(lost) != 1 || lost[0] != LostStopped {
		t.Fatalf("%s's OnLoseLeadership reasons %q, want [stopped]", lid, lost)
	}
}

// A DynamoDB lock on a table nobody made: WaitForLeadershipFailFast returns at once
// with ErrStorageFatal naming the table and init-store; once the table is
// made, the same elector leads without a restart. (DynamoDB's own: the
// other stores' missing tables are tested elsewhere.)
func TestStoreDynamoDBMissingTable(t *testing.T) {
	st := testStore(t, "dynamodb")
	table := "s3lect-go-missing-" + randomSuffix()
	st.lock = "dynamodb://" + table + "/{key}"
	el := newElector(t, testLogger(t), storeConfig(t, st, "leader", "a"), nil)
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	err := el.WaitForLeadershipFailFast(ctx)
	if !errors.Is(err, ErrStorageFatal) {
		t.Fatalf("WaitForLeadershipFailFast on a missing table: %v, want ErrStorageFatal", err)
	}
	if took := time.Since(t0); took > 15*time.Second {
		t.Fatalf("the missing table was reported after %v", took)
	}
	if msg := err.Error(); !strings.Contains(msg, table) || !strings.Contains(msg, "init-store") {
		t.Fatalf("the error does not name the table and init-store: %s", msg)
	}
	if el.IsLeader() {
		t.Fatal("leader on a missing table")
	}

	o := st.options
	initStore(t, st.lockFor("leader"), []string{"--endpoint", o["endpoint"]},
		"AWS_ACCESS_KEY_ID="+o["access_key_id"], "AWS_SECRET_ACCESS_KEY="+o["secret_access_key"],
		"AWS_SESSION_TOKEN=", "AWS_REGION="+o["region"])
	waitUntil(t, 20*time.Second, "the elector to lead once the table exists", el.IsLeader)
	if el.LeaderID() != "a" || el.Term() < 1 {
		t.Fatalf("after the table was made: LeaderID %q, term %d", el.LeaderID(), el.Term())
	}
}
