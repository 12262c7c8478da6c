// SPDX-License-Identifier: Apache-2.0

//go:build cgo && !s3lect_system

package s3lect

// Without the build tag s3lect_system the package compiles libs3lect from
// the bundle of its C sources beside this file (libs3lect_*.c and *.h, and
// the cgo directives of libs3lect_bundle.go), all generated from
// libs3lect/ by scripts/gen-go-bundle: `go get` and `go build` need a C
// compiler and the -dev packages of libcurl, OpenSSL and cJSON, and no
// libs3lect installed. The bundle is not committed to the main line: a
// checkout generates it in place, and a release tag bindings/go/vX.Y.Z
// names a commit that holds it (scripts/release-go-tree).
const linkedSystem = false
