// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigValidationErrors(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "lock.json")
	base := func() ElectorConfig { return ElectorConfig{LockfilePath: lock, ServerID: "n"} }
	for _, tc := range []struct {
		name   string
		mutate func(*ElectorConfig)
		want   string // expected in the message (case-insensitive)
	}{
		{"no lockfile", func(c *ElectorConfig) { c.LockfilePath = "" }, "LockfilePath"},
		{"no server id", func(c *ElectorConfig) { c.ServerID = "" }, "ServerID"},
		{"server id too long", func(c *ElectorConfig) { c.ServerID = strings.Repeat("x", 300) }, "ServerID"},
		{"negative lease", func(c *ElectorConfig) { c.LeaderTimeout = -time.Second }, "LeaderTimeout"},
		{"deadline not below lease", func(c *ElectorConfig) {
			c.LeaderTimeout, c.RenewDeadline, c.RenewInterval = 3*time.Second, 5*time.Second, time.Second
		}, "RenewDeadline"},
		{"interval not below deadline", func(c *ElectorConfig) {
			c.LeaderTimeout, c.RenewDeadline, c.RenewInterval = 3*time.Second, 2*time.Second, 2*time.Second
		}, "RenewInterval"},
		{"infrequent below frequent", func(c *ElectorConfig) {
			c.FrequentInterval, c.InfrequentInterval = 2*time.Second, time.Second
		}, "InfrequentInterval"},
		{"s3 url without bucket", func(c *ElectorConfig) { c.LockfilePath = "s3:///key" }, "bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mutate(&cfg)
			el, err := NewS3Elector(S3ElectorOptions{Config: &cfg})
			if err == nil {
				_ = el.Stop()
				t.Fatalf("NewS3Elector accepted %+v", cfg)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("errors.Is(%v, ErrInvalidConfig) = false", err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			cfg2 := base()
			tc.mutate(&cfg2)
			if verr := cfg2.Validate(); verr == nil {
				t.Errorf("Validate accepted what NewS3Elector rejected (%v)", err)
			}
		})
	}
	if _, err := NewS3Elector(S3ElectorOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewS3Elector without Config: %v, want ErrInvalidConfig", err)
	}
}

// Zero fields get defaults; a lease alone yields valid derived renew timings.
func TestConfigDefaults(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock.json")
	c := ElectorConfig{LockfilePath: lock, ServerID: "n", PeerHealthPath: "health"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := ElectorConfig{
		LockfilePath: lock, ServerID: "n", PeerHealthPath: "/health",
		LeaderTimeout: 15 * time.Second, RenewDeadline: 10 * time.Second, RenewInterval: 5 * time.Second,
		// InfrequentInterval: FrequentInterval, Go s3lect's effective poll.
		FrequentInterval: 5 * time.Second, InfrequentInterval: 5 * time.Second,
		// MaxClockSkew 0: the wall-clock takeover rule is off unless asked for;
		// MaxLeaseTimeout 0: libs3lect uses 4 × LeaderTimeout.
		MaxClockSkew: 0, MaxLeaseTimeout: 0, PeerTimeout: 3 * time.Second, RequestTimeout: 10 * time.Second,
		// The shared runtime's sizes (counts): libs3lect's defaults.
		MaxConnections: 64, WorkerThreads: 4, CallbackThreads: 2,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}

	// Go s3lect's followers poll every FrequentInterval: unset, ours do too.
	fast := ElectorConfig{LockfilePath: lock, ServerID: "n", FrequentInterval: 100 * time.Millisecond}
	if err := fast.Validate(); err != nil || fast.InfrequentInterval != 100*time.Millisecond {
		t.Fatalf("FrequentInterval 100ms alone: InfrequentInterval %v (%v), want 100ms", fast.InfrequentInterval, err)
	}
	stable := ElectorConfig{LockfilePath: lock, ServerID: "n", InfrequentInterval: 30 * time.Second}
	if err := stable.Validate(); err != nil || stable.InfrequentInterval != 30*time.Second || stable.FrequentInterval != 5*time.Second {
		t.Fatalf("InfrequentInterval 30s: %v/%v (%v), want 5s/30s", stable.FrequentInterval, stable.InfrequentInterval, err)
	}

	short := ElectorConfig{LockfilePath: lock, ServerID: "n", LeaderTimeout: 3 * time.Second}
	if err := short.Validate(); err != nil {
		t.Fatalf("a 3s lease with default renew timings was rejected: %v", err)
	}
	if short.RenewDeadline != 2*time.Second || short.RenewInterval != time.Second {
		t.Fatalf("derived renew deadline/interval = %v/%v, want 2s/1s", short.RenewDeadline, short.RenewInterval)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestUpdateAndGetConfig(t *testing.T) {
	log := testLogger(t)
	el := newElector(t, log, fileConfig(t, "", "n"), nil)
	start(t, el)
	cfg := el.GetConfig()
	if cfg.LeaderTimeout != testLease || cfg.RequestTimeout != 10*time.Second {
		t.Fatalf("GetConfig: lease %v, request timeout %v", cfg.LeaderTimeout, cfg.RequestTimeout)
	}
	cfg.LeaderTimeout, cfg.RenewDeadline, cfg.RenewInterval = 6*time.Second, 4*time.Second, time.Second
	if err := el.UpdateConfig(*cfg); err != nil {
		t.Fatalf("UpdateConfig: %v", err)
	}
	if got := el.GetConfig(); got.LeaderTimeout != 6*time.Second || got.RenewDeadline != 4*time.Second {
		t.Fatalf("after UpdateConfig, GetConfig has lease %v deadline %v", got.LeaderTimeout, got.RenewDeadline)
	}

	bad := *el.GetConfig()
	bad.RenewDeadline = 10 * time.Second
	if err := el.UpdateConfig(bad); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("UpdateConfig with deadline > lease: %v, want ErrInvalidConfig", err)
	}
	if got := el.GetConfig(); got.RenewDeadline != 4*time.Second {
		t.Fatalf("a rejected UpdateConfig changed the config: deadline %v", got.RenewDeadline)
	}
	moved := *el.GetConfig()
	moved.LockfilePath += ".other"
	if err := el.UpdateConfig(moved); err == nil || !strings.Contains(err.Error(), "LockfilePath") {
		t.Fatalf("UpdateConfig changing LockfilePath: %v, want an error naming LockfilePath", err)
	}
	if err := el.EnablePeerMode([]byte("pem")); err == nil {
		t.Fatal("EnablePeerMode after Start succeeded; libs3lect cannot switch it on a running elector")
	}
}
