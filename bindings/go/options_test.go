// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A new libs3lect option fails here until ElectorConfig has a field for it
// (named by goFieldName, of the Go type of its option type) or
// notConfigFields says why the binding does not expose it.
func TestOptionsCoverEveryLibraryOption(t *testing.T) {
	if len(libOptions) == 0 {
		t.Fatal("libs3lect reports no options")
	}
	for i, o := range libOptions {
		if int(o.opt) != i+1 {
			t.Errorf("option %q has value %d at position %d: the library's options have a gap", o.name, o.opt, i+1)
		}
		if o.typ == typInt && o.unit == "" {
			t.Errorf("integer option %q is neither a known duration nor a known count: libs3lect must report its unit (s3lect_option_flags), and ElectorConfig needs its field", o.name)
			continue
		}
		if goTypeOf(o) == nil {
			t.Errorf("option %q has type %d, which the Go binding does not know", o.name, o.typ)
			continue
		}
		if reason, skip := notConfigFields[o.name]; skip {
			if reason == "" {
				t.Errorf("notConfigFields[%q] gives no reason", o.name)
			}
			continue
		}
		var c ElectorConfig
		if _, ok := c.configField(o); !ok {
			t.Errorf("libs3lect option %q has no ElectorConfig field %s of type %v: add the field, or list it in notConfigFields with the reason",
				o.name, o.field, goTypeOf(o))
		}
		if o.typ == typBool && o.def > 0 {
			t.Errorf("bool option %q is on by default: a false ElectorConfig field cannot mean the default", o.name)
		}
	}
	for name := range notConfigFields {
		if _, ok := optionNamed(name); !ok {
			t.Errorf("notConfigFields names %q, which libs3lect does not have", name)
		}
	}
	for _, o := range libOptions {
		if o.typ == typInt && o.unit == "" {
			t.Errorf("libs3lect reports no unit (s3lect_option_flags) for integer option %q", o.name)
		}
	}
}

// Every field an option maps to reaches the library: set alone on a config,
// it reads back from the C config with the field's value.
func TestOptionsReachTheLibrary(t *testing.T) {
	for _, o := range libOptions {
		if o.field == "" {
			continue
		}
		t.Run(o.name, func(t *testing.T) {
			var c ElectorConfig
			f, ok := c.configField(o)
			if !ok {
				t.Skipf("no field (TestOptionsCoverEveryLibraryOption reports it)")
			}
			var want any
			switch o.typ {
			case typInt:
				v := o.min + 7 // in bounds, and no default
				if v == o.def {
					v++
				}
				if o.isCount() {
					f.SetInt(v)
				} else {
					f.SetInt(v * int64(time.Millisecond))
				}
				want = v
			case typBool:
				f.SetBool(true)
				want = int64(1)
			case typBytes:
				f.SetBytes([]byte("pem-" + o.name))
				want = "pem-" + o.name
			case typStr:
				// peer_health_path needs a leading '/', a region refuses one.
				v := "v-" + o.name
				if o.name == "peer_health_path" {
					v = "/" + v
				}
				f.SetString(v)
				want = v
				if o.name == "secret_access_key" || o.name == "session_token" {
					want = "" // libs3lect never reads secrets back
				}
			}
			got, err := setAndRead(&c, o)
			if err != nil {
				t.Fatalf("%s: %v", o.field, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s = %v reads back from libs3lect as %v (%T)", o.field, want, got, got)
			}
		})
	}
}

// Bounds and defaults are the library's: a zero duration or count takes
// libs3lect's default, one past the maximum is refused under the field's
// name (durations in ms, counts as they are).
func TestOptionsBoundsAndDefaultsFromLibrary(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "lock.json")
	c := ElectorConfig{LockfilePath: lock, ServerID: "n"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, o := range libOptions {
		f, ok := c.configField(o)
		if !ok || o.typ != typInt {
			continue
		}
		bad := ElectorConfig{LockfilePath: lock, ServerID: "n"}
		bf, _ := bad.configField(o)
		if o.isCount() {
			if got := f.Int(); got != o.def {
				t.Errorf("%s default %d, libs3lect's is %d", o.field, got, o.def)
			}
			bf.SetInt(o.max + 1)
			err := bad.Validate()
			want := fmt.Sprintf("%s must be between %d and %d, got %d", o.field, o.min, o.max, o.max+1)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), " ms") {
				t.Errorf("%s = %d (max %d): error %v, want one containing %q (a count, no ms)", o.field, o.max+1, o.max, err, want)
			}
			continue
		}
		switch o.name {
		case "renew_interval", "renew_deadline", "infrequent_interval": // derived (TestConfigDefaults)
		case "new_lock_wait": // its zero is libs3lect's default, -1 (zeroIsDefault)
			if got := f.Int(); got != 0 || o.def != -1 {
				t.Errorf("%s default %v, want 0 (libs3lect's %d ms)", o.field, time.Duration(got), o.def)
			}
		default:
			if got := time.Duration(f.Int()); got != time.Duration(o.def)*time.Millisecond {
				t.Errorf("%s default %v, libs3lect's is %d ms", o.field, got, o.def)
			}
		}
		bf.SetInt((o.max + 1) * int64(time.Millisecond))
		err := bad.Validate()
		if err == nil || !strings.Contains(err.Error(), o.field) || !strings.Contains(err.Error(), " ms") {
			t.Errorf("%s = %d ms (max %d ms): error %v does not name the field in ms", o.field, o.max+1, o.max, err)
		}
	}
}

func TestGoFieldNames(t *testing.T) {
	for name, want := range map[string]string{
		"lease_timeout": "LeaderTimeout", "server_id": "ServerID", "ca_file": "CAFile",
		"access_key_id": "AccessKeyID", "peer_ca": "PeerCACert", "peer_client_cert": "PeerClientCert",
		"max_lease_timeout": "MaxLeaseTimeout", "lock": "LockfilePath",
	} {
		if got := goFieldName(name); got != want {
			t.Errorf("goFieldName(%q) = %q, want %q", name, got, want)
		}
	}
	msg := goFieldNames.Replace("max_lease_timeout (2s) must not be less than lease_timeout (3s); peer_client_cert, peer_cert, region, set lock to")
	want := "MaxLeaseTimeout (2s) must not be less than LeaderTimeout (3s); PeerClientCert, PeerCert, region, set LockfilePath to"
	if msg != want {
		t.Errorf("rewritten message\n got %q\nwant %q", msg, want)
	}
}

// The shared runtime's sizes are plain counts: the three fields reach the
// elector's configuration in libs3lect as they are (not as milliseconds),
// an elector that asks for them elects, and a count out of range or
// negative is refused with a message that names the field and its range.
func TestRuntimeSizeCounts(t *testing.T) {
	want := map[string]struct {
		field         string
		min, max, def int64
	}{
		"max_connections":  {"MaxConnections", 1, 1024, 64},
		"worker_threads":   {"WorkerThreads", 1, 64, 4},
		"callback_threads": {"CallbackThreads", 1, 64, 2},
	}
	for name, w := range want {
		o, ok := optionNamed(name)
		if !ok {
			t.Fatalf("libs3lect has no option %q", name)
		}
		if !o.isCount() || o.field != w.field || o.min != w.min || o.max != w.max || o.def != w.def {
			t.Errorf("%s: unit %q field %q bounds %d..%d default %d, want a count %s %d..%d default %d",
				name, o.unit, o.field, o.min, o.max, o.def, w.field, w.min, w.max, w.def)
		}
	}

	log := testLogger(t)
	cfg := fileConfig(t, "", "sizes")
	cfg.MaxConnections, cfg.WorkerThreads, cfg.CallbackThreads = 200, 8, 3
	el := newElector(t, log, cfg, nil)
	for name, v := range map[string]int64{"max_connections": 200, "worker_threads": 8, "callback_threads": 3} {
		o, _ := optionNamed(name)
		if got := el.electorOption(o); got != v {
			t.Errorf("%s = %d reads back from the elector in libs3lect as %v", o.field, v, got)
		}
	}
	if got := el.GetConfig(); got.MaxConnections != 200 || got.WorkerThreads != 8 || got.CallbackThreads != 3 {
		t.Errorf("GetConfig: MaxConnections %d WorkerThreads %d CallbackThreads %d, want 200 8 3",
			got.MaxConnections, got.WorkerThreads, got.CallbackThreads)
	}
	start(t, el)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := el.WaitForLeadership(ctx); err != nil {
		t.Fatalf("an elector with MaxConnections 200, WorkerThreads 8, CallbackThreads 3 did not lead a file lock: %v", err)
	}
	changed := *el.GetConfig()
	changed.WorkerThreads = 16
	if err := el.UpdateConfig(changed); err == nil || !strings.Contains(err.Error(), "WorkerThreads") {
		t.Errorf("UpdateConfig changing WorkerThreads: %v, want an error naming it", err)
	}

	lock := filepath.Join(t.TempDir(), "lock.json")
	for _, tc := range []struct {
		set  func(c *ElectorConfig)
		want string
	}{
		{func(c *ElectorConfig) { c.MaxConnections = 1025 }, "MaxConnections must be between 1 and 1024, got 1025"},
		{func(c *ElectorConfig) { c.WorkerThreads = 65 }, "WorkerThreads must be between 1 and 64, got 65"},
		{func(c *ElectorConfig) { c.CallbackThreads = 100 }, "CallbackThreads must be between 1 and 64, got 100"},
		{func(c *ElectorConfig) { c.WorkerThreads = -1 }, "WorkerThreads must not be negative (got -1); use 0 for the default (4), or 1 to 64"},
	} {
		c := ElectorConfig{LockfilePath: lock, ServerID: "n"}
		tc.set(&c)
		err := c.Validate()
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want ErrInvalidConfig containing %q", err, tc.want)
		} else if strings.Contains(err.Error(), " ms") {
			t.Errorf("a count's error speaks of ms: %v", err)
		}
	}
}
