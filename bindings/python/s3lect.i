/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3lect.i - SWIG interface of the low-level module s3lect._core.
 *
 * This layer is deliberately thin: it exposes the C API of s3lect.h almost
 * one to one. The Pythonic API lives in the s3lect package (_elector.py);
 * applications should use that, not this module.
 *
 * What the typemaps below do:
 *
 * - Callbacks. Every (fn, userdata, userdata_free) triple of the C API is one
 *   Python object here. The C trampolines take the GIL (PyGILState_Ensure),
 *   call the object, and report an exception through sys.unraisablehook
 *   (with its traceback) because there is no Python caller to raise it to.
 *   userdata_free takes the GIL and drops the reference the registration
 *   took. The Pythonic layer catches and logs exceptions itself; the
 *   unraisable hook is only the last line of defence.
 *     s3lect_set_callback(e, type, callable)   callable(event_tuple)
 *     s3lect_set_acquire_hook(e, callable)      callable(event_tuple) -> veto if
 *                                               it raises or returns False
 *     s3lect_config_set_custom_store(cfg, obj)  obj.get(key, timeout_ms) and
 *                                               obj.put(key, data, if_match, timeout_ms)
 *   event_tuple = (type, term, reason, leader_id, leader_addr, code, message, cycle).
 *   A custom store's get/put return (outcome, body, etag, message) with
 *   outcome an S3LECT_STORE_* value; put's if_match is None when the C API
 *   passes NULL ("create only if absent").
 *
 * - The GIL. The module is generated with -threads: every wrapped C call
 *   releases the GIL while it runs, so the blocking calls (s3lect_stop,
 *   s3lect_free_elector, s3lect_wait_for_leadership,
 *   s3lect_wait_for_next_election, s3lect_dispatch, and
 *   s3lect_peer_response with a long poll) never hold it while
 *   waiting for a thread of libs3lect's shared runtime (a callback or a
 *   worker thread) that needs it to run a Python callback or a Python store.
 *
 * - Out-parameters become return values: s3lect_new() returns
 *   (code, elector), s3lect_get_status() (code, status),
 *   s3lect_status_json() (code, str), s3lect_config_get_int() (code, int),
 *   s3lect_metrics_text([electors]) (code, str),
 *   s3lect_wait_for_next_election() (code, cycle),
 *   s3lect_option_info(opt) (code, name, type, min, max, default),
 *   s3lect_peer_response(e, method, target) (code, status, body); bodies the
 *   library allocates are released with s3lect_free() here. snprintf-style getters are
 *   replaced by helpers that return str (s3lect_py_errmsg, ...).
 *
 * - Fenced writes: s3lect_fence_new(e) and s3lect_fence_new_token(cfg, token)
 *   return (code, fence); s3lect_fenced_get(f, url) returns
 *   (code, body, version, term) with body as bytes (binary-safe: the length
 *   the library gives, not up to a NUL) or None; put and cas take bytes.
 *   s3lect_py_fence_token(e) and s3lect_py_fence_errmsg(f) return str. They
 *   block up to a few request timeouts with the GIL released (-threads).
 */
%module(package="s3lect") _core

%begin %{
#define PY_SSIZE_T_CLEAN
%}

%{
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"

/* After Py_Finalize has begun, a foreign thread that takes the GIL may be
 * terminated on the spot (or hang, on newer Pythons). The Pythonic layer
 * stops every elector in an atexit handler, so callbacks should not arrive
 * that late; if one does, it is dropped. */
static int s3py_finalizing(void)
{
#if defined(Py_LIMITED_API)
    /* The limited API (the abi3 wheel, scripts/dist) has neither
     * Py_IsFinalizing nor _Py_IsFinalizing; Py_FinalizeEx clears "initialized"
     * at the moment it marks the runtime finalizing. */
    return !Py_IsInitialized();
#elif PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Calls set(res, the UTF-8 text of str) and returns its result; -1 with a
 * Python exception set if `str` is not a str. PyUnicode_AsUTF8 is not in the
 * limited API of Python 3.9, so the text is taken from a bytes copy. */
static int s3py_set_utf8(s3lect_store_result *res, PyObject *str,
                         int (*set)(s3lect_store_result *, const char *))
{
    PyObject *b = PyUnicode_AsUTF8String(str);
    const char *s;
    int rc;
    if (!b)
        return -1;
    s = PyBytes_AsString(b);
    if (!s) {
        Py_DECREF(b);
        return -1;
    }
    rc = set(res, s); /* copied */
    Py_DECREF(b);
    return rc;
}

static void s3py_report(PyObject *where)
{
    /* Prints "Exception ignored in: <where>" and the traceback via
     * sys.unraisablehook, then clears the error. */
    PyErr_WriteUnraisable(where);
}

static PyObject *s3py_str(const char *s)
{
    if (!s)
        s = "";
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *s3py_event_tuple(const s3lect_event *ev)
{
    return Py_BuildValue("(iLiNNiNK)", s3lect_event_type(ev), (long long)s3lect_event_term(ev),
                         s3lect_event_reason(ev), s3py_str(s3lect_event_leader_id(ev)),
                         s3py_str(s3lect_event_leader_addr(ev)), s3lect_event_code(ev),
                         s3py_str(s3lect_event_message(ev)),
                         (unsigned long long)s3lect_event_cycle(ev));
}

static void s3py_decref(void *userdata)
{
    if (!userdata || s3py_finalizing())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)userdata);
    PyGILState_Release(g);
}

static void s3py_event_trampoline(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    (void)e;
    if (s3py_finalizing())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *fn = (PyObject *)userdata;
    PyObject *args = s3py_event_tuple(ev);
    PyObject *r = args ? PyObject_CallFunctionObjArgs(fn, args, NULL) : NULL;
    if (!r)
        s3py_report(fn);
    Py_XDECREF(r);
    Py_XDECREF(args);
    PyGILState_Release(g);
}

/* Returns nonzero (veto) when the hook raises or returns False. */
static int s3py_acquire_trampoline(s3lect_elector *e, const s3lect_event *ev, void *userdata)
{
    (void)e;
    if (s3py_finalizing())
        return 1;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *fn = (PyObject *)userdata;
    PyObject *args = s3py_event_tuple(ev);
    PyObject *r = args ? PyObject_CallFunctionObjArgs(fn, args, NULL) : NULL;
    int veto;
    if (!r) {
        s3py_report(fn);
        veto = 1;
    } else {
        veto = (r == Py_False);
    }
    Py_XDECREF(r);
    Py_XDECREF(args);
    PyGILState_Release(g);
    return veto;
}

/* Fills res from a (outcome, body, etag, message) tuple returned by a
 * Python store. Returns the outcome; a malformed answer is FATAL. */
static int s3py_store_answer(PyObject *obj, PyObject *r, s3lect_store_result *res)
{
    int outcome;
    PyObject *body, *etag, *msg;
    if (!PyArg_ParseTuple(r, "iOOO", &outcome, &body, &etag, &msg)) {
        s3py_report(obj);
        s3lect_store_result_set_message(
            res, "custom store adapter returned a malformed answer (see the traceback on stderr)");
        return S3LECT_STORE_FATAL;
    }
    if (body != Py_None) {
        char *data;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(body, &data, &len) < 0) {
            s3py_report(obj);
            s3lect_store_result_set_message(res, "custom store: body must be bytes");
            return S3LECT_STORE_FATAL;
        }
        s3lect_store_result_set_body(res, data, (size_t)len);
    }
    if (etag != Py_None) {
        if (s3py_set_utf8(res, etag, s3lect_store_result_set_etag) < 0 && PyErr_Occurred()) {
            s3py_report(obj);
            s3lect_store_result_set_message(res, "custom store: etag must be str");
            return S3LECT_STORE_FATAL;
        }
    }
    if (msg != Py_None) {
        if (s3py_set_utf8(res, msg, s3lect_store_result_set_message) < 0)
            PyErr_Clear();
    }
    return outcome;
}

static int s3py_store_failed(PyObject *obj, s3lect_store_result *res)
{
    s3py_report(obj);
    s3lect_store_result_set_message(res, "custom store raised (see the traceback on stderr)");
    return S3LECT_STORE_TRANSIENT;
}

static int s3py_store_get(void *userdata, const char *key, int64_t timeout_ms,
                          s3lect_store_result *res)
{
    if (s3py_finalizing())
        return S3LECT_STORE_TRANSIENT;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *obj = (PyObject *)userdata;
    PyObject *r = PyObject_CallMethod(obj, "get", "sL", key, (long long)timeout_ms);
    int outcome = r ? s3py_store_answer(obj, r, res) : s3py_store_failed(obj, res);
    Py_XDECREF(r);
    PyGILState_Release(g);
    return outcome;
}

static int s3py_store_put(void *userdata, const char *key, const void *data, size_t len,
                          const char *if_match, int64_t timeout_ms, s3lect_store_result *res)
{
    if (s3py_finalizing())
        return S3LECT_STORE_TRANSIENT;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *obj = (PyObject *)userdata;
    PyObject *r = PyObject_CallMethod(obj, "put", "sy#zL", key, (const char *)data,
                                      (Py_ssize_t)len, if_match, (long long)timeout_ms);
    int outcome = r ? s3py_store_answer(obj, r, res) : s3py_store_failed(obj, res);
    Py_XDECREF(r);
    PyGILState_Release(g);
    return outcome;
}

/* ---- helpers replacing snprintf-style getters (they return malloc'd strings) ---- */

typedef size_t (*s3py_sizer)(const void *h, char *buf, size_t len);

static char *s3py_grow(const void *h, s3py_sizer fn)
{
    size_t cap = 256;
    for (int i = 0; i < 8; i++) {
        char *buf = malloc(cap);
        if (!buf)
            return NULL;
        size_t n = fn(h, buf, cap);
        if (n < cap)
            return buf;
        free(buf);
        cap = n + 1;
    }
    return NULL;
}

static size_t s3py_errmsg_fn(const void *h, char *b, size_t n)
{
    return s3lect_errmsg((const s3lect_elector *)h, b, n);
}
static size_t s3py_cfg_errmsg_fn(const void *h, char *b, size_t n)
{
    return s3lect_config_errmsg((const s3lect_config *)h, b, n);
}
static size_t s3py_leader_id_fn(const void *h, char *b, size_t n)
{
    return s3lect_leader_id((const s3lect_elector *)h, b, n);
}
static size_t s3py_fence_token_fn(const void *h, char *b, size_t n)
{
    return s3lect_fence_token((s3lect_elector *)h, b, n);
}
static size_t s3py_fence_errmsg_fn(const void *h, char *b, size_t n)
{
    return s3lect_fence_errmsg((const s3lect_fence *)h, b, n);
}
%}

%include <stdint.i>

/* ---- callbacks: one Python object stands for (fn, userdata, userdata_free) ---- */

%typemap(in) (s3lect_event_fn fn, void *userdata, s3lect_free_fn userdata_free) {
    if (!PyCallable_Check($input)) {
        PyErr_SetString(PyExc_TypeError, "event callback must be callable");
        SWIG_fail;
    }
    Py_INCREF($input);
    $1 = s3py_event_trampoline;
    $2 = (void *)$input;
    $3 = s3py_decref;
}

%typemap(in) (s3lect_acquire_fn fn, void *userdata, s3lect_free_fn userdata_free) {
    if (!PyCallable_Check($input)) {
        PyErr_SetString(PyExc_TypeError, "acquire hook must be callable");
        SWIG_fail;
    }
    Py_INCREF($input);
    $1 = s3py_acquire_trampoline;
    $2 = (void *)$input;
    $3 = s3py_decref;
}

%typemap(in) (s3lect_store_get_fn get, s3lect_store_put_fn put, void *userdata,
              s3lect_free_fn userdata_free) {
    if (!PyObject_HasAttrString($input, "get") || !PyObject_HasAttrString($input, "put")) {
        PyErr_SetString(PyExc_TypeError, "custom store must have get() and put() methods");
        SWIG_fail;
    }
    Py_INCREF($input);
    $1 = s3py_store_get;
    $2 = s3py_store_put;
    $3 = (void *)$input;
    $4 = s3py_decref;
}

/* ---- out-parameters ---- */

%typemap(in, numinputs=0) s3lect_elector **out (s3lect_elector *tmp = NULL) { $1 = &tmp; }
%typemap(argout) s3lect_elector **out {
    %append_output(SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0));
}

%typemap(in, numinputs=0) s3lect_status **out (s3lect_status *tmp = NULL) { $1 = &tmp; }
%typemap(argout) s3lect_status **out {
    %append_output(SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0));
}

%typemap(in, numinputs=0) s3lect_fence **out (s3lect_fence *tmp = NULL) { $1 = &tmp; }
%typemap(argout) s3lect_fence **out {
    %append_output(SWIG_NewPointerObj(SWIG_as_voidptr(*$1), $*1_descriptor, 0));
}

/* s3lect_fenced_get(f, url) -> (code, body, version, term): body is bytes of
 * the length the library gives (None when there is none), version a str or
 * None, term an int. */
%typemap(in, numinputs=0) (char **body, size_t *len) (char *tmp = NULL, size_t n = 0) {
    $1 = &tmp;
    $2 = &n;
}
%typemap(argout) (char **body, size_t *len) {
    PyObject *b;
    if (*$1) {
        b = PyBytes_FromStringAndSize(*$1, (Py_ssize_t)*$2);
        s3lect_free(*$1);
        if (!b)
            SWIG_fail;
    } else {
        Py_INCREF(Py_None);
        b = Py_None;
    }
    %append_output(b);
}

%typemap(in, numinputs=0) char **out (char *tmp = NULL) { $1 = &tmp; }
%typemap(argout) char **out {
    PyObject *s;
    if (*$1) {
        s = s3py_str(*$1);
        s3lect_free(*$1);
    } else {
        Py_INCREF(Py_None);
        s = Py_None;
    }
    %append_output(s);
}

/* s3lect_metrics_text(electors, n, &out): a sequence of elector handles in,
 * (code, str) out. */
%typemap(in) (s3lect_elector *const *electors, size_t n) (s3lect_elector **arr = NULL) {
    if (!PySequence_Check($input)) {
        SWIG_exception_fail(SWIG_TypeError, "electors must be a sequence of elector handles");
    }
    Py_ssize_t cnt = PySequence_Size($input);
    if (cnt < 0) {
        SWIG_fail;
    }
    arr = (s3lect_elector **)calloc(cnt > 0 ? (size_t)cnt : 1, sizeof *arr);
    if (!arr) {
        SWIG_exception_fail(SWIG_MemoryError, "out of memory");
    }
    for (Py_ssize_t i = 0; i < cnt; i++) {
        PyObject *o = PySequence_GetItem($input, i);
        void *p = NULL;
        int res = o ? SWIG_ConvertPtr(o, &p, SWIGTYPE_p_s3lect_elector, 0) : SWIG_ERROR;
        Py_XDECREF(o);
        if (!SWIG_IsOK(res)) {
            SWIG_exception_fail(SWIG_TypeError, "electors must be elector handles");
        }
        arr[i] = (s3lect_elector *)p;
    }
    $1 = arr;
    $2 = (size_t)cnt;
}
%typemap(freearg) (s3lect_elector *const *electors, size_t n) {
    free(arr$argnum);
}

/* s3lect_config_set_from_env(cfg, envp): None (the process's environment)
 * or a sequence of "NAME=value" str, copied for the call. */
%typemap(in) const char *const *envp (char **arr = NULL, Py_ssize_t cnt = 0) {
    if ($input != Py_None) {
        if (!PySequence_Check($input) || PyUnicode_Check($input)) {
            SWIG_exception_fail(SWIG_TypeError, "envp must be None or a sequence of 'NAME=value' str");
        }
        cnt = PySequence_Size($input);
        if (cnt < 0) {
            SWIG_fail;
        }
        arr = (char **)calloc((size_t)cnt + 1, sizeof *arr);
        if (!arr) {
            SWIG_exception_fail(SWIG_MemoryError, "out of memory");
        }
        for (Py_ssize_t i = 0; i < cnt; i++) {
            PyObject *o = PySequence_GetItem($input, i);
            /* the limited API (abi3, Python 3.9): no PyUnicode_AsUTF8 */
            PyObject *b = o && PyUnicode_Check(o) ? PyUnicode_AsUTF8String(o) : NULL;
            const char *t = b ? PyBytes_AsString(b) : NULL;
            arr[i] = t ? strdup(t) : NULL;
            Py_XDECREF(b);
            Py_XDECREF(o);
            if (!arr[i]) {
                for (Py_ssize_t j = 0; j < i; j++) {
                    free(arr[j]);
                }
                free(arr);
                arr = NULL;
                SWIG_exception_fail(SWIG_TypeError, "envp items must be 'NAME=value' str");
            }
        }
    }
    $1 = (const char *const *)arr;
}
%typemap(freearg) const char *const *envp {
    if (arr$argnum) {
        for (Py_ssize_t i = 0; i < cnt$argnum; i++) {
            free(arr$argnum[i]);
        }
        free(arr$argnum);
    }
}

%typemap(in, numinputs=0) int64_t *out (int64_t tmp = 0) { $1 = &tmp; }
%typemap(argout) int64_t *out {
    %append_output(PyLong_FromLongLong((long long)*$1));
}

%typemap(in, numinputs=0) uint64_t *cycle_out (uint64_t tmp = 0) { $1 = &tmp; }
%typemap(argout) uint64_t *cycle_out {
    %append_output(PyLong_FromUnsignedLongLong((unsigned long long)*$1));
}

/* s3lect_option_env(opt) -> (code, name, alias), each None when there is none. */
%typemap(in, numinputs=0) const char **alias (const char *tmp = NULL) { $1 = &tmp; }
%typemap(argout) const char **alias {
    PyObject *s;
    if (*$1) {
        s = s3py_str(*$1);
    } else {
        Py_INCREF(Py_None);
        s = Py_None;
    }
    %append_output(s);
}

/* s3lect_option_info(opt) -> (code, name, type, min, max, default); name is
 * None (and the numbers 0) for a value that is not an option. */
%typemap(in, numinputs=0) const char **name (const char *tmp = NULL) { $1 = &tmp; }
%typemap(argout) const char **name {
    PyObject *s;
    if (*$1) {
        s = s3py_str(*$1);
    } else {
        Py_INCREF(Py_None);
        s = Py_None;
    }
    %append_output(s);
}
%typemap(in, numinputs=0) int *type (int tmp = 0) { $1 = &tmp; }
%typemap(argout) int *type {
    %append_output(PyLong_FromLong((long)*$1));
}
%apply int64_t *out { int64_t *min, int64_t *max, int64_t *default_value };
%apply int64_t *out { int64_t *term };
%apply char **out { char **version };

/* bytes options (PEM blobs) */
%typemap(in) (const void *data, size_t len) (char *buf = NULL, Py_ssize_t n = 0) {
    if (PyBytes_AsStringAndSize($input, &buf, &n) < 0)
        SWIG_fail;
    $1 = (void *)buf;
    $2 = (size_t)n;
}
%apply (const void *data, size_t len) { (const void *ca_pem, size_t len) };

/* s3lect_peer_response(e, method, target) -> (code, status, body) */
%typemap(in, numinputs=0) int *status (int tmp = 0) { $1 = &tmp; }
%typemap(argout) int *status {
    %append_output(PyLong_FromLong((long)*$1));
}
%typemap(in, numinputs=0) char **body (char *tmp = NULL) { $1 = &tmp; }
%typemap(argout) char **body {
    PyObject *s;
    if (*$1) {
        s = s3py_str(*$1);
        s3lect_free(*$1);
    } else {
        Py_INCREF(Py_None);
        s = Py_None;
    }
    %append_output(s);
}

/* Strings handed out by the helpers below are malloc'd; SWIG frees them. */
%newobject s3lect_py_errmsg;
%newobject s3lect_py_config_errmsg;
%newobject s3lect_py_leader_id;
%newobject s3lect_py_config_get_str;
%newobject s3lect_py_fence_token;
%newobject s3lect_py_fence_errmsg;

/* Replaced by the helpers below or only meaningful inside C callbacks. */
/* s3lect_stop_many takes a C array of handles: Python stops each (Elector.stop). */
%ignore s3lect_stop_many;
%ignore s3lect_errmsg;
%ignore s3lect_config_errmsg;
%ignore s3lect_leader_id;
%ignore s3lect_config_get_str;
%ignore s3lect_fence_token;
%ignore s3lect_fence_errmsg;
%ignore s3lect_free;
%ignore s3lect_store_result_set_body;
%ignore s3lect_store_result_set_etag;
%ignore s3lect_store_result_set_message;
%ignore s3lect_event_type;
%ignore s3lect_event_term;
%ignore s3lect_event_reason;
%ignore s3lect_event_leader_id;
%ignore s3lect_event_leader_addr;
%ignore s3lect_event_code;
%ignore s3lect_event_message;
%ignore s3lect_event_cycle;

%include "s3lect.h"

%inline %{
/** The last detailed error message of an elector. */
char *s3lect_py_errmsg(const s3lect_elector *e)
{
    return s3py_grow(e, s3py_errmsg_fn);
}
/** The last error message of a config. */
char *s3lect_py_config_errmsg(const s3lect_config *cfg)
{
    return s3py_grow(cfg, s3py_cfg_errmsg_fn);
}
/** The current leader's id ("" if none known). */
char *s3lect_py_leader_id(const s3lect_elector *e)
{
    return s3py_grow(e, s3py_leader_id_fn);
}
/** The fence token of e's leadership ("" while it does not lead). */
char *s3lect_py_fence_token(s3lect_elector *e)
{
    return s3py_grow(e, s3py_fence_token_fn);
}
/** The message of a fence's last failed call. */
char *s3lect_py_fence_errmsg(const s3lect_fence *f)
{
    return s3py_grow(f, s3py_fence_errmsg_fn);
}
/** A string option's value, or None when opt is not a string option. */
char *s3lect_py_config_get_str(const s3lect_config *cfg, int opt)
{
    size_t cap = 256;
    for (int i = 0; i < 8; i++) {
        char *buf = malloc(cap);
        if (!buf)
            return NULL;
        int n = s3lect_config_get_str(cfg, (s3lect_option)opt, buf, cap);
        if (n < 0) {
            free(buf);
            return NULL;
        }
        if ((size_t)n < cap)
            return buf;
        free(buf);
        cap = (size_t)n + 1;
    }
    return NULL;
}
%}
