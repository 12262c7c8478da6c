// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include "s3lect_go.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// HeaderVersion is the libs3lect version this package was compiled against.
const HeaderVersion = C.S3LECT_VERSION_STRING

const headerVersionNumber = int(C.S3LECT_VERSION_NUMBER)

// LibraryVersion returns the version of the libs3lect loaded at run time.
func LibraryVersion() string {
	return C.GoString(C.s3lect_version())
}

var versionCheck = sync.OnceValue(func() error {
	return checkVersion(headerVersionNumber, int(C.s3lect_version_number()))
})

// checkVersion accepts a library with the header's major and minor version
// and a patch level at least the header's: before 1.0 a minor release may
// change the ABI, so only patch releases are interchangeable.
func checkVersion(header, lib int) error {
	if lib/100 == header/100 && lib%100 >= header%100 {
		return nil
	}
	return &Error{Code: CodeUnsupported, Op: "version check", Msg: fmt.Sprintf(
		"this Go package was compiled against libs3lect %s but the loaded library is %s (%d); "+
			"rebuild the Go program against the library it runs with "+
			"(check PKG_CONFIG_PATH and the library search path)",
		versionString(header), LibraryVersion(), lib)}
}

func versionString(n int) string {
	return fmt.Sprintf("%d.%d.%d", n/10000, n/100%100, n%100)
}
