// SPDX-License-Identifier: Apache-2.0

//go:build !cgo

package s3lect

// This file is the whole package when cgo is off (CGO_ENABLED=0, which is
// also the default when cross-compiling without CC set): every other file
// needs cgo, because the package links the C library libs3lect. The
// declaration below does not compile on purpose, so that such a build fails
// with one error that says what to do, instead of errors about identifiers
// declared in the cgo files.

var _ int = "s3lect requires cgo: build with CGO_ENABLED=1 and a C compiler for the target (CC=...), and the -dev packages of libcurl, OpenSSL and cJSON (see bindings/go/README.md)"
