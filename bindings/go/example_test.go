// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	s3lect "github.com/s3lect/s3lect/bindings/go"
)

// A node that does leader-only work. The lock here is a local file so the
// example runs anywhere; for S3 set Bucket (and Endpoint for MinIO etc.)
// and use an object key as LockfilePath.
func ExampleNewS3Elector() {
	dir, err := os.MkdirTemp("", "s3lect-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	elector, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{
		Config: &s3lect.ElectorConfig{
			LockfilePath:  filepath.Join(dir, "leader.json"),
			ServerID:      "node-1",
			LeaderTimeout: 3 * time.Second,
			OnAcquireLeadership: func(ctx context.Context) error {
				fmt.Println("acquired: starting leader-only work")
				return nil
			},
			OnLoseLeadership: func(ctx context.Context) error {
				fmt.Println("lost: stopping leader-only work")
				return nil
			},
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := elector.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := elector.WaitForLeadership(ctx); err != nil {
		log.Fatal(err)
	}
	// The lock is new: the first start waits NewLockWait (one LeaderTimeout
	// by default) in case it was deleted under a running leader, and the
	// first term is the clock in ms (terms never repeat across a recreation).
	fmt.Println("leader:", elector.IsLeader(), "term from the clock:", elector.Term() > 1e12)
	if err := elector.Stop(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader after stop:", elector.IsLeader())
	// Output:
	// acquired: starting leader-only work
	// leader: true term from the clock: true
	// lost: stopping leader-only work
	// leader after stop: false
}

// A test of your own with MockStorage, as with Go s3lect: two electors share
// an in-memory lock; the record in the store says who holds it.
func ExampleNewMock() {
	store := s3lect.NewMock()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	newNode := func(id string) *s3lect.S3Elector {
		e, err := s3lect.NewS3Elector(s3lect.S3ElectorOptions{
			Config: &s3lect.ElectorConfig{LockfilePath: "leader/test.json", ServerID: id,
				LeaderTimeout: 3 * time.Second, FrequentInterval: 250 * time.Millisecond, InfrequentInterval: time.Second},
			Storage: store,
			Logger:  quiet,
		})
		if err != nil {
			log.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			log.Fatal(err)
		}
		return e
	}
	holder := func() string {
		data, _, err := store.Get(context.Background(), "leader/test.json")
		if err != nil {
			log.Fatal(err)
		}
		var rec s3lect.LeaderRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			log.Fatal(err)
		}
		if rec.Released() {
			return "nobody"
		}
		return rec.LeaderID
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := newNode("a")
	if err := a.WaitForLeadership(ctx); err != nil {
		log.Fatal(err)
	}
	b := newNode("b")
	fmt.Println("holder:", holder())
	if err := a.Stop(); err != nil { // releases the lock
		log.Fatal(err)
	}
	if err := b.WaitForLeadership(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after a stops:", holder())
	if err := b.Stop(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after b stops:", holder())
	// Output:
	// holder: a
	// after a stops: b
	// after b stops: nobody
}
