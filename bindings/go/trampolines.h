/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trampolines.h - C side of the cgo binding.
 *
 * C cannot call Go function values, and C must not keep Go pointers. So every
 * callback libs3lect sees is one of the static functions in trampolines.c; its
 * userdata is a runtime/cgo.Handle (an integer, not a pointer) that the
 * exported Go functions turn back into the Go value. The handle is deleted by
 * gos3lectFreeHandle when libs3lect calls the userdata_free function, which it
 * does exactly once per registration.
 */
#ifndef GOS3LECT_TRAMPOLINES_H
#define GOS3LECT_TRAMPOLINES_H

#include <stdint.h>

#include "s3lect_go.h"

/* Registers the Go event dispatcher for one event type; h is a cgo.Handle. */
int gos3lect_set_callback(s3lect_elector *e, s3lect_event_kind type, uintptr_t h);
/* Registers the Go acquire hook; h is a cgo.Handle. */
int gos3lect_set_acquire_hook(s3lect_elector *e, uintptr_t h);
/* Makes cfg use a Go Storage; h is a cgo.Handle of the Go store binding. */
int gos3lect_set_custom_store(s3lect_config *cfg, uintptr_t h);

#endif
