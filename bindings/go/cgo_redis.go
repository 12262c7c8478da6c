// SPDX-License-Identifier: Apache-2.0

//go:build cgo && !s3lect_system && s3lect_redis

package s3lect

// The build tag s3lect_redis compiles the bundle's Redis store
// (libs3lect_store_redis.c) with hiredis, found with pkg-config (Debian:
// libhiredis-dev): `go build -tags s3lect_redis`. Without the tag the
// bundle needs no hiredis, and a redis:// lock says how to get the store.
// With s3lect_system the installed libs3lect has Redis when it was built
// with hiredis (CMake S3LECT_REDIS).

/*
#cgo CFLAGS: -DS3LECT_HAVE_HIREDIS=1
#cgo pkg-config: hiredis
*/
import "C"
