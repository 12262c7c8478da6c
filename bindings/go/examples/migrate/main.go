// SPDX-License-Identifier: Apache-2.0

// Command migrate is a controller written for the Go s3lect package: it
// runs its reconcile loop only while it is the leader, serves the peer
// leadership endpoint over HTTPS, mounts it (and a status page) on its
// own operations server too, and exits cleanly on SIGINT or SIGTERM,
// handing leadership over at once. It builds unchanged against Go s3lect
// (import "github.com/nadrama-com/s3lect") and against the s3lect Go
// binding: only the import line differs. docs/compat.md walks through it.
//
// The lock lives in a directory (MockStorage) so that the example runs
// anywhere; a production program passes its S3 Storage instead.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
)

func main() {
	id := flag.String("id", "", "this node's ServerID (required)")
	addr := flag.String("addr", "127.0.0.1:8993", "address of the leadership endpoint, advertised to peers")
	lockDir := flag.String("lock-dir", "", "directory that holds the lock (required)")
	lockKey := flag.String("lock", "leader/controller.json", "key of the lock file")
	certFile := flag.String("tls-cert", "", "PEM certificate of the leadership endpoint (optional)")
	keyFile := flag.String("tls-key", "", "PEM key of the leadership endpoint")
	opsAddr := flag.String("ops-addr", "", "address of the plain-HTTP operations server (optional)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*id, *addr, *lockDir, *lockKey, *certFile, *keyFile, *opsAddr, logger); err != nil {
		logger.Error("controller: failed", "error", err)
		os.Exit(1)
	}
	logger.Info("controller: shut down cleanly")
}

func run(id, addr, lockDir, lockKey, certFile, keyFile, opsAddr string, logger *slog.Logger) error {
	if id == "" || lockDir == "" {
		return fmt.Errorf("-id and -lock-dir are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	storage, err := s3lect.NewMockStorage(lockDir)
	if err != nil {
		return err
	}
	elector, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{
		Config: &s3lect.ElectorConfig{
			LockfilePath:       lockKey,
			ServerID:           id,
			ServerAddr:         addr,
			FrequentInterval:   time.Second,
			InfrequentInterval: 5 * time.Second,
			LeaderTimeout:      6 * time.Second,
			OnAcquireLeadership: func(ctx context.Context) error {
				logger.Info("controller: acquired leadership")
				return nil
			},
			OnLoseLeadership: func(ctx context.Context) error {
				logger.Info("controller: lost leadership")
				return nil
			},
		},
		Storage: storage,
		Logger:  logger,
	})
	if err != nil {
		return err
	}
	if err := elector.Start(ctx); err != nil {
		return err
	}
	defer elector.Stop()

	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return err
		}
		health, err := s3lect.NewHealthServer(s3lect.HealthServerConfig{
			BindAddress: addr,
			Certificate: cert,
			Elector:     elector,
			Logger:      logger,
		})
		if err != nil {
			return err
		}
		if err := health.Start(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			health.Stop(sctx)
		}()
	}

	if opsAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/health/leadership", s3lect.NewLeadershipHandler(elector, logger))
		mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(elector.GetLeadershipStatus())
		})
		ops := &http.Server{Addr: opsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := ops.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("controller: operations server failed", "error", err)
			}
		}()
		defer ops.Close()
	}

	for ctx.Err() == nil {
		if err := elector.WaitForLeadership(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			logger.Warn("controller: not leader yet", "error", err)
			sleep(ctx, time.Second)
			continue
		}
		status := elector.GetLeadershipStatus()
		logger.Info("controller: leading, starting work", "leaderID", status.LeaderID)
		reconcileWhileLeader(ctx, elector, logger)
		logger.Info("controller: work stopped")
	}
	return nil
}

// reconcileWhileLeader does the leader-only work until leadership ends or
// ctx is cancelled.
func reconcileWhileLeader(ctx context.Context, elector s3lect.Elector, logger *slog.Logger) {
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	passes := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if !elector.IsLeader() {
			return
		}
		passes++
		logger.Info("controller: reconciled", "pass", passes)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
