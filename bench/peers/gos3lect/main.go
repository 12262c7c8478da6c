// SPDX-License-Identifier: Apache-2.0

// Command gos3lect-node runs one Go s3lect elector (github.com/nadrama-com/s3lect)
// against an S3 lock and reports its leadership on stderr with the same lines
// as `s3lect run`, so the bench and the interop tests can drive it like an
// s3lect node. It runs no command. Go s3lect has no terms: every line says
// term=0.
//
// Go s3lect is not fetched by this module: the build helper
// (tests/harness/gos3lect.py) adds a replace directive pointing at a local
// checkout named by GOS3LECT_SRC.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	gos3lect "github.com/nadrama-com/s3lect"
)

type options struct {
	lock, id, addr, endpoint, region    string
	leaderTimeout, frequent, infrequent time.Duration
	peerTimeout, s3Timeout, pollEvery   time.Duration
	peer                                bool
	peerCert, peerKey, peerCA           string
	verbose                             bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("gos3lect-node", flag.ContinueOnError)
	fs.StringVar(&o.lock, "lock", "", "lock object, s3://BUCKET/KEY (required)")
	fs.StringVar(&o.id, "id", "", "ServerID (required)")
	fs.StringVar(&o.addr, "addr", "", "ServerAddr advertised in the record, and the health server's bind address with --peer (default 127.0.0.1:0 without --peer)")
	fs.StringVar(&o.endpoint, "endpoint", "", "S3 endpoint URL (path-style requests), e.g. http://127.0.0.1:9000")
	fs.StringVar(&o.region, "region", "", "S3 region (default: AWS_REGION, else us-east-1)")
	fs.DurationVar(&o.leaderTimeout, "leader-timeout", 0, "ElectorConfig.LeaderTimeout (0 = Go s3lect's default)")
	fs.DurationVar(&o.frequent, "frequent-interval", 0, "ElectorConfig.FrequentInterval: the period of every node's cycle, leaders' renewals included (0 = default)")
	fs.DurationVar(&o.infrequent, "infrequent-interval", 0, "ElectorConfig.InfrequentInterval (Go s3lect c45cfbd stores it but never uses it)")
	fs.DurationVar(&o.peerTimeout, "peer-timeout", 0, "ElectorConfig.PeerTimeout (0 = default)")
	fs.DurationVar(&o.s3Timeout, "s3-timeout", 10*time.Second, "deadline of one S3 request of this program's Storage")
	fs.DurationVar(&o.pollEvery, "report-interval", time.Second, "how often the elector's status is read for the leader-is and confirmed-leadership lines, as a Go s3lect user would poll IsLeader/GetLeadershipStatus (acquisitions and losses come from the hooks at once)")
	fs.BoolVar(&o.peer, "peer", false, "peer mode: PeerMode, and a HealthServer on --addr")
	fs.StringVar(&o.peerCert, "peer-cert", "", "PEM certificate of the health server (--peer)")
	fs.StringVar(&o.peerKey, "peer-key", "", "PEM key of the health server (--peer)")
	fs.StringVar(&o.peerCA, "peer-ca", "", "PEM CA bundle followers verify the leader's health server with (PeerCACert)")
	fs.BoolVar(&o.verbose, "verbose", false, "Go s3lect's own log at debug level on stderr (default: warnings)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.id == "" {
		return nil, errors.New("--id is required")
	}
	if !strings.HasPrefix(o.lock, "s3://") || !strings.Contains(strings.TrimPrefix(o.lock, "s3://"), "/") {
		return nil, fmt.Errorf("--lock must be s3://BUCKET/KEY, got %q", o.lock)
	}
	if o.peer {
		if o.addr == "" || o.peerCert == "" || o.peerKey == "" {
			return nil, errors.New("--peer needs --addr, --peer-cert and --peer-key")
		}
	} else if o.addr == "" {
		o.addr = "127.0.0.1:0"
	}
	if o.region == "" {
		o.region = os.Getenv("AWS_REGION")
	}
	if o.region == "" {
		o.region = "us-east-1"
	}
	return o, nil
}

// reporter prints the `s3lect run` lines once per transition, whichever of
// Go s3lect's hooks or the status poll notices it first.
type reporter struct {
	mu       sync.Mutex
	id       string
	leading  bool
	leader   string
	stopping bool
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "s3lect: "+format+"\n", args...)
}

func (r *reporter) acquired() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leading {
		r.leading = true
		r.leader = r.id
		say("acquired leadership term=0 id=%s", r.id)
	}
}

func (r *reporter) lost(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		reason = "released"
	}
	if r.leading {
		r.leading = false
		r.leader = ""
		say("lost leadership term=0 reason=%s", reason)
	}
}

func (r *reporter) follows(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leading && id != r.leader {
		r.leader = id
		say("leader is %s term=0", id)
	}
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "gos3lect-node: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(o))
}

func run(o *options) int {
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	bucket, key, _ := strings.Cut(strings.TrimPrefix(o.lock, "s3://"), "/")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := newS3Storage(ctx, bucket, o.endpoint, o.region, o.s3Timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gos3lect-node: %v\n", err)
		return 1
	}

	rep := &reporter{id: o.id}
	cfg := &gos3lect.ElectorConfig{
		LockfilePath:       key,
		ServerID:           o.id,
		ServerAddr:         o.addr,
		FrequentInterval:   o.frequent,
		InfrequentInterval: o.infrequent,
		LeaderTimeout:      o.leaderTimeout,
		PeerMode:           o.peer,
		PeerTimeout:        o.peerTimeout,
		OnAcquireLeadership: func(context.Context) error {
			rep.acquired()
			return nil
		},
		// Called with the elector's lock held when Stop resigns: it must not
		// call back into the elector.
		OnLoseLeadership: func(context.Context) error {
			rep.lost("lost")
			return nil
		},
	}
	if o.peerCA != "" {
		ca, err := os.ReadFile(o.peerCA)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gos3lect-node: --peer-ca: %v\n", err)
			return 2
		}
		cfg.PeerCACert = ca
	}
	el, err := gos3lect.NewS3Elector(gos3lect.S3ElectorOptions{Config: cfg, Storage: store, Logger: logger})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gos3lect-node: %v\n", err)
		return 2
	}

	var hs *gos3lect.HealthServer
	if o.peer {
		cert, err := tls.LoadX509KeyPair(o.peerCert, o.peerKey)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gos3lect-node: --peer-cert/--peer-key: %v\n", err)
			return 2
		}
		hs, err = gos3lect.NewHealthServer(gos3lect.HealthServerConfig{
			BindAddress: o.addr, Certificate: cert, Elector: el, Logger: logger})
		if err != nil {
			fmt.Fprintf(os.Stderr, "gos3lect-node: %v\n", err)
			return 2
		}
		if err := hs.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "gos3lect-node: %v\n", err)
			return 1
		}
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	say("following %s as %s (Go s3lect)", o.lock, o.id)
	if err := el.Start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "gos3lect-node: %v\n", err)
		return 1
	}

	// Go s3lect's "Confirmed leadership" path (a fresh record already naming
	// this id) and a loss noticed outside the hooks are only visible in the
	// status; followers' leader is read from it too. Once a second, as a Go
	// s3lect user would check it: every acquisition by takeover and every
	// loss calls a hook, which prints at once, so the bench's failover times
	// do not wait for this poll, and its CPU is what the elector costs, not
	// a 20 ms busy loop's.
	tick := time.NewTicker(o.pollEvery)
	defer tick.Stop()
	leaderTimeout := el.GetConfig().LeaderTimeout
	for {
		select {
		case <-sigs:
			rep.mu.Lock()
			rep.stopping = true
			rep.mu.Unlock()
			if el.IsLeader() {
				say("releasing leadership")
			}
			// Stop resigns (the record keeps leaderID, lastUpdated becomes
			// the zero time) when this node leads.
			_ = el.Stop()
			rep.lost("released")
			if hs != nil {
				sctx, scancel := context.WithTimeout(context.Background(), time.Second)
				_ = hs.Stop(sctx)
				scancel()
			}
			say("stopped")
			return 0
		case <-tick.C:
			st := el.GetLeadershipStatus()
			switch {
			case st.IsLeader:
				rep.acquired()
			default:
				rep.lost("stepped_down")
				if st.LeaderID != "" && st.LeaderID != o.id && !st.LeaderLastSeen.IsZero() &&
					time.Since(st.LeaderLastSeen) < leaderTimeout {
					rep.follows(st.LeaderID)
				}
			}
		}
	}
}

// httpStatus is the HTTP status of a failed S3 call, 0 if it has none.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// drain keeps connections reusable.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, rc)
	_ = rc.Close()
}
