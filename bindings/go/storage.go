// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
*/
import "C"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/cgo"
	"time"
	"unsafe"
)

// Storage is a custom lock store, with the method set of the Go s3lect
// package's Storage interface. libs3lect calls it on a worker thread of its
// shared runtime (one per process, WorkerThreads workers), one call at a
// time per elector; several electors' calls may run at once, so a Storage
// shared by electors must be safe for concurrent use. The context carries
// the request deadline. From inside a method, libs3lect refuses to stop or
// wait on any elector (Stop then stops on another goroutine and returns at
// once, PeerResponse fails with CodeBusy); do not call WaitForLeadership or
// WaitForNextElection there either.
//
// Implementations report outcomes with the sentinel errors (wrapped or not):
// ErrStorageNotFound, ErrStoragePrecondition, and additionally ErrStorageAuth
// and ErrStorageFatal. Any other error is treated as transient and retried.
type Storage interface {
	// Get returns the object's contents and its etag (any non-empty opaque
	// string that changes on every write), or ErrStorageNotFound.
	Get(ctx context.Context, key string) (data []byte, etag string, err error)

	// PutIfMatch stores data only if the object's current etag is etag, or,
	// when etag is "", only if the object does not exist. It returns
	// ErrStoragePrecondition when the condition certainly failed; an answer
	// that leaves open whether the write landed (a timeout after sending,
	// S3's 409 ConditionalRequestConflict) must be a transient error, so
	// that libs3lect reads the object back.
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) error
}

// ETagPutter is an optional extension of Storage: a store whose conditional
// put also returns the new etag. libs3lect must know the etag of its own
// last write to renew with If-Match, so for a plain Storage this package
// reads the object back after every successful PutIfMatch (checking that
// the body is the one it wrote); a store implementing ETagPutter saves that
// GET on every renewal.
type ETagPutter interface {
	PutIfMatchETag(ctx context.Context, key string, data []byte, etag string) (newETag string, err error)
}

var (
	// ErrStorageNotFound: the object does not exist.
	ErrStorageNotFound = errors.New("object not found")
	// ErrStoragePrecondition: a conditional write lost (the etag changed).
	ErrStoragePrecondition = errors.New("precondition failed")
	// ErrStorageAuth: the store refused the credentials or permissions.
	ErrStorageAuth = errors.New("access denied")
	// ErrStorageFatal: a misconfiguration that retrying will not fix.
	ErrStorageFatal = errors.New("storage misconfigured")
)

// storeBinding is what the C side's custom-store userdata (a cgo.Handle) refers to.
type storeBinding struct {
	s Storage
}

func (b *storeBinding) newHandle() cgo.Handle {
	return newHandle(b)
}

func outcomeOf(err error) C.int {
	switch {
	case err == nil:
		return C.S3LECT_STORE_OK
	case errors.Is(err, ErrStorageNotFound):
		return C.S3LECT_STORE_NOT_FOUND
	case errors.Is(err, ErrStoragePrecondition):
		return C.S3LECT_STORE_PRECONDITION
	case errors.Is(err, ErrStorageAuth):
		return C.S3LECT_STORE_AUTH
	case errors.Is(err, ErrStorageFatal):
		return C.S3LECT_STORE_FATAL
	default:
		return C.S3LECT_STORE_TRANSIENT
	}
}

func setMessage(res *C.s3lect_store_result, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.s3lect_store_result_set_message(res, cs)
}

func setETag(res *C.s3lect_store_result, etag string) C.int {
	cs := C.CString(etag)
	defer C.free(unsafe.Pointer(cs))
	return C.s3lect_store_result_set_etag(res, cs)
}

func setBody(res *C.s3lect_store_result, data []byte) C.int {
	if len(data) == 0 {
		return C.s3lect_store_result_set_body(res, nil, 0)
	}
	return C.s3lect_store_result_set_body(res, unsafe.Pointer(&data[0]), C.size_t(len(data)))
}

// fail reports a failed store call to libs3lect.
func fail(res *C.s3lect_store_result, outcome C.int, msg string) C.int {
	setMessage(res, msg)
	return outcome
}

func storeContext(timeoutMs C.int64_t) (context.Context, context.CancelFunc) {
	if timeoutMs <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond)
}

// recoverStore turns a panic in a Storage method into a transient failure.
func recoverStore(res *C.s3lect_store_result, rc *C.int, op string) {
	if r := recover(); r != nil {
		*rc = fail(res, C.S3LECT_STORE_TRANSIENT, fmt.Sprintf("Storage.%s panicked: %v", op, r))
	}
}

//export gos3lectStoreGet
func gos3lectStoreGet(h C.uintptr_t, key *C.char, timeoutMs C.int64_t, res *C.s3lect_store_result) (rc C.int) {
	defer recoverStore(res, &rc, "Get")
	b := cgo.Handle(h).Value().(*storeBinding)
	ctx, cancel := storeContext(timeoutMs)
	defer cancel()
	data, etag, err := b.s.Get(ctx, C.GoString(key))
	if err != nil {
		return fail(res, outcomeOf(err), "Storage.Get: "+err.Error())
	}
	if etag == "" {
		return fail(res, C.S3LECT_STORE_FATAL, "Storage.Get returned no etag: a Storage must return a non-empty etag with the data")
	}
	if setBody(res, data) != C.S3LECT_OK || setETag(res, etag) != C.S3LECT_OK {
		return fail(res, C.S3LECT_STORE_TRANSIENT, "out of memory")
	}
	return C.S3LECT_STORE_OK
}

//export gos3lectStorePut
func gos3lectStorePut(h C.uintptr_t, key *C.char, data unsafe.Pointer, n C.size_t, ifMatch *C.char,
	timeoutMs C.int64_t, res *C.s3lect_store_result) (rc C.int) {
	defer recoverStore(res, &rc, "PutIfMatch")
	b := cgo.Handle(h).Value().(*storeBinding)
	ctx, cancel := storeContext(timeoutMs)
	defer cancel()
	k := C.GoString(key)
	body := C.GoBytes(data, C.int(n))
	match := ""
	if ifMatch != nil {
		match = C.GoString(ifMatch)
	}
	var newETag string
	var err error
	if ep, ok := b.s.(ETagPutter); ok {
		newETag, err = ep.PutIfMatchETag(ctx, k, body, match)
	} else {
		err = b.s.PutIfMatch(ctx, k, body, match)
	}
	if err != nil {
		return fail(res, outcomeOf(err), "Storage.PutIfMatch: "+err.Error())
	}
	if newETag == "" {
		var out C.int
		newETag, out = readBackETag(ctx, b.s, k, body, res)
		if out != C.S3LECT_STORE_OK {
			return out
		}
	}
	if setETag(res, newETag) != C.S3LECT_OK {
		return fail(res, C.S3LECT_STORE_TRANSIENT, "out of memory")
	}
	return C.S3LECT_STORE_OK
}

// readBackETag learns the etag of the write that just succeeded by reading
// the object back. The body must be the one written: if another node wrote
// in between, taking its etag for ours would let us overwrite its record
// later, so that case is reported as a lost race.
func readBackETag(ctx context.Context, s Storage, key string, body []byte, res *C.s3lect_store_result) (string, C.int) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		got, etag, err := s.Get(ctx, key)
		switch {
		case err == nil && etag != "" && bytes.Equal(got, body):
			return etag, C.S3LECT_STORE_OK
		case err == nil && etag != "":
			return "", fail(res, C.S3LECT_STORE_PRECONDITION,
				"the object changed between Storage.PutIfMatch and the Get that reads its new etag")
		case err == nil:
			return "", fail(res, C.S3LECT_STORE_FATAL, "Storage.Get returned no etag")
		case errors.Is(err, ErrStorageNotFound):
			return "", fail(res, C.S3LECT_STORE_PRECONDITION, "the object vanished right after Storage.PutIfMatch")
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return "", fail(res, C.S3LECT_STORE_TRANSIENT, "Storage.Get after a successful PutIfMatch: "+err.Error())
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	return "", fail(res, outcomeOf(lastErr), "Storage.Get after a successful PutIfMatch: "+lastErr.Error())
}
