// SPDX-License-Identifier: Apache-2.0

package s3lect

// The C library is found with pkg-config. To build against a build tree
// without installing it, point PKG_CONFIG_PATH at its uninstalled .pc file:
//
//	PKG_CONFIG_PATH=/path/to/build/libs3lect/uninstalled go test ./...
//
// That .pc file also sets an rpath, so the test binaries find libs3lect.so
// at run time without LD_LIBRARY_PATH.

/*
#cgo pkg-config: s3lect
#include <stdlib.h>
#include <s3lect.h>
*/
import "C"

import "unsafe"

func unsafePointer(p *C.char) unsafe.Pointer { return unsafe.Pointer(p) }
