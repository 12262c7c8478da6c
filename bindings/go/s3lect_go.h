/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3lect_go.h - the libs3lect API header the package compiles against.
 *
 * By default the package compiles libs3lect itself from the bundle beside
 * this file (libs3lect_*.c, copies of libs3lect/src made by
 * scripts/gen-go-bundle: generated in a checkout, published on the release
 * tags), and uses the bundle's copy of s3lect.h. With the
 * build tag s3lect_system it links an installed libs3lect instead
 * (cgo_system.go defines S3LECT_GO_SYSTEM) and uses that library's own
 * s3lect.h, found through pkg-config. The bundled header has a name of its
 * own because cgo puts the package directory first on the include path: a
 * copy named s3lect.h would hide the installed one.
 */
#ifndef GOS3LECT_S3LECT_GO_H
#define GOS3LECT_S3LECT_GO_H

#if defined(S3LECT_GO_SYSTEM)
#include <s3lect.h>
#else
/* The bundle is not committed: a checkout makes it with scripts/gen-go-bundle
 * (a release tag bindings/go/vX.Y.Z holds it). */
#if defined(__has_include)
#if !__has_include("libs3lect_s3lect.h")
#error "bindings/go has no libs3lect_* bundle: run scripts/gen-go-bundle (README.md)"
#endif
#endif
#include "libs3lect_s3lect.h"
#endif

#endif
