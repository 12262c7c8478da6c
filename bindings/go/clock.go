// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Clock is a virtual clock for tests (docs/testing-your-code.md in the
// repository; the package s3lecttest wraps it for testing.T). Electors made
// with S3ElectorOptions.Clock (a "mem://NAME" lock, no peer mode) are not
// run by libs3lect's threads: Advance runs every step due in that much
// virtual time, in order, on the calling goroutine -- their store requests
// and their hooks -- and nothing happens between two calls. Start schedules
// an elector's first step at the current virtual time (Advance(0) runs it);
// Stop writes the release at once. The same test runs the same way every
// time.
//
// A Clock is safe for concurrent use; advances run one at a time. Close it
// when done (electors made on it keep what they need of it).
type Clock struct {
	mu sync.RWMutex // held (read) during each C call; Close takes it
	c  *C.s3lect_clock
}

// NewClock returns a virtual clock at 0 whose electors' wall clock reads
// wallStart then (the zero time: the Unix epoch).
func NewClock(wallStart time.Time) *Clock {
	var ms int64
	if !wallStart.IsZero() {
		ms = wallStart.UnixMilli()
	}
	c := &Clock{c: C.s3lect_clock_new(C.int64_t(ms))}
	if c.c == nil {
		panic("s3lect_clock_new: out of memory")
	}
	runtime.SetFinalizer(c, (*Clock).Close)
	return c
}

func (c *Clock) handle(op string) (*C.s3lect_clock, error) {
	if c == nil || c.c == nil {
		return nil, &Error{Code: CodeState, Op: op, Msg: "clock was closed"}
	}
	return c.c, nil
}

// Advance runs the electors on c through d of virtual time, on this
// goroutine. It returns an error of CodeBusy when called from a hook that
// an Advance of the same clock runs, and CodeInvalid for d < 0.
func (c *Clock) Advance(d time.Duration) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, err := c.handle("Advance")
	if err != nil {
		return err
	}
	if rc := C.s3lect_clock_advance(h, C.int64_t(d.Milliseconds())); rc != C.S3LECT_OK {
		msg := ""
		if rc == C.S3LECT_EBUSY {
			msg = "Advance was called from a hook that an Advance of the same clock runs"
		}
		return newError(rc, "Advance", msg)
	}
	return nil
}

// Now returns the virtual time since the clock's start (in a hook: the
// time of its event).
func (c *Clock) Now() time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.c == nil {
		return 0
	}
	return time.Duration(C.s3lect_clock_now(c.c)) * time.Millisecond
}

// SetLatency makes every store request of c's electors answered d of
// virtual time after it is sent (default 0).
func (c *Clock) SetLatency(d time.Duration) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, err := c.handle("SetLatency")
	if err != nil {
		return err
	}
	if rc := C.s3lect_clock_set_latency(h, C.int64_t(d.Milliseconds())); rc != C.S3LECT_OK {
		return newError(rc, "SetLatency", "")
	}
	return nil
}

// Close lets go of the clock; electors made on it keep it as long as they
// need. Safe to call more than once.
func (c *Clock) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		C.s3lect_clock_free(c.c)
		c.c = nil
	}
}

// MemReset drops every object of the in-memory store "mem://NAME" (give the
// lock URL or NAME): a fresh store for the next test.
func MemReset(lock string) error {
	name := C.CString(memName(lock))
	defer C.free(unsafe.Pointer(name))
	if rc := C.s3lect_mem_reset(name); rc != C.S3LECT_OK {
		return newError(rc, "MemReset", "not a mem:// lock or name: "+lock)
	}
	return nil
}

// MemFail makes the next n requests (reads or writes, of any elector) to
// "mem://NAME" fail as a store outage does; n = 0 ends it.
func MemFail(lock string, n int64) error {
	name := C.CString(memName(lock))
	defer C.free(unsafe.Pointer(name))
	if rc := C.s3lect_mem_fail(name, C.int64_t(n)); rc != C.S3LECT_OK {
		return newError(rc, "MemFail", "not a mem:// lock or name, or n < 0: "+lock)
	}
	return nil
}

// memName is the NAME of "mem://NAME[/KEY]", or lock itself.
func memName(lock string) string {
	if len(lock) >= 6 && (lock[:6] == "mem://" || lock[:6] == "MEM://") {
		rest := lock[6:]
		for i := 0; i < len(rest); i++ {
			if rest[i] == '/' {
				return rest[:i]
			}
		}
		return rest
	}
	return lock
}
