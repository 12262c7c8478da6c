/* SPDX-License-Identifier: Apache-2.0 */
/* record.h - the lock object's JSON (DESIGN §3), strict and s3lect-v1 compatible. */
#ifndef S3LECT_RECORD_H
#define S3LECT_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define REC_MAX_SIZE (64 * 1024)

typedef struct rec {
    char *leader_id;         /* "" when released */
    char *leader_addr;       /* may be "" */
    int64_t last_updated_ms; /* wall ms; meaningless when zero_time */
    int zero_time;           /* lastUpdated is Go's zero time (released) */
    int64_t term;            /* 0 when absent (records written by Go s3lect) */
    int64_t lease_ms;        /* 0 when absent */
    char *incarnation;       /* "" when absent */
    char *peer_key;          /* "peerKeySha256": base64 SHA-256 of the peer endpoint's
                                public key (zero-config peer mode); "" when absent or
                                not 44 base64 characters (then ignored, never corrupt) */
    char *succ_key;          /* "succKey": 32 hex digits the holder's peer endpoint never
                                shows, so that presenting them proves a store read (one
                                successor, docs/peer.md); "" when absent or malformed */
    int64_t hold_ms;         /* "holdMs": how long after this write's send its writer's
                                leadership may still act (what it runs is stopped by
                                then); 0 when absent or malformed (then unknown) */
    int term_too_large;      /* set by a failed rec_parse: the term was 2^53 or more */
    /* Transfer and preference (docs/algorithm.md "Transfer"). All auxiliary:
     * anything malformed reads as absent, and none of them ever decides a
     * takeover of a held record; only who writes first after a release. */
    int64_t prio;          /* "prio": the holder's priority (0 when absent) */
    char *xfer_to;         /* "xferTo": a transfer asked to this id ("*": the best), "" none */
    char *xfer_n;          /* "xferN": the request's nonce (hex), "" none */
    char *xfer_ack_id;     /* "xferAckId": the follower that confirmed it is live, "" none */
    char *xfer_ack_inc;    /* "xferAckInc": its incarnation */
    char *xfer_ack_proc;   /* "xferAckProc": its process token (peer.md "One successor") */
    int64_t xfer_ack_prio; /* "xferAckPrio": its priority */
    char *xfer_err;        /* "xferErr": why request xferN was refused, "" none */
    char *xfer_why;        /* "xferWhy": "priority" for a follower's own request, "" else */
    /* A released record of a transfer: reserved for this follower until
     * to_until (the releaser's wall ms) or a reservation after first sight. */
    char *to_id, *to_inc, *to_proc;
    int64_t to_until;
} rec;

/* The largest term a record holds exactly (2^53 - 1: JSON readers in most
 * languages read numbers as doubles). No leader ever takes a higher one. */
#define REC_TERM_MAX 9007199254740991LL

#define REC_PEER_KEY_LEN 44 /* base64 of 32 bytes */
/* 1 if s is REC_PEER_KEY_LEN characters of standard base64 ending in '='. */
int rec_peer_key_valid(const char *s);
#define REC_SUCC_KEY_LEN 32 /* lower-case hex of 16 random bytes */
/* 1 if s is REC_SUCC_KEY_LEN lower-case hexadecimal digits. */
int rec_succ_key_valid(const char *s);

#define REC_XFER_N_LEN 32 /* lower-case hex of a request's nonce */
#define REC_PRIO_MAX 1000000

/* Parses body. Returns 0, or S3LECT_ECORRUPT with a one-line reason in err
 * (then out is cleared, but out->term_too_large says whether the reason was a
 * term of 2^53 or more). Unknown fields are accepted and ignored. */
int rec_parse(const char *body, size_t len, rec *out, char *err, size_t errlen);
/* Serialises r; allocated, NUL-terminated. zero_time writes 0001-01-01T00:00:00Z;
 * peerKeySha256 only when peer_key is set. NULL on OOM, and for a term outside
 * [0, REC_TERM_MAX] (a record nobody could read back exactly). */
char *rec_encode(const rec *r);
/* 1 if the record is released (no holder). */
int rec_released(const rec *r);
void rec_clear(rec *r);

#endif
