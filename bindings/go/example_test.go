package s3lect_test

import (
	"context"
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
	fmt.Println("leader:", elector.IsLeader(), "term:", elector.Term())
	if err := elector.Stop(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader after stop:", elector.IsLeader())
	// Output:
	// acquired: starting leader-only work
	// leader: true term: 1
	// lost: stopping leader-only work
	// leader after stop: false
}
