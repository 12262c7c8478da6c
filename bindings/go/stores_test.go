// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Elections on the DynamoDB, PostgreSQL and Route 53 stores. The binding
// hands LockfilePath (a lock URL when Bucket is empty) to libs3lect
// unchanged; these tests prove that dynamodb://, postgres:// and route53://
// locks elect through it. The servers come from
// tests/harness/store_servers.py, which scripts/test's suite_go wraps
// around scripts/test-go; it exports the variables read below. Without
// them the tests skip, saying which variable is missing.

// storeTarget is one store's lock URL and the config fields it needs.
type storeTarget struct {
	kind string
	lock string
	// Credentials passed explicitly: scripts/with-minio's AWS_* are MinIO's.
	accessKey, secretKey string
	// route53: b starts once a leads (see TestStoreElection).
	staggered bool
	// gs: fake-gcs-server's endpoint (http on loopback: no token needed).
	endpoint string
}

// needEnv returns the values of vars, or skips the test naming the unset ones.
func needEnv(t *testing.T, what string, vars ...string) []string {
	t.Helper()
	var vals, missing []string
	for _, v := range vars {
		val := os.Getenv(v)
		if val == "" {
			missing = append(missing, v)
		}
		vals = append(vals, val)
	}
	if len(missing) > 0 {
		t.Skipf("the %s test server is not configured (%s unset): run the suite as "+
			"`python3 tests/harness/store_servers.py --cli build/bin/s3lect -- scripts/with-minio scripts/test-go` "+
			"from the repository root (scripts/test go does)", what, strings.Join(missing, ", "))
	}
	return vals
}

// initStore runs `$S3LECT_CLI init-store url` with extra environment variables.
func initStore(t *testing.T, cli, url string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "init-store", url)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s init-store %s: %v\n%s", cli, url, err, out)
	}
	return string(out)
}

func dynamoDBEnv(t *testing.T) (cli, key, secret string) {
	v := needEnv(t, "DynamoDB Local", "AWS_ENDPOINT_URL_DYNAMODB", "S3LECT_TEST_DYNAMODB_ACCESS_KEY_ID",
		"S3LECT_TEST_DYNAMODB_SECRET_ACCESS_KEY", "S3LECT_CLI")
	return v[3], v[1], v[2]
}

func dynamoDBTarget(t *testing.T) storeTarget {
	cli, key, secret := dynamoDBEnv(t)
	table := "s3lect-go-" + randomSuffix()
	lock := "dynamodb://" + table + "/leader"
	out := initStore(t, cli, lock, "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret,
		"AWS_SESSION_TOKEN=", "AWS_REGION=us-east-1")
	if !strings.Contains(out, table) {
		t.Fatalf("init-store did not name table %s: %q", table, out)
	}
	return storeTarget{kind: "dynamodb", lock: lock, accessKey: key, secretKey: secret}
}

func postgresTarget(t *testing.T) storeTarget {
	v := needEnv(t, "PostgreSQL", "S3LECT_PG_DSN", "S3LECT_CLI")
	lock := v[0] + "?key=leader-" + randomSuffix() + "&table=s3lect_go_" + randomSuffix()
	initStore(t, v[1], lock)
	return storeTarget{kind: "postgres", lock: lock}
}

func route53Target(t *testing.T) storeTarget {
	v := needEnv(t, "moto (Route 53)", "AWS_ENDPOINT_URL_ROUTE_53", "S3LECT_TEST_ROUTE53_ZONE",
		"S3LECT_TEST_ROUTE53_DOMAIN")
	// moto checks no signatures: any credentials do.
	return storeTarget{kind: "route53", lock: "route53://" + v[1] + "/go-" + randomSuffix() + "." + v[2],
		accessKey: "s3lecttest", secretKey: "s3lecttest", staggered: true}
}

func gcsTarget(t *testing.T) storeTarget {
	v := needEnv(t, "fake-gcs-server", "S3LECT_TEST_GCS_ENDPOINT", "S3LECT_TEST_GCS_BUCKET")
	return storeTarget{kind: "gs", lock: "gs://" + v[1] + "/go-" + randomSuffix(), endpoint: v[0]}
}

func azureTarget(t *testing.T) storeTarget {
	// Azurite: the library reads AZURE_STORAGE_CONNECTION_STRING (account
	// key and blob endpoint) from the environment.
	v := needEnv(t, "Azurite", "S3LECT_TEST_AZURE_LOCK_PREFIX", "AZURE_STORAGE_CONNECTION_STRING")
	return storeTarget{kind: "az", lock: v[0] + "go-" + randomSuffix() + ".json"}
}

func etcdTarget(t *testing.T) storeTarget {
	v := needEnv(t, "etcd", "S3LECT_TEST_ETCD_ENDPOINT")
	return storeTarget{kind: "etcd", lock: "etcd://" + strings.TrimPrefix(v[0], "http://") +
		"/s3lect-test/go-" + randomSuffix()}
}

func redisTarget(t *testing.T) storeTarget {
	if !haveRedis {
		t.Skip("the bundle's Redis store needs the build tag s3lect_redis (scripts/test-go runs it)")
	}
	v := needEnv(t, "redis-server", "S3LECT_TEST_REDIS_LOCK_PREFIX", "S3LECT_REDIS_PASSWORD")
	return storeTarget{kind: "redis", lock: v[0] + "go-" + randomSuffix()}
}

// storeConfig is a config with the tests' timings on the target's lock.
func storeConfig(st storeTarget, id string) *ElectorConfig {
	return &ElectorConfig{
		LockfilePath:       st.lock,
		ServerID:           id,
		AccessKeyID:        st.accessKey,
		SecretAccessKey:    st.secretKey,
		Endpoint:           st.endpoint,
		Region:             "us-east-1",
		LeaderTimeout:      3 * time.Second,
		RenewDeadline:      2 * time.Second,
		RenewInterval:      500 * time.Millisecond,
		FrequentInterval:   500 * time.Millisecond,
		InfrequentInterval: time.Second,
		RequestTimeout:     5 * time.Second,
	}
}

// storeTargets are the stores of tests/harness/stores.py that
// store_servers.py serves, by the registry's kind.
var storeTargets = map[string]func(*testing.T) storeTarget{
	"dynamodb": dynamoDBTarget,
	"postgres": postgresTarget,
	"route53":  route53Target,
	"gcs":      gcsTarget,
	"azure":    azureTarget,
	"etcd":     etcdTarget,
	"redis":    redisTarget,
}

// testedStores is store_servers.py's S3LECT_TEST_STORES (the registry's
// stores it started servers for), or without it every target (they skip).
func testedStores() []string {
	if v := os.Getenv("S3LECT_TEST_STORES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"dynamodb", "postgres", "route53", "gcs", "azure", "etcd", "redis"}
}

// Two electors on each store's lock: exactly one leads and the other names
// it; after the leader's graceful Stop the other takes over within 6 s with
// the next term. A store of the registry without a target fails.
func TestStoreElection(t *testing.T) {
	for _, kind := range testedStores() {
		target, ok := storeTargets[kind]
		t.Run(kind, func(t *testing.T) {
			if !ok {
				t.Fatalf("store %q of tests/harness/stores.py (S3LECT_TEST_STORES) has no "+
					"target in stores_test.go's storeTargets", kind)
			}
			testStoreElection(t, target(t))
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
	for _, id := range []string{"a", "b"} {
		cfg := storeConfig(st, id)
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
			t.Fatalf("a did not lead %s: %v", st.lock, err)
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
		t.Fatalf("%s did not take over %s after %s stopped: %v", fid, st.lock, lid, err)
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
// made, the same elector leads without a restart.
func TestStoreDynamoDBMissingTable(t *testing.T) {
	cli, key, secret := dynamoDBEnv(t)
	table := "s3lect-go-missing-" + randomSuffix()
	st := storeTarget{kind: "dynamodb", lock: "dynamodb://" + table + "/leader", accessKey: key, secretKey: secret}
	el := newElector(t, testLogger(t), storeConfig(st, "a"), nil)
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

	initStore(t, cli, st.lock, "AWS_ACCESS_KEY_ID="+key, "AWS_SECRET_ACCESS_KEY="+secret,
		"AWS_SESSION_TOKEN=", "AWS_REGION=us-east-1")
	waitUntil(t, 20*time.Second, "the elector to lead once the table exists", el.IsLeader)
	if el.LeaderID() != "a" || el.Term() < 1 {
		t.Fatalf("after the table was made: LeaderID %q, term %d", el.LeaderID(), el.Term())
	}
}
