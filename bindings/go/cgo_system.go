// SPDX-License-Identifier: Apache-2.0

//go:build cgo && s3lect_system

package s3lect

// With the build tag s3lect_system (go build -tags s3lect_system) the package
// links an installed libs3lect, found with pkg-config, instead of compiling
// its bundled copy of the C sources (libs3lect_bundle.go and libs3lect_*.c,
// which that tag leaves out). To build against a build tree without
// installing it, point PKG_CONFIG_PATH at its uninstalled .pc file:
//
//	PKG_CONFIG_PATH=/path/to/build/libs3lect/uninstalled go test -tags s3lect_system ./...
//
// That .pc file names the tree's static libs3lect.a, so the programs need no
// libs3lect.so at run time.

/*
#cgo pkg-config: s3lect
#cgo CFLAGS: -DS3LECT_GO_SYSTEM
*/
import "C"

const linkedSystem = true
