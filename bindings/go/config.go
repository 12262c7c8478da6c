package s3lect

/*
#include <stdlib.h>
#include <s3lect.h>
#include "trampolines.h"
*/
import "C"

import (
	"bytes"
	"context"
	"fmt"
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
	// (recorded as leaderAddr; the leader's certificate must name its host).
	// Optional without peer mode (unlike in the Go s3lect package).
	ServerAddr string

	// FrequentInterval is the follower poll period during transitions (default 5s).
	FrequentInterval time.Duration

	// InfrequentInterval is the follower poll period while leadership is
	// stable (default 30s, at least FrequentInterval).
	InfrequentInterval time.Duration

	// LeaderTimeout is the lease: how long the lock must stay unchanged
	// before a follower may take over (default 15s).
	LeaderTimeout time.Duration

	// PeerMode lets stable followers ask the leader over HTTPS instead of
	// reading the lock object, and makes the leader serve its leadership
	// there (libs3lect's own HTTPS server on PeerListen, default ServerAddr).
	// It needs ServerAddr, PeerCACert, PeerCert and PeerKey. See
	// docs/peer.md in the repository.
	PeerMode bool

	// PeerHealthPath is the path of the leader's peer endpoint (default
	// "/health/leadership"; a missing leading "/" is added).
	PeerHealthPath string

	// PeerTimeout bounds one peer check and the release write on Stop (default 3s).
	PeerTimeout time.Duration

	// PeerCACert is the PEM CA bundle followers use to verify the leader;
	// under mTLS (PeerClientCert set) the leader also verifies its clients
	// with it. Required with PeerMode (or use EnablePeerMode).
	PeerCACert []byte

	// OnAcquireLeadership runs after this node acquired the lock, while the
	// lease keeps being renewed. Returning an error vetoes: the node
	// releases the lock and backs off for one FrequentInterval before
	// competing again. It runs on a libs3lect thread, never concurrently
	// with the other hooks of the same elector.
	OnAcquireLeadership func(ctx context.Context) error

	// OnLoseLeadership runs after this node stopped being leader (lease lost,
	// lost race, veto, Stop); LostReasonFrom(ctx) says why. Its error is
	// logged; it cannot keep leadership.
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
	// RenewDeadline/2, i.e. 5s with the default lease).
	RenewInterval time.Duration
	// RenewDeadline: the leader steps down if it could not renew for this
	// long (default 2/3 of LeaderTimeout). Needs RenewInterval <
	// RenewDeadline < LeaderTimeout.
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

	// PeerListen is the address the leadership endpoint listens on (default
	// ServerAddr); "127.0.0.1:0" picks a free port, see PeerPort.
	PeerListen string
	// PeerCert and PeerKey are the endpoint's certificate chain and private
	// key: PEM, or the path of a PEM file.
	PeerCert []byte
	PeerKey  []byte
	// PeerClientCert is this node's client certificate and key in one PEM
	// (or its path). Setting it turns on mTLS: the node presents it as a
	// follower, and as leader requires client certificates signed by PeerCACert.
	PeerClientCert []byte

	// OnLeaderChange runs when this node observes a new leader (including
	// itself, and "" when the lock was released). term is the fencing token
	// of that leadership.
	OnLeaderChange func(leaderID, leaderAddr string, term int64)
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

// cDefaults reads libs3lect's own defaults, so that they are not repeated here.
func cDefault(opt C.s3lect_option) time.Duration {
	cfg := C.s3lect_config_new()
	if cfg == nil {
		return 0
	}
	defer C.s3lect_config_free(cfg)
	var v C.int64_t
	if C.s3lect_config_get_int(cfg, opt, &v) != C.S3LECT_OK {
		return 0
	}
	return time.Duration(v) * time.Millisecond
}

// fillDefaults replaces zero fields by the values the elector will use.
func (c *ElectorConfig) fillDefaults() error {
	if c.LockfilePath == "" {
		return invalid("LockfilePath is required (an S3 key with Bucket, or a lock URL such as s3://bucket/key)")
	}
	if c.ServerID == "" {
		return invalid("ServerID is required: a unique name for this node")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"FrequentInterval", c.FrequentInterval}, {"InfrequentInterval", c.InfrequentInterval},
		{"LeaderTimeout", c.LeaderTimeout}, {"PeerTimeout", c.PeerTimeout},
		{"RenewInterval", c.RenewInterval}, {"RenewDeadline", c.RenewDeadline},
		{"RequestTimeout", c.RequestTimeout}, {"MaxLeaseTimeout", c.MaxLeaseTimeout},
	} {
		if d.v < 0 {
			return invalid("%s must not be negative (got %v); use 0 for the default", d.name, d.v)
		}
	}
	def := func(p *time.Duration, opt C.s3lect_option) {
		if *p == 0 {
			*p = cDefault(opt)
		}
	}
	def(&c.LeaderTimeout, C.S3LECT_OPT_LEASE_TIMEOUT)
	// Derived from the lease so that setting only LeaderTimeout (all a Go
	// s3lect user sets) gives a valid configuration: 15s -> 10s -> 5s.
	if c.RenewDeadline == 0 {
		c.RenewDeadline = (c.LeaderTimeout * 2 / 3).Truncate(time.Millisecond)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = (c.RenewDeadline / 2).Truncate(time.Millisecond)
	}
	def(&c.FrequentInterval, C.S3LECT_OPT_FREQUENT_INTERVAL)
	if c.InfrequentInterval == 0 {
		c.InfrequentInterval = max(cDefault(C.S3LECT_OPT_INFREQUENT_INTERVAL), c.FrequentInterval)
	}
	def(&c.MaxClockSkew, C.S3LECT_OPT_MAX_CLOCK_SKEW)
	def(&c.MaxLeaseTimeout, C.S3LECT_OPT_MAX_LEASE_TIMEOUT) // 0: 4 × LeaderTimeout, computed by libs3lect
	def(&c.PeerTimeout, C.S3LECT_OPT_PEER_TIMEOUT)
	def(&c.RequestTimeout, C.S3LECT_OPT_REQUEST_TIMEOUT)
	if c.PeerHealthPath == "" {
		c.PeerHealthPath = "/health/leadership"
	} else if !strings.HasPrefix(c.PeerHealthPath, "/") {
		c.PeerHealthPath = "/" + c.PeerHealthPath
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

func configErrmsg(cfg *C.s3lect_config) string {
	var buf [1024]C.char
	C.s3lect_config_errmsg(cfg, &buf[0], C.size_t(len(buf)))
	return goFieldNames.Replace(C.GoString(&buf[0]))
}

// goFieldNames rewrites libs3lect's option names in its messages into the
// ElectorConfig field names a Go user sets.
var goFieldNames = strings.NewReplacer(
	"lease_timeout", "LeaderTimeout",
	"renew_interval", "RenewInterval",
	"renew_deadline", "RenewDeadline",
	"infrequent_interval", "InfrequentInterval",
	"frequent_interval", "FrequentInterval",
	"max_clock_skew", "MaxClockSkew",
	"max_lease_timeout", "MaxLeaseTimeout",
	"peer_health_path", "PeerHealthPath",
	"peer_timeout", "PeerTimeout",
	"request_timeout", "RequestTimeout",
	"server_id", "ServerID",
	"server_addr", "ServerAddr",
	"peer_client_cert", "PeerClientCert",
	"peer_cert", "PeerCert",
	"peer_key", "PeerKey",
	"peer_ca", "PeerCACert",
	"peer_listen", "PeerListen",
	"set lock to", "set LockfilePath to",
)

// setTiming sets the options s3lect_update_config applies, and
// MaxLeaseTimeout, which it does not apply but checks LeaderTimeout against.
func (cc *cconfig) setTiming(c *ElectorConfig) {
	cc.dur(C.S3LECT_OPT_LEASE_TIMEOUT, "LeaderTimeout", c.LeaderTimeout)
	cc.dur(C.S3LECT_OPT_RENEW_INTERVAL, "RenewInterval", c.RenewInterval)
	cc.dur(C.S3LECT_OPT_RENEW_DEADLINE, "RenewDeadline", c.RenewDeadline)
	cc.dur(C.S3LECT_OPT_FREQUENT_INTERVAL, "FrequentInterval", c.FrequentInterval)
	cc.dur(C.S3LECT_OPT_INFREQUENT_INTERVAL, "InfrequentInterval", c.InfrequentInterval)
	cc.dur(C.S3LECT_OPT_MAX_CLOCK_SKEW, "MaxClockSkew", max(c.MaxClockSkew, 0))
	cc.dur(C.S3LECT_OPT_PEER_TIMEOUT, "PeerTimeout", c.PeerTimeout)
	cc.dur(C.S3LECT_OPT_REQUEST_TIMEOUT, "RequestTimeout", c.RequestTimeout)
	cc.dur(C.S3LECT_OPT_MAX_LEASE_TIMEOUT, "MaxLeaseTimeout", c.MaxLeaseTimeout)
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
	cc.str(C.S3LECT_OPT_LOCK, "LockfilePath", c.lock())
	cc.str(C.S3LECT_OPT_SERVER_ID, "ServerID", c.ServerID)
	cc.str(C.S3LECT_OPT_SERVER_ADDR, "ServerAddr", c.ServerAddr)
	cc.setTiming(c)
	cc.flag(C.S3LECT_OPT_PEER_MODE, "PeerMode", c.PeerMode)
	cc.str(C.S3LECT_OPT_PEER_HEALTH_PATH, "PeerHealthPath", c.PeerHealthPath)
	cc.bytes(C.S3LECT_OPT_PEER_CA, "PeerCACert", c.PeerCACert)
	cc.str(C.S3LECT_OPT_ENDPOINT, "Endpoint", c.Endpoint)
	cc.str(C.S3LECT_OPT_REGION, "Region", c.Region)
	if c.PathStyle {
		cc.flag(C.S3LECT_OPT_PATH_STYLE, "PathStyle", true)
	}
	cc.str(C.S3LECT_OPT_CA_FILE, "CAFile", c.CAFile)
	cc.str(C.S3LECT_OPT_ACCESS_KEY_ID, "AccessKeyID", c.AccessKeyID)
	cc.str(C.S3LECT_OPT_SECRET_ACCESS_KEY, "SecretAccessKey", c.SecretAccessKey)
	cc.str(C.S3LECT_OPT_SESSION_TOKEN, "SessionToken", c.SessionToken)
	cc.str(C.S3LECT_OPT_PROFILE, "Profile", c.Profile)
	cc.str(C.S3LECT_OPT_PEER_LISTEN, "PeerListen", c.PeerListen)
	cc.bytes(C.S3LECT_OPT_PEER_CERT, "PeerCert", c.PeerCert)
	cc.bytes(C.S3LECT_OPT_PEER_KEY, "PeerKey", c.PeerKey)
	cc.bytes(C.S3LECT_OPT_PEER_CLIENT_CERT, "PeerClientCert", c.PeerClientCert)
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
