/* SPDX-License-Identifier: Apache-2.0 */
/* trampolines.c - C callbacks that forward to the exported Go functions. */
#include "trampolines.h"

#include "_cgo_export.h"

static void *handle_to_ptr(uintptr_t h)
{
    return (void *)h;
}

static uintptr_t ptr_to_handle(void *p)
{
    return (uintptr_t)p;
}

static void free_handle(void *userdata)
{
    gos3lectFreeHandle(ptr_to_handle(userdata));
}

static void on_event(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    gos3lectEvent(e, (s3lect_event *)ev, ptr_to_handle(userdata));
}

static int on_acquire(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    return gos3lectAcquire(e, (s3lect_event *)ev, ptr_to_handle(userdata));
}

static int store_get(void *userdata, const char *key, int64_t timeout_ms, s3lect_store_result *res)
{
    return gos3lectStoreGet(ptr_to_handle(userdata), (char *)key, timeout_ms, res);
}

static int store_put(void *userdata, const char *key, const void *data, size_t len,
                     const char *if_match, int64_t timeout_ms, s3lect_store_result *res)
{
    return gos3lectStorePut(ptr_to_handle(userdata), (char *)key, (void *)data, len,
                            (char *)if_match, timeout_ms, res);
}

int gos3lect_set_callback(s3lect_elector *e, s3lect_event_kind type, uintptr_t h)
{
    return s3lect_set_callback(e, type, on_event, handle_to_ptr(h), free_handle);
}

int gos3lect_set_acquire_hook(s3lect_elector *e, uintptr_t h)
{
    return s3lect_set_acquire_hook(e, on_acquire, handle_to_ptr(h), free_handle);
}

int gos3lect_set_custom_store(s3lect_config *cfg, uintptr_t h)
{
    return s3lect_config_set_custom_store(cfg, store_get, store_put, handle_to_ptr(h), free_handle);
}
