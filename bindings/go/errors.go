// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include "s3lect_go.h"
*/
import "C"

import "fmt"

// Code is a libs3lect error code (negative; 0 is success).
type Code int

// Error codes returned by libs3lect. Their values are part of the C ABI.
const (
	CodeInvalid      Code = C.S3LECT_EINVAL
	CodeNoMemory     Code = C.S3LECT_ENOMEM
	CodeState        Code = C.S3LECT_ESTATE
	CodeBusy         Code = C.S3LECT_EBUSY
	CodeTimedOut     Code = C.S3LECT_ETIMEDOUT
	CodeStopped      Code = C.S3LECT_ESTOPPED
	CodeAuth         Code = C.S3LECT_EAUTH
	CodeTransient    Code = C.S3LECT_ETRANSIENT
	CodeFatal        Code = C.S3LECT_EFATAL
	CodeCorrupt      Code = C.S3LECT_ECORRUPT
	CodePrecondition Code = C.S3LECT_EPRECONDITION
	CodeNotFound     Code = C.S3LECT_ENOTFOUND
	CodeIO           Code = C.S3LECT_EIO
	CodeUnsupported  Code = C.S3LECT_EUNSUPPORTED
	CodeCallback     Code = C.S3LECT_ECALLBACK
	CodeFenced       Code = C.S3LECT_EFENCED
	CodeNotLeader    Code = C.S3LECT_ENOTLEADER
	CodeRetries      Code = C.S3LECT_ERETRIES
)

// String returns libs3lect's static description of the code.
func (c Code) String() string {
	return C.GoString(C.s3lect_strerror(C.int(c)))
}

// Error is an error reported by libs3lect or by this package. Use errors.Is
// with the Err* sentinels below to test for a kind of error, or errors.As to
// read the code and the detailed message.
type Error struct {
	Code Code   // what kind of failure
	Op   string // the operation that failed, e.g. "NewS3Elector"
	Msg  string // the detailed message ("" for the sentinels)
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = e.Code.String()
	}
	if e.Op == "" {
		return "s3lect: " + msg
	}
	return fmt.Sprintf("s3lect: %s: %s", e.Op, msg)
}

// Is reports whether target is a sentinel (an *Error with no Op and no Msg)
// of the same code, so that errors.Is(err, ErrInvalidConfig) works for every
// invalid-configuration error whatever its message.
//
// An error with code CodeAuth also matches ErrStorageAuth, and one with
// code CodeFatal ErrStorageFatal, whether the store is S3, a file or a
// custom Storage; a Fence's CodeNotFound matches ErrStorageNotFound and its
// CodePrecondition ErrStoragePrecondition.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrStorageAuth:
		return e.Code == CodeAuth
	case ErrStorageFatal:
		return e.Code == CodeFatal
	case ErrStorageNotFound:
		return e.Code == CodeNotFound
	case ErrStoragePrecondition:
		return e.Code == CodePrecondition
	}
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Msg == "" && t.Code == e.Code
}

// Sentinel errors for errors.Is.
var (
	// ErrInvalidConfig: the configuration was rejected; the message says why.
	ErrInvalidConfig error = &Error{Code: CodeInvalid}
	// ErrAlreadyStarted: Start was called on a started elector.
	ErrAlreadyStarted error = &Error{Code: CodeState}
	// ErrStopped: the elector is stopped (electors cannot be restarted) or was
	// stopped while a Wait method was waiting.
	ErrStopped error = &Error{Code: CodeStopped}
	// ErrVersionMismatch: the loaded libs3lect is not the version this package
	// was compiled against.
	ErrVersionMismatch error = &Error{Code: CodeUnsupported}
	// ErrFenced: a fenced write (Fence) was refused because a newer term, or
	// another holder of this term, wrote the object last; nothing was
	// written. This process is a deposed leader: stop acting as one.
	ErrFenced error = &Error{Code: CodeFenced}
	// ErrNotLeader: the call needs the elector to lead and it does not: a
	// write of its Fence (refused before anything was sent), or Transfer.
	ErrNotLeader error = &Error{Code: CodeNotLeader}
	// ErrRetriesExhausted: other writers kept changing the object between a
	// fenced write's read and its write; nothing was written.
	ErrRetriesExhausted error = &Error{Code: CodeRetries}
)

func newError(code C.int, op, msg string) error {
	return &Error{Code: Code(code), Op: op, Msg: msg}
}
