/* SPDX-License-Identifier: Apache-2.0 */
/* fence.h - fenced writes, the protocol without I/O (docs/fencing.md,
 * docs/algorithm.md "Fenced writes").
 *
 * A fenced object's stored bytes are an envelope: one header line
 *
 *     s3lect-fenced/1 {"term":T,"holder":"ID","lock":"URL","nonce":"N"}\n
 *
 * (and "deleted":true for a tombstone), then the writer's bytes. The term is
 * the writer's leadership term; the nonce is new on every write, so that no
 * two writes store the same bytes and a store whose version is a hash of
 * the bytes (an S3 ETag is their MD5) still gives every write a version of
 * its own. A write goes over the version it read (If-Match; create-only
 * when there was none) and only when the stored term is older than the
 * writer's, or the same term of the same holder. So along an object's
 * versions the term never decreases, and once the leader of term T' has
 * written it, no holder of a smaller term writes it again.
 */
#ifndef S3LECT_FENCE_H
#define S3LECT_FENCE_H

#include <stddef.h>
#include <stdint.h>

#define FN_MAGIC "s3lect-fenced/1 "
/* The header line's longest length (the magic, the JSON and '\n'). */
#define FN_MAX_HEADER 4096
#define FN_MAX_HOLDER 255
#define FN_MAX_LOCK 2048
/* Terms are stored as JSON numbers: at most 2^53. */
#define FN_MAX_TERM ((int64_t)1 << 53)

typedef struct fn_header {
    int64_t term; /* 0: no fenced writer yet (absent, or a plain object) */
    char *holder; /* the writer's server id */
    char *lock;   /* the canonical lock URL whose term it is */
    char *nonce;  /* new on every write */
    int deleted;  /* a tombstone: the object reads as absent */
} fn_header;

void fn_header_clear(fn_header *h);

enum {
    FN_PLAIN = 0,  /* not an envelope: an object no fenced writer wrote (term 0) */
    FN_FENCED = 1, /* an envelope: h filled, *body the writer's bytes */
    FN_BAD = -1    /* starts like an envelope but is none: never overwritten */
};
/* Reads stored bytes: FN_FENCED (h, *body, *body_len filled), FN_PLAIN
 * (h zeroed, *body the bytes themselves) or FN_BAD (h zeroed). h must be
 * freed with fn_header_clear in every case. */
int fn_parse(const char *data, size_t len, fn_header *h, const char **body, size_t *body_len);

/* The envelope of body written by h's holder in h's term, with a new nonce
 * (h->nonce is ignored). Allocated; *out_len its length; NULL when out of
 * memory or the header would be too long. */
char *fn_encode(const fn_header *h, const void *body, size_t len, size_t *out_len);

/* May a writer of term `term`, server id `holder`, write over an object
 * whose stored header is h (term 0: absent or plain)? 1 yes, 0 no: a newer
 * term owns it, or the same term belongs to another holder (the first
 * writer of a term keeps it). */
int fn_may_write(int64_t term, const char *holder, const fn_header *h);

/* The fence token: "s3lect-fence.1.TERM.HOLDER.LOCK", HOLDER and LOCK in
 * unpadded base64url (no '.' in them). Allocated; NULL when out of memory
 * or a value is out of its bounds. */
char *fn_token_encode(int64_t term, const char *holder, const char *lock);
/* Parses a token: 0 with *term, *holder, *lock (allocated) filled, or -1
 * (nothing allocated) when it is not one. */
int fn_token_parse(const char *token, int64_t *term, char **holder, char **lock);

#endif
