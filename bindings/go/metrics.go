// SPDX-License-Identifier: Apache-2.0

package s3lect

/*
#include <stdlib.h>
#include "s3lect_go.h"
*/
import "C"

import (
	"net/http"
	"unsafe"
)

// MetricsContentType is the Content-Type of MetricsText's exposition.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// MetricsText returns the Prometheus text exposition (format 0.0.4) of the
// given electors, each labelled lock and id (see the repository's
// docs/metrics.md): leadership, terms, transitions, store requests and their
// latency, renewals, peer checks and credential fetches. It never waits for
// the store. With no electors it holds only the process-wide families.
func MetricsText(electors ...*S3Elector) (string, error) {
	locked := make(map[*S3Elector]bool, len(electors))
	for _, e := range electors {
		if e == nil {
			return "", &Error{Code: CodeInvalid, Op: "MetricsText", Msg: "nil elector"}
		}
		if locked[e] { // one read lock per elector (RWMutex read locks do not nest)
			continue
		}
		locked[e] = true
		e.hmu.RLock()
		defer e.hmu.RUnlock()
		if e.c == nil {
			return "", &Error{Code: CodeState, Op: "MetricsText", Msg: "elector was closed"}
		}
	}
	var one *C.s3lect_elector
	size := C.size_t(unsafe.Sizeof(one))
	n := len(electors)
	var list **C.s3lect_elector
	if n > 0 {
		list = (**C.s3lect_elector)(C.calloc(C.size_t(n), size))
		if list == nil {
			return "", &Error{Code: CodeNoMemory, Op: "MetricsText", Msg: "out of memory"}
		}
		defer C.free(unsafe.Pointer(list))
		for i, e := range electors {
			*(**C.s3lect_elector)(unsafe.Add(unsafe.Pointer(list), uintptr(i)*uintptr(size))) = e.c
		}
	}
	var out *C.char
	if rc := C.s3lect_metrics_text(list, C.size_t(n), &out); rc != C.S3LECT_OK {
		return "", newError(rc, "MetricsText", "")
	}
	defer C.s3lect_free(unsafePointer(out))
	return C.GoString(out), nil
}

// MetricsHandler serves MetricsText of the electors over HTTP (GET or HEAD),
// for mounting at /metrics in the application's own server.
func MetricsHandler(electors ...*S3Elector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		text, err := MetricsText(electors...)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", MetricsContentType)
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(text))
		}
	})
}
