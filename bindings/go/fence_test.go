// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package s3lect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFencedWrites is tests/c/test_fence.c's scenario through the Go API, on
// the file store: a leader's writes, a deposed leader's refused.
func TestFencedWrites(t *testing.T) {
	log := testLogger(t)
	dir := t.TempDir()
	lock := filepath.Join(dir, "lock.json")
	obj, other := "file://"+filepath.Join(dir, "state.json"), "file://"+filepath.Join(dir, "other.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a := newElector(t, log, fileConfig(t, lock, "node-a"), nil)
	fa, err := a.Fence()
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	if err := fa.Put(ctx, obj, []byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a put before leading: %v, want ErrNotLeader", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !os.IsNotExist(err) {
		t.Fatalf("refused before anything was sent, yet: %v", err)
	}
	if o, err := fa.Get(ctx, obj); !errors.Is(err, ErrStorageNotFound) || o.Version != "" || o.Term != 0 {
		t.Fatalf("nothing there yet: %+v, %v", o, err)
	}
	if tok := a.FenceToken(); tok != "" {
		t.Fatalf("a token while not leading: %q", tok)
	}

	start(t, a)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := a.WaitForLeadership(wctx); err != nil {
		t.Fatalf("a leads: %v", err)
	}
	ta := a.Term()
	tokA := a.FenceToken()
	if !strings.HasPrefix(tokA, fmt.Sprintf("s3lect-fence.1.%d.", ta)) {
		t.Fatalf("a's token %q for term %d", tokA, ta)
	}

	data := []byte("v1\x00\xff\n") // binary-safe
	if err := fa.Put(ctx, obj, data); err != nil {
		t.Fatalf("a writes: %v", err)
	}
	got, err := fa.Get(ctx, obj)
	if err != nil || string(got.Body) != string(data) || got.Term != ta || got.Version == "" {
		t.Fatalf("a reads back %+v, %v", got, err)
	}
	if err := fa.CAS(ctx, obj, []byte("v2"), got.Version); err != nil {
		t.Fatalf("a's read-modify-write: %v", err)
	}
	if err := fa.CAS(ctx, obj, []byte("v3"), got.Version); !errors.Is(err, ErrStoragePrecondition) {
		t.Fatalf("a stale version: %v, want ErrStoragePrecondition", err)
	}
	if got, err := fa.Get(ctx, obj); err != nil || string(got.Body) != "v2" {
		t.Fatalf("the stale CAS wrote nothing: %+v, %v", got, err)
	}
	if err := fa.CAS(ctx, other, []byte("new"), ""); err != nil {
		t.Fatalf("create-only where there is none: %v", err)
	}
	if err := fa.CAS(ctx, other, []byte("new"), ""); !errors.Is(err, ErrStoragePrecondition) {
		t.Fatalf("create-only where there is one: %v", err)
	}

	// The zombie: a process that still holds a's token after b took over.
	fz, err := NewFenceFromToken(tokA, &ElectorConfig{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fz.Close()
	zo, err := fz.Get(ctx, obj)
	if err != nil {
		t.Fatalf("the zombie reads: %v", err)
	}
	if err := a.StopWithoutRelease(); err != nil { // as a frozen host
		t.Fatal(err)
	}
	b := newElector(t, log, fileConfig(t, lock, "node-b"), nil)
	start(t, b)
	bctx, bcancel := context.WithTimeout(ctx, 15*time.Second)
	defer bcancel()
	if err := b.WaitForLeadership(bctx); err != nil || b.Term() <= ta {
		t.Fatalf("b leads in a newer term: %v (term %d, a's %d)", err, b.Term(), ta)
	}
	fb, err := b.Fence()
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if err := fb.Put(ctx, obj, []byte("v2")); err != nil { // the bytes a wrote last
		t.Fatalf("b writes: %v", err)
	}
	err = fz.CAS(ctx, obj, []byte("zombie"), zo.Version)
	var se *Error
	if !errors.Is(err, ErrFenced) || !errors.As(err, &se) || !strings.Contains(se.Msg, "newer than ours") {
		t.Fatalf("the zombie's CAS: %v, want ErrFenced saying why", err)
	}
	if err := fz.Put(ctx, obj, []byte("zombie")); !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's put: %v, want ErrFenced", err)
	}
	if got, err := fb.Get(ctx, obj); err != nil || string(got.Body) != "v2" || got.Term != b.Term() {
		t.Fatalf("b's bytes are there: %+v, %v", got, err)
	}

	// A delete, then the zombie's re-create.
	if err := fb.Delete(ctx, other); err != nil {
		t.Fatalf("b deletes: %v", err)
	}
	ts, err := fb.Get(ctx, other)
	if !errors.Is(err, ErrStorageNotFound) || ts.Version == "" || ts.Term != b.Term() || ts.Body != nil {
		t.Fatalf("deleted: %+v, %v; want not found with the tombstone's version and term", ts, err)
	}
	if err := fz.CAS(ctx, other, []byte("again"), ""); !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's create-only over the tombstone: %v", err)
	}
	if err := fz.Put(ctx, other, []byte("again")); !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's re-create: %v", err)
	}
	if err := fb.CAS(ctx, other, []byte("back"), ts.Version); err != nil {
		t.Fatalf("b creates it again over the tombstone: %v", err)
	}

	if err := fa.Put(ctx, obj, []byte("late")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a's own fence after it stopped: %v", err)
	}
	if tok := a.FenceToken(); tok != "" {
		t.Fatalf("a stopped, yet its token: %q", tok)
	}
}

func TestFenceArgumentsContextAndClose(t *testing.T) {
	if _, err := NewFenceFromToken("not a token", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("garbage: %v, want ErrInvalidConfig", err)
	}
	f, err := NewFenceFromToken("s3lect-fence.1.3.YQ.cw", nil)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + filepath.Join(t.TempDir(), "x.json")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Put(cancelled, url, []byte("no")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
	ctx := context.Background()
	if _, err := f.Get(ctx, url); !errors.Is(err, ErrStorageNotFound) {
		t.Fatalf("the cancelled put wrote: %v", err)
	}
	if err := f.Put(ctx, url, nil); err != nil {
		t.Fatalf("empty bytes: %v", err)
	}
	if got, err := f.Get(ctx, url); err != nil || len(got.Body) != 0 || got.Term != 3 {
		t.Fatalf("empty bytes back: %+v, %v", got, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := f.Put(ctx, url, []byte("x")); !errors.Is(err, &Error{Code: CodeState}) {
		t.Fatalf("after Close: %v", err)
	}
}
