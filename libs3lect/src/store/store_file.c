/* SPDX-License-Identifier: Apache-2.0 */
/* store_file.c - the embedded default store: one directory on one host.
 *
 * key       the record (replaced by atomic rename, never written in place)
 * key.lock  flock()ed around every read-compare-write; holds the generation
 *           counter, so the etag ("<generation>-<content hash>") changes on
 *           every write even when the bytes do not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "crypto.h"
#include "store.h"
#include "util.h"

typedef struct file_store {
    st_store base;
    char *dir;
} file_store;

static char *join(const char *dir, const char *key, const char *suffix)
{
    return u_asprintf("%s/%s%s", dir, key, suffix);
}

static int valid_key(const char *key)
{
    return key && key[0] && !strchr(key, '/') && strcmp(key, ".") != 0 && strcmp(key, "..") != 0;
}

/* Opens and flocks key.lock, waiting at most timeout_ms. Returns the fd or -1. */
static int lock_open(file_store *fs, const char *key, int op, int64_t timeout_ms, st_result *out)
{
    char *path = join(fs->dir, key, ".lock");
    if (!path) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            st_result_setf(out, ST_FATAL, "lock directory '%s' does not exist: create it first",
                           fs->dir);
        else if (e == EACCES || e == EPERM || e == EROFS)
            st_result_setf(out, ST_AUTH, "cannot open '%s': %s (check the directory's permissions)",
                           path, strerror(e));
        else
            st_result_setf(out, ST_TRANSIENT, "cannot open '%s': %s", path, strerror(e));
        free(path);
        return -1;
    }
    int64_t deadline = u_mono_ms() + timeout_ms;
    int failed = 0;
    while (!failed && flock(fd, op | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            st_result_setf(out, ST_TRANSIENT, "flock '%s': %s", path, strerror(errno));
            failed = 1;
        } else if (u_mono_ms() >= deadline) {
            st_result_setf(out, ST_TRANSIENT, "timed out waiting for the lock on '%s'", path);
            failed = 1;
        } else {
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (failed) {
        close(fd);
        fd = -1;
    }
    free(path);
    return fd;
}

static uint64_t read_generation(int lockfd)
{
    char buf[32] = {0};
    ssize_t n = pread(lockfd, buf, sizeof buf - 1, 0);
    return n > 0 ? strtoull(buf, NULL, 10) : 0;
}

static void make_etag(uint64_t gen, const char *body, size_t len, char out[64])
{
    uint8_t h[CR_SHA256_LEN];
    char hex[2 * CR_SHA256_LEN + 1];
    cr_sha256(body, len, h);
    cr_hex(h, 8, hex);
    snprintf(out, 64, "\"%llu-%s\"", (unsigned long long)gen, hex);
}

/* Reads key into out (body + etag) under the held lock. */
static void read_locked(file_store *fs, const char *key, int lockfd, st_result *out)
{
    char *path = join(fs->dir, key, "");
    FILE *f = path ? fopen(path, "rbe") : NULL;
    if (!f) {
        if (path && errno == ENOENT)
            out->outcome = ST_NOT_FOUND;
        else
            st_result_setf(out, errno == EACCES ? ST_AUTH : ST_TRANSIENT, "cannot read '%s': %s",
                           path ? path : key, strerror(errno));
        free(path);
        return;
    }
    char *buf = malloc(ST_MAX_OBJECT + 2);
    size_t n = buf ? fread(buf, 1, ST_MAX_OBJECT + 1, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        st_result_setf(out, ST_TRANSIENT, "cannot read '%s'", path);
    } else {
        char etag[64];
        make_etag(read_generation(lockfd), buf, n, etag);
        if (st_result_set_body(out, buf, n) || st_result_set_etag(out, etag))
            st_result_setf(out, ST_TRANSIENT, "out of memory");
        else
            out->outcome = ST_OK;
    }
    free(buf);
    free(path);
}

static void file_get(st_store *s, const char *key, int64_t timeout_ms, st_result *out)
{
    file_store *fs = (file_store *)s;
    if (!valid_key(key)) {
        st_result_setf(out, ST_FATAL, "invalid file lock name '%s'", key ? key : "");
        return;
    }
    int fd = lock_open(fs, key, LOCK_SH, timeout_ms, out);
    if (fd < 0)
        return;
    read_locked(fs, key, fd, out);
    close(fd);
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void file_put(st_store *s, const char *key, const void *data, size_t len,
                     const char *if_match, int64_t timeout_ms, st_result *out)
{
    file_store *fs = (file_store *)s;
    if (!valid_key(key)) {
        st_result_setf(out, ST_FATAL, "invalid file lock name '%s'", key ? key : "");
        return;
    }
    int fd = lock_open(fs, key, LOCK_EX, timeout_ms, out);
    if (fd < 0)
        return;
    st_result cur = {0};
    read_locked(fs, key, fd, &cur);
    char *tmp = NULL, *path = NULL;
    if (cur.outcome != ST_OK && cur.outcome != ST_NOT_FOUND) {
        *out = cur;
        memset(&cur, 0, sizeof cur);
        goto done;
    }
    if (if_match ? (cur.outcome != ST_OK || strcmp(cur.etag, if_match) != 0)
                 : cur.outcome == ST_OK) {
        /* If-Match on a missing key answers NOT_FOUND, like S3's 404. */
        out->outcome = if_match && cur.outcome == ST_NOT_FOUND ? ST_NOT_FOUND : ST_PRECONDITION;
        goto done;
    }
    uint64_t gen = read_generation(fd) + 1;
    uint32_t rnd = 0;
    cr_random(&rnd, sizeof rnd);
    tmp = u_asprintf("%s/.%s.%ld.%08x.tmp", fs->dir, key, (long)getpid(), rnd);
    path = join(fs->dir, key, "");
    if (!tmp || !path) {
        st_result_setf(out, ST_TRANSIENT, "out of memory");
        goto done;
    }
    int tfd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (tfd < 0 || write_all(tfd, data, len) || fsync(tfd) || close(tfd) || (tfd = -1, 0) ||
        rename(tmp, path)) {
        int e = errno;
        if (tfd >= 0)
            close(tfd);
        unlink(tmp);
        st_result_setf(out, e == EACCES ? ST_AUTH : ST_TRANSIENT, "cannot write '%s': %s", path,
                       strerror(e));
        goto done;
    }
    char genbuf[32];
    int gl = snprintf(genbuf, sizeof genbuf, "%llu\n", (unsigned long long)gen);
    if (pwrite(fd, genbuf, (size_t)gl, 0) != gl || ftruncate(fd, gl) != 0) {
        /* The record is in place but its generation is not: report it as a
         * transient failure; the etag is recomputed from the file on read. */
        st_result_setf(out, ST_TRANSIENT, "cannot update '%s.lock': %s", path, strerror(errno));
        goto done;
    }
    char etag[64];
    make_etag(gen, data, len, etag);
    if (st_result_set_etag(out, etag))
        st_result_setf(out, ST_TRANSIENT, "out of memory");
    else
        out->outcome = ST_OK;
done:
    st_result_clear(&cur);
    free(tmp);
    free(path);
    close(fd);
}

static void file_destroy(st_store *s)
{
    file_store *fs = (file_store *)s;
    free(fs->dir);
    free(fs);
}

static const st_vtable file_vt = {
    .name = "file", .get = file_get, .put = file_put, .destroy = file_destroy};

int st_file_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out, char *err,
                 size_t errlen)
{
    const char *dir = loc->bucket;
    struct stat sb;
    /* "/tmp" as a lock: the directory would be read as the record. */
    char *path = u_asprintf("%s/%s", loc->bucket, loc->key);
    if (path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        const char *lock = cfg && cfg->lock ? cfg->lock : path;
        snprintf(err, errlen,
                 "lock path '%.200s' is a directory: the lock must be a file path inside a "
                 "directory, e.g. %.200s/leader.json",
                 lock, lock);
        free(path);
        return S3LECT_EINVAL;
    }
    free(path);
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "lock directory '%s' does not exist: create it first (mkdir -p %s)",
                 dir, dir);
        return S3LECT_EFATAL;
    }
    file_store *fs = calloc(1, sizeof *fs);
    if (!fs || !(fs->dir = u_strdup(dir))) {
        free(fs);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    fs->base.vt = &file_vt;
    *out = &fs->base;
    return 0;
}

/* A lock's file name must leave room for the store's ".lock" and temporary
 * names ("." KEY "." pid "." random ".tmp") within NAME_MAX (255). */
#define FILE_NAME_MAX 200
#define FILE_PATH_MAX 4000

static int split_path(const char *url, const char *path, st_location *out, char *err, size_t errlen)
{
    size_t n = strlen(path);
    const char *ctl = st_find_control(path);
    if (ctl) {
        snprintf(err, errlen,
                 "lock path has a control character (byte 0x%02x at offset %zu): "
                 "remove it",
                 (unsigned char)*ctl, (size_t)(ctl - path));
        return S3LECT_EINVAL;
    }
    if (n > FILE_PATH_MAX) {
        snprintf(err, errlen, "lock path is %zu bytes long; the limit is %d", n, FILE_PATH_MAX);
        return S3LECT_EINVAL;
    }
    if (n == 0 || path[n - 1] == '/') {
        snprintf(err, errlen,
                 "lock path '%.200s' names a directory: add a file name, e.g. %.200sleader.json",
                 url, n ? url : "./");
        return S3LECT_EINVAL;
    }
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        snprintf(err, errlen,
                 "lock path '%.200s' names a directory: the lock must be a file inside one, e.g. "
                 "%.200s/leader.json",
                 url, url);
        return S3LECT_EINVAL;
    }
    if (strlen(name) > FILE_NAME_MAX) {
        snprintf(err, errlen,
                 "lock file name is %zu bytes long; the limit is %d (the store adds suffixes)",
                 strlen(name), FILE_NAME_MAX);
        return S3LECT_EINVAL;
    }
    if (!slash) {
        out->bucket = u_strdup(".");
        out->key = u_strdup(path);
    } else {
        size_t dl = slash == path ? 1 : (size_t)(slash - path);
        out->bucket = malloc(dl + 1);
        if (out->bucket) {
            memcpy(out->bucket, path, dl);
            out->bucket[dl] = '\0';
        }
        out->key = u_strdup(slash + 1);
    }
    if (!out->bucket || !out->key) {
        st_location_clear(out);
        snprintf(err, errlen, "out of memory");
        return S3LECT_ENOMEM;
    }
    return 0;
}

int st_file_parse(const char *url, const char *p, st_location *out, char *err, size_t errlen)
{
    if (!p)
        return split_path(url, url, out, err, errlen);
    if (strncmp(p, "localhost/", 10) == 0)
        p += 9;
    if (p[0] != '/') {
        snprintf(err, errlen,
                 "file URL '%.200s' must be absolute: file:///dir/leader.json (three slashes)",
                 url);
        return S3LECT_EINVAL;
    }
    if (strpbrk(p, "?#")) {
        snprintf(err, errlen,
                 "lock URL '%.200s' has a query or fragment ('?' or '#'); file URLs take neither "
                 "(give a plain path if the name really has them)",
                 url);
        return S3LECT_EINVAL;
    }
    if (!st_find_control(p) && p[1] != '\0' && p[strlen(p) - 1] != '/') {
        int rc = st_check_segments(url, "path", p + 1, strlen(p + 1), err, errlen);
        if (rc)
            return rc;
    }
    return split_path(url, p, out, err, errlen);
}

/* path made absolute against the working directory, with "", "." and ".."
 * components resolved lexically. */
static char *abs_lexical(const char *path)
{
    char cwd[4096] = "/";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, "/");
    char *joined = path[0] == '/' ? u_strdup(path) : u_asprintf("%s/%s", cwd, path);
    char *out = joined ? malloc(strlen(joined) + 2) : NULL;
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    for (char *tok = joined; *tok;) {
        size_t l = strcspn(tok, "/");
        if (l == 0 || (l == 1 && tok[0] == '.')) {
            /* nothing */
        } else if (l == 2 && tok[0] == '.' && tok[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* the slash before the dropped component */
        } else {
            out[o++] = '/';
            memcpy(out + o, tok, l);
            o += l;
        }
        tok += l;
        if (*tok == '/')
            tok++;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    free(joined);
    return out;
}

int st_file_canonical(const st_location *loc, char **out)
{
    char *dir = abs_lexical(loc->bucket);
    int rc = !dir || st_canon_add(out, "file://", dir, 0) ||
             st_canon_add(out, strcmp(dir, "/") ? "/" : "", loc->key, 0);
    free(dir);
    return rc;
}
