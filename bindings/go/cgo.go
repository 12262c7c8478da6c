// SPDX-License-Identifier: Apache-2.0

package s3lect

// The C library: by default the package compiles it from the bundled copy of
// libs3lect's sources (libs3lect_bundle.go); with the build tag s3lect_system
// it links an installed one (cgo_system.go).

/*
#include <stdlib.h>
#include "s3lect_go.h"
*/
import "C"

import "unsafe"

func unsafePointer(p *C.char) unsafe.Pointer { return unsafe.Pointer(p) }
