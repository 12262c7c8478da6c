// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LeaderRecord is the lock record, as the Go s3lect package names it: the
// JSON object stored in the lock and served by the leadership endpoint. The
// first three fields and Metadata are Go s3lect's; Term, LeaseMs and
// Incarnation are what libs3lect adds (Go s3lect ignores them and writes
// none: missing fields decode as zero). ETag appears only in the leadership
// endpoint's answers.
type LeaderRecord struct {
	LeaderID    string               `json:"leaderID,omitempty"`
	LeaderAddr  string               `json:"leaderAddr,omitempty"`
	LastUpdated time.Time            `json:"lastUpdated"`
	Term        int64                `json:"term,omitempty"`
	LeaseMs     int64                `json:"leaseMs,omitempty"`
	Incarnation string               `json:"incarnation,omitempty"`
	ETag        string               `json:"etag,omitempty"`
	Metadata    LeaderRecordMetadata `json:"-"`
}

// LeaderRecordMetadata is what the store says about the lock object, as in
// the Go s3lect package.
type LeaderRecordMetadata struct {
	ETag string
}

// Released reports whether the record says the lock is free: no leaderID,
// or a zero lastUpdated (how Go s3lect resigns, keeping its leaderID).
func (r *LeaderRecord) Released() bool {
	return r.LeaderID == "" || r.LastUpdated.IsZero()
}

// NewLeadershipHandler returns the handler of the peer leadership endpoint,
// with the Go s3lect package's signature, for serving it from the
// application's own HTTP server:
//
//	mux.HandleFunc("/health/leadership", s3lect.NewLeadershipHandler(elector, logger))
//
// For an *S3Elector it answers exactly as libs3lect's built-in HTTPS server
// (see PeerResponse): GET and HEAD are answered from the request's path and
// query (r.URL.RequestURI()), so mount it at the path followers request
// (PeerHealthPath; other paths get 404); 200 with the lock record as JSON
// ("leaderID", "leaderAddr", "lastUpdated", "term", "etag", ...) while this
// node leads, 404 when it does not, and the long poll (?wait=ms&etag=...),
// which holds the handler's goroutine until the leader renews, leadership
// ends or wait passes (at most 60 s). For any other Elector (a test double,
// say) it answers as Go s3lect does: 200 with a LeaderRecord while
// IsLeader() is true, 404 otherwise. Every answer is JSON with
// Cache-Control: no-store; other methods get 405 with "Allow: GET, HEAD".
// A nil logger means slog.Default().
//
// libs3lect's own server also runs when PeerMode is on (with PeerCert and
// PeerKey, or with neither: zero-config); this handler (or NewHealthServer)
// is for serving the endpoint yourself, e.g. behind your own TLS
// configuration.
func NewLeadershipHandler(elector Elector, logger *slog.Logger) http.HandlerFunc {
	if logger == nil {
		logger = slog.Default()
	}
	s3e, native := elector.(*S3Elector)
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeJSON(w, r, http.StatusMethodNotAllowed,
				[]byte(`{"error":"method not allowed: use GET or HEAD"}`))
			return
		}
		if native {
			status, body, err := s3e.PeerResponse(r.Method, r.URL.RequestURI())
			if err != nil {
				logger.Warn("Leadership endpoint: no answer from libs3lect", "error", err)
				writeJSON(w, r, http.StatusServiceUnavailable, []byte(`{"error":"temporarily unavailable"}`))
				return
			}
			logger.Debug("Leadership endpoint request", "status", status)
			writeJSON(w, r, status, body)
			return
		}
		if !elector.IsLeader() {
			writeJSON(w, r, http.StatusNotFound, []byte(`{"error":"not leader"}`))
			return
		}
		st := elector.GetLeadershipStatus()
		if st == nil {
			logger.Error("Leadership endpoint: no leadership status")
			writeJSON(w, r, http.StatusInternalServerError, []byte(`{"error":"no leadership status"}`))
			return
		}
		body, err := json.Marshal(LeaderRecord{LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr,
			LastUpdated: time.Now().UTC(), Term: st.Term, ETag: st.ETag})
		if err != nil {
			writeJSON(w, r, http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`))
			return
		}
		writeJSON(w, r, http.StatusOK, body)
	}
}

func writeJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// HealthServerConfig configures NewHealthServer, as in the Go s3lect package.
type HealthServerConfig struct {
	// BindAddress is the host:port to listen on (":0" picks a port; see Addr).
	BindAddress string
	// Certificate is the server's TLS certificate (tls.X509KeyPair or
	// tls.LoadX509KeyPair); required.
	Certificate tls.Certificate
	// Elector answers the requests; required.
	Elector Elector
	// Logger, optional (default slog.Default()).
	Logger *slog.Logger
}

// HealthServer is a standalone HTTPS server for the peer leadership endpoint
// at /health/leadership (NewLeadershipHandler), as in the Go s3lect package.
// An *S3Elector with PeerMode does not need one: libs3lect serves the
// endpoint itself (with PeerCert and PeerKey, or zero-config without them).
type HealthServer struct {
	cfg    HealthServerConfig
	logger *slog.Logger
	server *http.Server

	mu      sync.Mutex
	ln      net.Listener
	started bool
	stopped bool
	done    chan struct{} // closed when Serve returns
}

// NewHealthServer checks the configuration and creates the server; Start
// starts it.
func NewHealthServer(config HealthServerConfig) (*HealthServer, error) {
	if config.BindAddress == "" {
		return nil, &Error{Code: CodeInvalid, Op: "NewHealthServer", Msg: "BindAddress is required"}
	}
	if config.Elector == nil {
		return nil, &Error{Code: CodeInvalid, Op: "NewHealthServer", Msg: "Elector is required"}
	}
	if len(config.Certificate.Certificate) == 0 || config.Certificate.PrivateKey == nil {
		return nil, &Error{Code: CodeInvalid, Op: "NewHealthServer",
			Msg: "Certificate is required: the endpoint is served over HTTPS (tls.LoadX509KeyPair)"}
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc(defaultPeerHealthPath, NewLeadershipHandler(config.Elector, config.Logger))
	hs := &HealthServer{cfg: config, logger: config.Logger}
	hs.server = &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{config.Certificate},
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 10 * time.Second,
		// Long polls hold an answer for up to 60 s.
		WriteTimeout: 75 * time.Second,
		IdleTimeout:  60 * time.Second,
		ErrorLog:     slog.NewLogLogger(config.Logger.Handler(), slog.LevelDebug),
	}
	return hs, nil
}

// Start listens on BindAddress and serves in the background. Unlike Go
// s3lect, which binds in the background and only logs a failure, Start
// returns an error when it cannot listen. The server stops when ctx is
// cancelled or Stop is called; it cannot be restarted.
func (hs *HealthServer) Start(ctx context.Context) error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.started {
		return &Error{Code: CodeState, Op: "HealthServer.Start", Msg: "health server already started"}
	}
	if hs.stopped {
		return &Error{Code: CodeStopped, Op: "HealthServer.Start", Msg: "health server was stopped; create a new one"}
	}
	ln, err := net.Listen("tcp", hs.cfg.BindAddress)
	if err != nil {
		return &Error{Code: CodeIO, Op: "HealthServer.Start", Msg: err.Error()}
	}
	hs.started = true
	hs.ln = ln
	hs.done = make(chan struct{})
	hs.logger.Info("Starting leader health server", "addr", ln.Addr().String())
	go func() {
		defer close(hs.done)
		if err := hs.server.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			hs.logger.Error("Health server error", "error", err)
		}
	}()
	if d := ctx.Done(); d != nil {
		go func(done chan struct{}) {
			select {
			case <-d:
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = hs.Stop(sctx)
			case <-done:
			}
		}(hs.done)
	}
	return nil
}

// Addr returns the address the server listens on (with the port the system
// picked for ":0"), or "" before Start.
func (hs *HealthServer) Addr() string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.ln == nil {
		return ""
	}
	return hs.ln.Addr().String()
}

// Stop shuts the server down gracefully, waiting for open requests until
// ctx is done (then closing them). Stopping a server never started, or
// stopped, does nothing.
func (hs *HealthServer) Stop(ctx context.Context) error {
	hs.mu.Lock()
	if !hs.started {
		hs.mu.Unlock()
		return nil
	}
	hs.started = false
	hs.stopped = true
	done := hs.done
	hs.mu.Unlock()
	hs.logger.Info("Stopping leader health server")
	err := hs.server.Shutdown(ctx)
	if err != nil {
		_ = hs.server.Close()
	}
	<-done
	return err
}
