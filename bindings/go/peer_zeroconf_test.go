// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// zeroConfig is a peer-mode config with no certificate and no ServerAddr on
// the file lock at lock. InfrequentInterval is 30s on purpose: a follower
// that notices the leader's release within a second can only have heard it
// through the leader's endpoint (the long poll), not by reading the file.
func zeroConfig(lock, id string) *ElectorConfig {
	return &ElectorConfig{
		LockfilePath:       lock,
		ServerID:           id,
		LeaderTimeout:      3 * time.Second,
		RenewInterval:      time.Second,
		RenewDeadline:      2 * time.Second,
		FrequentInterval:   time.Second,
		InfrequentInterval: 30 * time.Second,
		RequestTimeout:     5 * time.Second,
		PeerMode:           true,
	}
}

// zeroConfigRecord is the part of a lock record the test reads.
type zeroConfigRecord struct {
	LeaderID      string `json:"leaderID"`
	LeaderAddr    string `json:"leaderAddr"`
	PeerKeySha256 string `json:"peerKeySha256"`
}

func readZeroConfigRecord(t *testing.T, path string) zeroConfigRecord {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r zeroConfigRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("the lock file is not JSON: %v: %q", err, raw)
	}
	return r
}

// Zero-config peer mode: PeerMode alone. One elector leads; its record
// names its key (peerKeySha256) and its endpoint on 127.0.0.1; the follower
// long-polls it over pinned TLS without a failure and takes over within
// 1.5s of a graceful stop.
func TestZeroConfigPeerModePair(t *testing.T) {
	log := testLogger(t)
	lock := filepath.Join(t.TempDir(), "zero-config.json")
	var els []*S3Elector
	for _, id := range []string{"zc-a", "zc-b"} {
		els = append(els, newElector(t, log, zeroConfig(lock, id), nil))
	}
	start(t, els...)

	// (a) one leader.
	leader := waitOneLeader(t, els, 10*time.Second)
	elected := time.Now()
	follower := els[0]
	if follower == leader {
		follower = els[1]
	}

	// (b) its record names its key and its endpoint, which takes connections.
	rec := readZeroConfigRecord(t, lock)
	if rec.LeaderID != leader.GetConfig().ServerID {
		t.Fatalf("record %+v, want leader %s", rec, leader.GetConfig().ServerID)
	}
	if sum, err := base64.StdEncoding.DecodeString(rec.PeerKeySha256); len(rec.PeerKeySha256) != 44 ||
		err != nil || len(sum) != 32 {
		t.Fatalf("peerKeySha256 %q: want the base64 of a SHA-256 (44 characters)", rec.PeerKeySha256)
	}
	m := regexp.MustCompile(`^127\.0\.0\.1:(\d+)$`).FindStringSubmatch(rec.LeaderAddr)
	if m == nil {
		t.Fatalf("leaderAddr %q, want 127.0.0.1:<port> for a file lock", rec.LeaderAddr)
	}
	if m[1] != fmt.Sprint(leader.PeerPort()) {
		t.Fatalf("leaderAddr %q, but the leader's PeerPort is %d", rec.LeaderAddr, leader.PeerPort())
	}
	conn, err := net.DialTimeout("tcp", rec.LeaderAddr, 5*time.Second)
	if err != nil {
		t.Fatalf("the leader's endpoint %s: %v", rec.LeaderAddr, err)
	}
	conn.Close()

	// (d) the follower settles on the leader's endpoint without a failure.
	waitUntil(t, 10*time.Second, "the follower becomes stable", func() bool {
		return follower.GetLeadershipStatus().State == "follower_stable"
	})
	time.Sleep(time.Until(elected.Add(3 * time.Second)))
	if ls := leaders(els); len(ls) != 1 || ls[0] != leader {
		t.Fatalf("leaders now %v", ids(ls))
	}
	raw, err := follower.StatusJSON()
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		PeerFailures    map[string]int `json:"peerFailures"`
		PeerLastFailure string         `json:"peerLastFailure"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("StatusJSON: %v: %s", err, raw)
	}
	if _, ok := st.PeerFailures["tlsPin"]; !ok {
		t.Fatalf("peerFailures has no tlsPin class: %s", raw)
	}
	for class, n := range st.PeerFailures {
		if n != 0 {
			t.Fatalf("the follower's peer check failed (%s: %d): %s", class, n, raw)
		}
	}
	if st.PeerLastFailure != "" {
		t.Fatalf("peerLastFailure %q", st.PeerLastFailure)
	}

	// (c) a graceful stop of the leader: the follower leads at once.
	begin := time.Now()
	if err := leader.Stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the follower takes over", follower.IsLeader)
	if took := time.Since(begin); took > 1500*time.Millisecond {
		t.Fatalf("the takeover took %v: with InfrequentInterval 30s only the peer long poll "+
			"notices the release this fast", took)
	}
	var after zeroConfigRecord
	waitUntil(t, 5*time.Second, "the new leader's record", func() bool {
		after = readZeroConfigRecord(t, lock)
		return after.LeaderID == follower.GetConfig().ServerID
	})
	// Both electors live in this process, which has one zero-config key and
	// one listener for all of its electors (docs/peer.md).
	if len(after.PeerKeySha256) != 44 || after.PeerKeySha256 != rec.PeerKeySha256 {
		t.Fatalf("the new leader's peerKeySha256 %q: want the process's one key %q", after.PeerKeySha256, rec.PeerKeySha256)
	}
	if want := fmt.Sprintf("127.0.0.1:%d", follower.PeerPort()); after.LeaderAddr != want {
		t.Fatalf("the new leader's leaderAddr %q, want %s", after.LeaderAddr, want)
	}
}

// PeerMode alone is a valid configuration; half a certificate is not, nor
// mTLS without a certificate of its own.
func TestZeroConfigPeerModeSettings(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "checked.json")
	el := newElector(t, testLogger(t), zeroConfig(lock, "alone"), nil)
	if c := el.GetConfig(); !c.PeerMode || c.ServerAddr != "" {
		t.Fatalf("GetConfig: PeerMode %v, ServerAddr %q", c.PeerMode, c.ServerAddr)
	}
	p := newTestPKI(t)
	cases := []struct {
		name string
		edit func(c *ElectorConfig)
		want string
	}{
		{"certificate without key", func(c *ElectorConfig) { c.PeerCert = p.certPEM }, "both PeerCert and PeerKey"},
		{"key without certificate", func(c *ElectorConfig) { c.PeerKey = p.keyPEM }, "both PeerCert and PeerKey"},
		{"client certificate only", func(c *ElectorConfig) {
			c.PeerClientCert = append(append([]byte(nil), p.certPEM...), p.keyPEM...)
		}, "does not verify clients"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := zeroConfig(lock, "n")
			cfg.PeerCACert = p.caPEM
			tc.edit(cfg)
			_, err := NewS3Elector(S3ElectorOptions{Config: cfg})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewS3Elector: %v; want an invalid-config error saying %q", err, tc.want)
			}
		})
	}
}
