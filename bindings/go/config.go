// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
#include "trampolines.h"
*/
import "C"

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unsafe"
)

// ElectorConfig configures an elector. The first group of fields has the
// names and meaning of the Go s3lect package's ElectorConfig; the second
// group is specific to this package. A zero value means "the default".
type ElectorConfig struct {
	// LockfilePath names the lock object. With Bucket set it is the object
	// key in that bucket; with a custom Storage it is the key passed to it;
	// otherwise it is a lock URL: "s3://bucket/key", "file:///dir/key" or a
	// plain file path (file store: processes on one host, no S3 needed).
	LockfilePath string

	// ServerID is this node's unique identifier (1..255 bytes), recorded in
	// the lock as leaderID.
	ServerID string

	// ServerAddr is the "host:port" advertised to followers for peer mode
	// (recorded as leaderAddr; a leader's PeerCert must name its host).
	// Optional (unlike in the Go s3lect package), in peer mode too: by
	// default the leadership endpoint listens on the address of the
	// interface that routes to the store (127.0.0.1 for a file lock or a
	// loopback endpoint), on PeerListen's port or a free one, and advertises
	// that.
	ServerAddr string

	// FrequentInterval is the follower poll period during transitions (default 5s).
	FrequentInterval time.Duration

	// InfrequentInterval is the follower poll period while leadership is
	// stable (at least FrequentInterval). Default: FrequentInterval, which
	// is how often Go s3lect's followers poll (its own default of 30s is
	// never used). libs3lect's default, and the CLI's, is 30s: set it (to
	// 30s, say) to make stable followers read the store less often, at the
	// price of noticing a release or a crash up to that much later (peer
	// mode avoids both the reads and the delay).
	InfrequentInterval time.Duration

	// LeaderTimeout is the lease: how long the lock must stay unchanged
	// before a follower may take over (default 15s).
	LeaderTimeout time.Duration

	// PeerMode lets stable followers ask the leader over HTTPS instead of
	// reading the lock object, and makes the leader serve its leadership
	// there (libs3lect's own HTTPS server on PeerListen, default ServerAddr).
	// PeerMode: true alone is enough (zero-config): at Start the node makes
	// a key and a self-signed certificate in memory, writes the key's
	// SHA-256 into the lock records it writes (peerKeySha256), and followers
	// pin that key; no CA, certificate or ServerAddr is needed. A cluster
	// with a CA of its own sets PeerCACert, PeerCert and PeerKey instead
	// (and PeerClientCert for mTLS). See docs/peer.md in the repository.
	PeerMode bool

	// PeerHealthPath is the path of the leader's peer endpoint (default
	// "/health/leadership"; a missing leading "/" is added).
	PeerHealthPath string

	// PeerTimeout bounds one peer check and the release write on Stop (default 3s).
	PeerTimeout time.Duration

	// PeerCACert is the PEM CA bundle followers use to verify a leader's
	// certificate; under mTLS (PeerClientCert set) the leader also verifies
	// its clients with it. Required with PeerCert and PeerKey; not used in
	// zero-config peer mode (a leader whose record names its key is pinned).
	PeerCACert []byte

	// OnAcquireLeadership runs after this node acquired the lock, while the
	// lease keeps being renewed. Returning an error vetoes: the node
	// releases the lock and backs off for one FrequentInterval before
	// competing again. It runs on a callback thread of libs3lect's shared
	// runtime, never concurrently with the other hooks of the same elector.
	OnAcquireLeadership func(ctx context.Context) error

	// OnLoseLeadership runs after this node stopped being leader (lease lost,
	// lost race, veto, Stop, a transfer); LostReasonFrom(ctx) says why. Its
	// error is logged; it cannot keep leadership.
	OnLoseLeadership func(ctx context.Context) error

	// ---- specific to this package ----

	// Bucket, when set, makes the lock "s3://Bucket/LockfilePath".
	Bucket string
	// Endpoint is the S3 endpoint URL, e.g. "http://127.0.0.1:9000".
	// Default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then AWS.
	Endpoint string
	// Region is the S3 region. Default: AWS_REGION, AWS_DEFAULT_REGION, the
	// profile, then "us-east-1".
	Region string
	// PathStyle forces path-style addressing (automatic for IP addresses
	// and localhost).
	PathStyle bool
	// CAFile is a PEM CA bundle for HTTPS to S3 (default: the system's).
	CAFile string
	// AccessKeyID, SecretAccessKey and SessionToken are explicit credentials.
	// Default: AWS_ACCESS_KEY_ID etc., then the shared credentials files.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// Profile is the AWS shared-config profile (default AWS_PROFILE, "default").
	Profile string

	// RenewInterval is how often the leader rewrites the lock (default
	// 5s; with LeaderTimeout or RenewDeadline set, libs3lect derives
	// min(LeaderTimeout/3, RenewDeadline/2), as for every front end).
	RenewInterval time.Duration
	// RenewDeadline: the leader steps down if it could not renew for this
	// long (default 10s; with LeaderTimeout set, libs3lect derives 2/3 of
	// it). Needs RenewInterval < RenewDeadline < LeaderTimeout.
	RenewDeadline time.Duration
	// MaxClockSkew turns on the opt-in wall-clock takeover rule: a follower
	// may also take over a record whose lastUpdated is older than the lease
	// plus MaxClockSkew by its own wall clock. It assumes that every node's
	// wall clock stays within MaxClockSkew of every other's, steps
	// included: a larger clock step can give two leaders. Default 0: the
	// rule is off (a negative value is the same as 0).
	MaxClockSkew time.Duration
	// MaxLeaseTimeout bounds the lease a lock record may advertise: its
	// leaseMs is read as at most this, so that a hostile or broken record
	// cannot block the lock for ever. Default 0: 4 × LeaderTimeout. When
	// set it must be at least LeaderTimeout, and every node's LeaderTimeout
	// must be at most every other node's bound. UpdateConfig cannot change it.
	MaxLeaseTimeout time.Duration
	// RequestTimeout bounds one store request (default 10s).
	RequestTimeout time.Duration
	// LeaderHold is how long after the send of its last successful renewal
	// this node's leadership may still act: what the application runs
	// under it is stopped by then. Default 0: RenewDeadline (raised to it
	// when below). The records carry it as holdMs, and a follower never
	// backdates a record by the store's clock so far that it leads before
	// it (docs/algorithm.md "The store's clock").
	LeaderHold time.Duration
	// NewLockWait is how long a node that has never seen the lock waits,
	// after reading it missing, before it creates it: a lock deleted (by
	// hand, a lifecycle or TTL rule, a store that lost its data) while a
	// leader this node cannot see still runs must not get a second leader.
	// A brand-new lock pays it once, on its first start. Default 0: the
	// lease (LeaderTimeout, at least LeaderHold). A negative value creates a
	// missing lock at once: only where no leader of it can be running (a
	// lock name never used before, a test). With mixed timings, set it to
	// the longest LeaderTimeout of any node of the lock.
	NewLockWait time.Duration

	// Priority is this node's priority (default 0, 0..1000000). A follower
	// of higher priority than its leader's that has followed for a lease
	// without a break asks for the lock, and the leader hands it over as
	// with Transfer (at most once a lease). Equal priorities keep the plain
	// election. UpdateConfig cannot change it.
	Priority int
	// MaxHold is the longest this node leads before it hands the lock to a
	// live follower, as Transfer("") would (default 0: never): rotation, to
	// exercise failover. Without a live follower it keeps leading and tries
	// again a lease later. UpdateConfig cannot change it.
	MaxHold time.Duration

	// OnTransfer runs when this leader is asked to hand the lock over
	// (Transfer, `s3lect transfer`, a follower of higher Priority, MaxHold)
	// and the target targetID confirmed it is live: stop the leader work,
	// then call TransferCommit (in the hook or later, from any goroutine);
	// OnLoseLeadership (LostTransferred) follows. A transfer not committed
	// within twice the lease is abandoned (logged) and this node keeps
	// leading. Without OnTransfer this node never hands over (nothing would
	// stop its leader work before the target starts): a warning is logged
	// and the transfer is abandoned.
	OnTransfer func(targetID string, term int64)

	// PeerListen is the address the leadership endpoint listens on (default
	// ServerAddr, else the address of the interface that routes to the
	// store on a free port); "127.0.0.1:0" picks a free port, see PeerPort.
	PeerListen string
	// PeerCert and PeerKey are the endpoint's certificate chain and private
	// key: PEM, or the path of a PEM file. Both or neither: neither is
	// zero-config peer mode.
	PeerCert []byte
	PeerKey  []byte
	// PeerClientCert is this node's client certificate and key in one PEM
	// (or its path). Setting it turns on mTLS: the node presents it as a
	// follower, and as leader requires client certificates signed by
	// PeerCACert. It needs PeerCert, PeerKey and PeerCACert (zero-config
	// peer mode does not verify clients).
	PeerClientCert []byte

	// OnLeaderChange runs when this node observes a new leader (including
	// itself, and "" when the lock was released). term is the fencing token
	// of that leadership.
	OnLeaderChange func(leaderID, leaderAddr string, term int64)

	// The sizes of libs3lect's shared runtime: one per process, whatever
	// the number of electors (docs/threading.md in the repository). They
	// are counts, not durations; 0 means libs3lect's default. They are
	// process-wide: the runtime grows to the largest value any started
	// elector asked for and does not shrink while it runs. UpdateConfig
	// cannot change them.

	// MaxConnections is the most keep-alive connections the process opens
	// to one S3 endpoint (default 64, 1..1024); further requests wait in
	// order.
	MaxConnections int
	// WorkerThreads is the number of threads that run blocking stores:
	// file locks and custom Storage (default 4, 1..64).
	WorkerThreads int
	// CallbackThreads is the number of threads that run the hooks (default
	// 2, 1..64); more are added while every one is held by a slow hook.
	CallbackThreads int
}

// Validate fills in the defaults of zero fields (as the Go s3lect package
// does) and checks the configuration with libs3lect's own rules. The error
// says what to change; errors.Is(err, ErrInvalidConfig) holds for it.
func (c *ElectorConfig) Validate() error {
	if err := versionCheck(); err != nil {
		return err
	}
	if err := c.fillDefaults(); err != nil {
		return err
	}
	cc, err := c.toC(nil)
	if err != nil {
		return err
	}
	C.s3lect_config_free(cc)
	return nil
}

// lock returns the lock string handed to libs3lect.
func (c *ElectorConfig) lock() string {
	if c.Bucket != "" {
		return "s3://" + c.Bucket + "/" + strings.TrimPrefix(c.LockfilePath, "/")
	}
	return c.LockfilePath
}

func invalid(format string, args ...any) error {
	return &Error{Code: CodeInvalid, Op: "config", Msg: fmt.Sprintf(format, args...)}
}

// negativeIsZero are the duration options for which a negative value means
// 0 rather than a mistake (MaxClockSkew: the rule is off).
var negativeIsZero = map[string]bool{"max_clock_skew": true}

// zeroIsDefault are the duration options whose library default is not a
// value a Go field can hold as its zero: 0 sends the default (-1), and a
// negative value sends 0 (NewLockWait: at once).
var zeroIsDefault = map[string]bool{"new_lock_wait": true}

// fillDefaults replaces zero fields by the values the elector will use:
// libs3lect's defaults and the timings it derives (fillFromLibrary).
func (c *ElectorConfig) fillDefaults() error {
	if c.LockfilePath == "" {
		return invalid("LockfilePath is required (an S3 key with Bucket, or a lock URL such as s3://bucket/key)")
	}
	if c.ServerID == "" {
		return invalid("ServerID is required: a unique name for this node")
	}
	for _, o := range libOptions {
		f, ok := c.configField(o)
		switch {
		case !ok || negativeIsZero[o.name] || zeroIsDefault[o.name]:
		case o.isDuration() && f.Int() < 0:
			return invalid("%s must not be negative (got %v); use 0 for the default", o.field, time.Duration(f.Int()))
		case o.isCount() && f.Int() < 0:
			return invalid("%s must not be negative (got %d); use 0 for the default (%d), or %d to %d",
				o.field, f.Int(), o.def, o.min, o.max)
		}
	}
	// Go s3lect's followers poll every FrequentInterval whatever leadership
	// looks like (its InfrequentInterval is never used): unset, ours does the
	// same, so a ported program notices a release or a crash as soon as it
	// did. Setting it (30s is libs3lect's own default) makes stable
	// followers read the store less often.
	if c.InfrequentInterval == 0 {
		c.InfrequentInterval = c.FrequentInterval
		if c.InfrequentInterval == 0 {
			c.InfrequentInterval = durationDefault("frequent_interval")
		}
	}
	// Every other zero duration and count: the value libs3lect derives from
	// the fields that are set, or its default (one rule, in the library).
	if err := c.fillFromLibrary(); err != nil {
		return err
	}
	if c.PeerHealthPath == "" {
		c.PeerHealthPath = defaultPeerHealthPath
	} else if !strings.HasPrefix(c.PeerHealthPath, "/") {
		c.PeerHealthPath = "/" + c.PeerHealthPath
	}
	return nil
}

// fillFromLibrary sets the zero duration and count fields to the values
// libs3lect gives them when only the non-zero ones are set: its defaults,
// and the timings it derives (s3lect_config_is_set: LeaderTimeout alone
// gives RenewDeadline 2/3 of it and RenewInterval min(1/3 of it,
// RenewDeadline/2)). A bad mix gets the library's message.
func (c *ElectorConfig) fillFromLibrary() error {
	cc := &cconfig{p: C.s3lect_config_new()}
	if cc.p == nil {
		return &Error{Code: CodeNoMemory, Op: "config"}
	}
	defer C.s3lect_config_free(cc.p)
	// Only the timings are checked here; toC checks the rest.
	cc.str(C.S3LECT_OPT_LOCK, "LockfilePath", "file:///s3lect-go-timings")
	cc.str(C.S3LECT_OPT_SERVER_ID, "ServerID", "timings")
	var unset []optionInfo
	for _, o := range libOptions {
		f, ok := c.configField(o)
		switch {
		case !ok || !(o.isDuration() || o.isCount()):
		case f.Int() == 0:
			unset = append(unset, o)
		default:
			cc.setOption(c, o)
		}
	}
	if cc.err != nil {
		return cc.err
	}
	if rc := C.s3lect_config_validate(cc.p); rc != C.S3LECT_OK {
		return &Error{Code: Code(rc), Op: "config", Msg: configErrmsg(cc.p)}
	}
	for _, o := range unset {
		f, _ := c.configField(o)
		v, _ := readCOption(cc.p, o).(int64)
		if zeroIsDefault[o.name] {
			continue // its zero is the default
		}
		if o.isDuration() {
			v *= int64(time.Millisecond)
		}
		f.SetInt(v)
	}
	return nil
}

// LoadEnv sets the zero fields from the S3LECT_* variables in environ,
// which has the form of os.Environ(). The names and the syntax are
// libs3lect's, one map for every front end (s3lect_config_set_from_env:
// S3LECT_LOCK sets LockfilePath, S3LECT_SERVER_ID or S3LECT_ID ServerID,
// S3LECT_LEASE_TIMEOUT LeaderTimeout, S3LECT_PEER_LISTEN PeerListen, ...):
// durations need a unit ("15s", "500ms", "1m30s"; a bare number other than
// 0 is refused), counts are whole numbers, booleans 1/0, true/false, yes/no
// or on/off. An empty variable is unset; a field already set wins over its
// variable. The store's own variables (AWS_REGION, AWS_ENDPOINT_URL_S3,
// AWS_ACCESS_KEY_ID, ...) are not fields: libs3lect reads them from the
// process's environment when the store opens.
func (c *ElectorConfig) LoadEnv(environ []string) error {
	p := C.s3lect_config_new()
	if p == nil {
		return &Error{Code: CodeNoMemory, Op: "config"}
	}
	defer C.s3lect_config_free(p)
	// The C strings live in C memory, and so does the array that points at them.
	cenv := (**C.char)(C.calloc(C.size_t(len(environ)+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	if cenv == nil {
		return &Error{Code: CodeNoMemory, Op: "config"}
	}
	items := unsafe.Slice(cenv, len(environ)+1)
	defer func() {
		for _, s := range items {
			C.free(unsafe.Pointer(s))
		}
		C.free(unsafe.Pointer(cenv))
	}()
	for i, kv := range environ {
		items[i] = C.CString(kv)
	}
	if rc := C.s3lect_config_set_from_env(p, cenv); rc != C.S3LECT_OK {
		return &Error{Code: Code(rc), Op: "config", Msg: configErrmsg(p)}
	}
	for _, o := range libOptions {
		f, ok := c.configField(o)
		if !ok || !f.IsZero() || C.s3lect_config_is_set(p, o.opt) != 1 {
			continue
		}
		switch v := readCOption(p, o).(type) {
		case string:
			if f.Kind() == reflect.Slice {
				f.SetBytes([]byte(v))
			} else {
				f.SetString(v)
			}
		case int64:
			switch {
			case o.typ == C.S3LECT_OPTION_BOOL:
				f.SetBool(v != 0)
			case zeroIsDefault[o.name] && v < 0: // the default: the zero field
			case zeroIsDefault[o.name] && v == 0: // at once: a negative field
				f.SetInt(-1)
			case o.isDuration():
				f.SetInt(v * int64(time.Millisecond))
			default:
				f.SetInt(v)
			}
		}
	}
	return nil
}

func ms(d time.Duration) C.int64_t {
	return C.int64_t(d / time.Millisecond)
}

// cconfig wraps a C config being filled, remembering the first failure.
type cconfig struct {
	p   *C.s3lect_config
	err error
}

func (cc *cconfig) fail(rc C.int, field string) {
	if rc == C.S3LECT_OK || cc.err != nil {
		return
	}
	msg := configErrmsg(cc.p)
	if msg == "" {
		msg = "invalid value (" + Code(rc).String() + ")"
	}
	cc.err = &Error{Code: Code(rc), Op: "config", Msg: field + ": " + msg}
}

func (cc *cconfig) str(opt C.s3lect_option, field, v string) {
	if v == "" {
		return
	}
	cs := C.CString(v)
	defer C.free(unsafe.Pointer(cs))
	cc.fail(C.s3lect_config_set_str(cc.p, opt, cs), field)
}

func (cc *cconfig) dur(opt C.s3lect_option, field string, v time.Duration) {
	cc.fail(C.s3lect_config_set_int(cc.p, opt, ms(v)), field)
}

func (cc *cconfig) count(opt C.s3lect_option, field string, v int64) {
	cc.fail(C.s3lect_config_set_int(cc.p, opt, C.int64_t(v)), field)
}

func (cc *cconfig) flag(opt C.s3lect_option, field string, v bool) {
	b := C.int(0)
	if v {
		b = 1
	}
	cc.fail(C.s3lect_config_set_bool(cc.p, opt, b), field)
}

func (cc *cconfig) bytes(opt C.s3lect_option, field string, v []byte) {
	if len(v) == 0 {
		return
	}
	cc.fail(C.s3lect_config_set_bytes(cc.p, opt, unsafe.Pointer(&v[0]), C.size_t(len(v))), field)
}

// defaultPeerHealthPath is libs3lect's default peer_health_path, read once
// from a new configuration (the library holds the default, not a copy here).
var defaultPeerHealthPath = func() string {
	p := C.s3lect_config_new()
	if p == nil {
		panic("s3lect: out of memory")
	}
	defer C.s3lect_config_free(p)
	o, _ := optionNamed("peer_health_path")
	v, _ := readCOption(p, o).(string)
	return v
}()

func configErrmsg(cfg *C.s3lect_config) string {
	var buf [1024]C.char
	C.s3lect_config_errmsg(cfg, &buf[0], C.size_t(len(buf)))
	return goFieldNames.Replace(C.GoString(&buf[0]))
}

// goFieldNames rewrites libs3lect's option names in its messages into the
// ElectorConfig field names a Go user sets (built from libOptions).
var goFieldNames = newFieldNames()

// setTiming sets the duration options: the ones s3lect_update_config
// applies, and MaxLeaseTimeout, which it does not apply but checks
// LeaderTimeout against.
func (cc *cconfig) setTiming(c *ElectorConfig) {
	for _, o := range libOptions {
		if f, ok := c.configField(o); ok && o.isDuration() {
			cc.durField(o, f)
		}
	}
}

// durField sets the duration option o from its field f.
func (cc *cconfig) durField(o optionInfo, f reflect.Value) {
	d := time.Duration(f.Int())
	if negativeIsZero[o.name] {
		d = max(d, 0)
	}
	if zeroIsDefault[o.name] {
		switch {
		case d == 0:
			cc.fail(C.s3lect_config_set_int(cc.p, o.opt, C.int64_t(o.def)), o.field)
			return
		case d < 0:
			d = 0
		}
	}
	cc.dur(o.opt, o.field, d)
}

// setOptions sets every library option that has a field: the lock from
// lock() (Bucket and LockfilePath), the durations, the counts, and the
// other fields by their option type. An empty string or byte slice and a false bool leave
// the library's default (a bool option whose default is on would need
// another rule: TestOptionsCoverEveryLibraryOption refuses one).
func (cc *cconfig) setOptions(c *ElectorConfig) {
	for _, o := range libOptions {
		cc.setOption(c, o)
	}
}

// setOption sets option o from its field, if it has one.
func (cc *cconfig) setOption(c *ElectorConfig, o optionInfo) {
	f, ok := c.configField(o)
	switch {
	case o.name == "lock":
		cc.str(o.opt, o.field, c.lock())
	case !ok:
	case o.isDuration():
		cc.durField(o, f)
	case o.isCount():
		cc.count(o.opt, o.field, f.Int())
	case o.typ == C.S3LECT_OPTION_STR:
		cc.str(o.opt, o.field, f.String())
	case o.typ == C.S3LECT_OPTION_BOOL:
		if f.Bool() {
			cc.flag(o.opt, o.field, true)
		}
	case o.typ == C.S3LECT_OPTION_BYTES:
		cc.bytes(o.opt, o.field, f.Bytes())
	}
}

// toC builds and validates a C config from a config whose defaults are
// filled in. store, if not nil, is installed as a custom store. The caller
// frees the result with s3lect_config_free.
func (c *ElectorConfig) toC(store *storeBinding) (*C.s3lect_config, error) {
	p := C.s3lect_config_new()
	if p == nil {
		return nil, &Error{Code: CodeNoMemory, Op: "config"}
	}
	cc := &cconfig{p: p}
	cc.setOptions(c)
	if cc.err == nil && store != nil {
		if rc := C.gos3lect_set_custom_store(p, C.uintptr_t(store.newHandle())); rc != C.S3LECT_OK {
			cc.fail(rc, "Storage")
		}
	}
	if cc.err == nil {
		if rc := C.s3lect_config_validate(p); rc != C.S3LECT_OK {
			cc.err = &Error{Code: Code(rc), Op: "config", Msg: configErrmsg(p)}
		}
	}
	if cc.err != nil {
		C.s3lect_config_free(p)
		return nil, cc.err
	}
	return p, nil
}

// immutableDiff names the first field that UpdateConfig cannot change, or "".
func (c *ElectorConfig) immutableDiff(o *ElectorConfig) string {
	switch {
	case c.LockfilePath != o.LockfilePath:
		return "LockfilePath"
	case c.Bucket != o.Bucket:
		return "Bucket"
	case c.ServerID != o.ServerID:
		return "ServerID"
	case c.ServerAddr != o.ServerAddr:
		return "ServerAddr"
	case c.MaxLeaseTimeout != o.MaxLeaseTimeout:
		return "MaxLeaseTimeout"
	case c.Priority != o.Priority:
		return "Priority"
	case c.MaxHold != o.MaxHold:
		return "MaxHold"
	case c.MaxConnections != o.MaxConnections, c.WorkerThreads != o.WorkerThreads,
		c.CallbackThreads != o.CallbackThreads:
		return "the runtime sizes (MaxConnections, WorkerThreads, CallbackThreads)"
	case c.Endpoint != o.Endpoint, c.Region != o.Region, c.PathStyle != o.PathStyle,
		c.CAFile != o.CAFile, c.Profile != o.Profile:
		return "the S3 settings (Endpoint, Region, PathStyle, CAFile, Profile)"
	case c.AccessKeyID != o.AccessKeyID, c.SecretAccessKey != o.SecretAccessKey,
		c.SessionToken != o.SessionToken:
		return "the credentials"
	case c.PeerMode != o.PeerMode, c.PeerHealthPath != o.PeerHealthPath, c.PeerListen != o.PeerListen,
		!bytes.Equal(c.PeerCACert, o.PeerCACert), !bytes.Equal(c.PeerCert, o.PeerCert),
		!bytes.Equal(c.PeerKey, o.PeerKey), !bytes.Equal(c.PeerClientCert, o.PeerClientCert):
		return "the peer settings (use EnablePeerMode before Start)"
	}
	return ""
}
