// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"unsafe"
)

// Fence makes fenced writes (docs/fencing.md in the repository): each write
// goes only over an older term, or over this same leadership's own writes,
// so that a leader deposed without knowing it (a GC pause, a frozen host, a
// slow network) gets ErrFenced instead of overwriting its successor's
// bytes. Objects are named by URLs of the lock's schemes ("s3://BUCKET/KEY",
// "gs://", "az://", "file://", ...) and stored in an envelope that Get
// strips.
//
// Make one with (*S3Elector).Fence (its term while it leads) or
// NewFenceFromToken (a process that holds only a fence token), and Close it.
// Its methods are safe for concurrent use; the calls of one fence run one at
// a time. Each blocks up to a few of the store's request timeouts. When ctx
// is done first, a method returns ctx.Err() at once, but the store request
// already sent finishes in the background (a write may still land, fenced
// as ever); the fence's next call waits for it.
//
// Errors (errors.Is): ErrFenced (a newer term wrote the object: stop acting
// as leader, do not retry), ErrNotLeader, ErrStoragePrecondition (CAS over
// another version), ErrRetriesExhausted, ErrStorageNotFound (Get), and the
// store's (ErrStorageAuth, ErrStorageFatal, an *Error of CodeTransient).
type Fence struct {
	mu sync.Mutex // held during each C call and by Close
	c  *C.s3lect_fence
	el *S3Elector // an elector's fence is freed before it: keep it alive
}

// FencedObject is a fenced object as Fence.Get reads it.
type FencedObject struct {
	Body    []byte // its writer's bytes (the envelope stripped)
	Version string // the store's version of it, for Fence.CAS
	Term    int64  // its writer's term (0: an object no fenced writer wrote, read as it is)
}

func newFence(c *C.s3lect_fence, el *S3Elector) *Fence {
	f := &Fence{c: c, el: el}
	runtime.SetFinalizer(f, (*Fence).Close)
	return f
}

// Fence returns a fence for this elector's writes to other objects: its
// term while it leads, its ServerID as the holder, its store settings
// (credentials, endpoint). Each write fails with ErrNotLeader, before
// anything is sent, while the elector does not lead. It never blocks.
func (e *S3Elector) Fence() (*Fence, error) {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	if e.c == nil {
		return nil, &Error{Code: CodeState, Op: "Fence", Msg: "elector was closed"}
	}
	var c *C.s3lect_fence
	if rc := C.s3lect_fence_new(e.c, &c); rc != C.S3LECT_OK {
		return nil, newError(rc, "Fence", "")
	}
	return newFence(c, e), nil
}

// FenceToken returns the fence token of this elector's leadership
// ("s3lect-fence.1.TERM.HOLDER.LOCK"), for a process that writes on its
// behalf (NewFenceFromToken); "" while it does not lead.
func (e *S3Elector) FenceToken() string {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	if e.c == nil {
		return ""
	}
	buf := make([]C.char, 256)
	for {
		n := C.s3lect_fence_token(e.c, &buf[0], C.size_t(len(buf)))
		if int(n) < len(buf) {
			return C.GoStringN(&buf[0], C.int(n))
		}
		buf = make([]C.char, int(n)+1)
	}
}

// NewFenceFromToken returns a fence for a fence token (FenceToken, or
// $S3LECT_FENCE_TOKEN under `s3lect run`): its term and holder. No
// leadership check is possible: the fence alone refuses a stale term.
// Of cfg (nil: the defaults and the store's own variables) only the store
// settings are used: Endpoint, Region, PathStyle, CAFile, AccessKeyID,
// SecretAccessKey, SessionToken, Profile and RequestTimeout. A string that is
// no token is ErrInvalidConfig.
func NewFenceFromToken(token string, cfg *ElectorConfig) (*Fence, error) {
	if err := versionCheck(); err != nil {
		return nil, err
	}
	p := C.s3lect_config_new()
	if p == nil {
		return nil, &Error{Code: CodeNoMemory, Op: "NewFenceFromToken"}
	}
	defer C.s3lect_config_free(p)
	if cfg != nil {
		cc := &cconfig{p: p}
		cc.str(C.S3LECT_OPT_ENDPOINT, "Endpoint", cfg.Endpoint)
		cc.str(C.S3LECT_OPT_REGION, "Region", cfg.Region)
		if cfg.PathStyle {
			cc.flag(C.S3LECT_OPT_PATH_STYLE, "PathStyle", true)
		}
		cc.str(C.S3LECT_OPT_CA_FILE, "CAFile", cfg.CAFile)
		cc.str(C.S3LECT_OPT_ACCESS_KEY_ID, "AccessKeyID", cfg.AccessKeyID)
		cc.str(C.S3LECT_OPT_SECRET_ACCESS_KEY, "SecretAccessKey", cfg.SecretAccessKey)
		cc.str(C.S3LECT_OPT_SESSION_TOKEN, "SessionToken", cfg.SessionToken)
		cc.str(C.S3LECT_OPT_PROFILE, "Profile", cfg.Profile)
		if cfg.RequestTimeout > 0 {
			cc.dur(C.S3LECT_OPT_REQUEST_TIMEOUT, "RequestTimeout", cfg.RequestTimeout)
		}
		if cc.err != nil {
			return nil, cc.err
		}
	}
	ct := C.CString(token)
	defer C.free(unsafe.Pointer(ct))
	var c *C.s3lect_fence
	switch rc := C.s3lect_fence_new_token(p, ct, &c); rc {
	case C.S3LECT_OK:
		return newFence(c, nil), nil
	case C.S3LECT_EINVAL:
		return nil, &Error{Code: CodeInvalid, Op: "NewFenceFromToken",
			Msg: "not a fence token (expected s3lect-fence.1.TERM.HOLDER.LOCK)"}
	default:
		return nil, newError(rc, "NewFenceFromToken", "")
	}
}

// Close frees the fence, after a call still running in the background.
// It may be called more than once.
func (f *Fence) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.c != nil {
		C.s3lect_fence_free(f.c)
		f.c = nil
	}
	f.el = nil
	runtime.SetFinalizer(f, nil)
	return nil
}

// errmsg is the message of the fence's last failed call; f.mu is held.
func (f *Fence) errmsg() string {
	buf := make([]C.char, 512)
	for {
		n := C.s3lect_fence_errmsg(f.c, &buf[0], C.size_t(len(buf)))
		if int(n) < len(buf) {
			return C.GoStringN(&buf[0], C.int(n))
		}
		buf = make([]C.char, int(n)+1)
	}
}

// call runs fn (one C call) with f.mu held on a goroutine of its own and
// returns ran true and its error, or ran false and ctx.Err() as soon as ctx
// is done (fn then finishes in the background, unless it had not begun:
// then it is skipped).
func (f *Fence) call(ctx context.Context, op string, fn func(c *C.s3lect_fence) C.int) (ran bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			done <- ctx.Err()
		case f.c == nil:
			done <- &Error{Code: CodeState, Op: op, Msg: "fence was closed"}
		default:
			if rc := fn(f.c); rc != C.S3LECT_OK {
				done <- newError(rc, op, f.errmsg())
			} else {
				done <- nil
			}
		}
	}()
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// cbytes copies data into C memory (freed by the caller); never NULL.
func cbytes(data []byte) unsafe.Pointer {
	if len(data) == 0 {
		return C.malloc(1)
	}
	return C.CBytes(data)
}

// Get reads a fenced object. errors.Is(err, ErrStorageNotFound) when there
// is none, or a fenced Delete left its tombstone: then the returned object
// has the tombstone's Version and Term (a CAS over that Version creates it
// again), and no Body.
func (f *Fence) Get(ctx context.Context, url string) (FencedObject, error) {
	var obj FencedObject
	ran, err := f.call(ctx, "Fence.Get", func(c *C.s3lect_fence) C.int {
		cu := C.CString(url)
		defer C.free(unsafe.Pointer(cu))
		var body, version *C.char
		var n C.size_t
		var term C.int64_t
		rc := C.s3lect_fenced_get(c, cu, &body, &n, &version, &term)
		if body != nil {
			obj.Body = C.GoBytes(unsafe.Pointer(body), C.int(n))
			C.s3lect_free(unsafe.Pointer(body))
		}
		if version != nil {
			obj.Version = C.GoString(version)
			C.s3lect_free(unsafe.Pointer(version))
		}
		obj.Term = int64(term)
		return rc
	})
	if !ran || (err != nil && !isCode(err, CodeNotFound)) {
		return FencedObject{}, err
	}
	return obj, err // after the call's end: the channel orders obj's writes before
}

// Put writes data at url, fenced (one PUT in the steady state).
// ErrFenced: a newer term (or another holder of this term) wrote it last;
// nothing was written.
func (f *Fence) Put(ctx context.Context, url string, data []byte) error {
	_, err := f.call(ctx, "Fence.Put", func(c *C.s3lect_fence) C.int {
		cu, cd := C.CString(url), cbytes(data)
		defer C.free(unsafe.Pointer(cu))
		defer C.free(cd)
		return C.s3lect_fenced_put(c, cu, cd, C.size_t(len(data)))
	})
	return err
}

// CAS is Put, but only over version (from Get; "": only where there is no
// object at all): read-modify-write. ErrStoragePrecondition when the object
// is at another version (read it again); ErrFenced when a newer term wrote it.
func (f *Fence) CAS(ctx context.Context, url string, data []byte, version string) error {
	_, err := f.call(ctx, "Fence.CAS", func(c *C.s3lect_fence) C.int {
		cu, cd := C.CString(url), cbytes(data)
		defer C.free(unsafe.Pointer(cu))
		defer C.free(cd)
		var cv *C.char
		if version != "" {
			cv = C.CString(version)
			defer C.free(unsafe.Pointer(cv))
		}
		return C.s3lect_fenced_cas(c, cu, cd, C.size_t(len(data)), cv)
	})
	return err
}

// Delete deletes a fenced object: it writes its tombstone (fenced as a
// Put), so that a deposed leader cannot create it again.
func (f *Fence) Delete(ctx context.Context, url string) error {
	_, err := f.call(ctx, "Fence.Delete", func(c *C.s3lect_fence) C.int {
		cu := C.CString(url)
		defer C.free(unsafe.Pointer(cu))
		return C.s3lect_fenced_delete(c, cu)
	})
	return err
}

func isCode(err error, code Code) bool {
	e, ok := err.(*Error)
	return ok && e.Code == code
}
