package s3lect

import (
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
		if goTypeOf(o.typ) == nil {
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
				o.name, o.field, goTypeOf(o.typ))
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
				ms := o.min + 7 // in bounds, and no default
				f.SetInt(ms * int64(time.Millisecond))
				want = ms
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

// Bounds and defaults are the library's: a zero duration takes libs3lect's
// default, one past the maximum is refused under the field's name.
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
		switch o.name {
		case "renew_interval", "renew_deadline", "infrequent_interval": // derived (TestConfigDefaults)
		default:
			if got := time.Duration(f.Int()); got != time.Duration(o.def)*time.Millisecond {
				t.Errorf("%s default %v, libs3lect's is %d ms", o.field, got, o.def)
			}
		}
		bad := ElectorConfig{LockfilePath: lock, ServerID: "n"}
		bf, _ := bad.configField(o)
		bf.SetInt((o.max + 1) * int64(time.Millisecond))
		err := bad.Validate()
		if err == nil || !strings.Contains(err.Error(), o.field) {
			t.Errorf("%s = %d ms (max %d ms): error %v does not name the field", o.field, o.max+1, o.max, err)
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
