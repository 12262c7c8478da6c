// SPDX-License-Identifier: Apache-2.0

//go:build cgo && !s3lect_redis && !s3lect_system

package s3lect

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Without the build tag s3lect_redis the bundle has no Redis store.
const haveRedis = false

// A redis:// lock then fails in one line that says how to get the store,
// before anything is tried on the network.
func TestRedisWithoutTheTagSaysHow(t *testing.T) {
	cfg := &ElectorConfig{LockfilePath: "redis://127.0.0.1:1/k", ServerID: "a",
		LeaderTimeout: 3 * time.Second, RenewDeadline: 2 * time.Second,
		RenewInterval: 500 * time.Millisecond}
	el, err := NewS3Elector(S3ElectorOptions{Config: cfg, Logger: testLogger(t)})
	if err == nil {
		err = el.Start(context.Background())
		defer el.Stop()
	}
	if err == nil || !strings.Contains(err.Error(), "-tags s3lect_redis") ||
		!strings.Contains(err.Error(), "hiredis") {
		t.Fatalf("a redis:// lock without the Redis store: got %v, want the line naming "+
			"hiredis and -tags s3lect_redis", err)
	}
}
