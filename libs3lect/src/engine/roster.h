/* SPDX-License-Identifier: Apache-2.0 */
/* roster.h - followers that read the store take turns (docs/algorithm.md
 * "Followers that take turns").
 *
 * A follower that follows its leader through the store at the frequent
 * interval (the leader's peer endpoint cannot be reached: a firewall) reads
 * at a phase of its own, written with its incarnation in a small object next
 * to the lock (the roster, KEY.s3lect-roster): each member picks the middle
 * of the widest gap between the others' phases, so that N followers read
 * every interval/N between them, not at N independent random moments, and a
 * release is seen after interval/N at worst instead of about 0.9 × interval.
 * The roster changes who reads when, never what a read decides: a lost,
 * stale, foreign or hostile roster costs speed, never safety, and s3lect
 * never overwrites an object that is not a roster.
 */
#ifndef S3LECT_ROSTER_H
#define S3LECT_ROSTER_H

#include <stddef.h>
#include <stdint.h>

/* At most this many members: a full roster is not joined. */
#define RO_MAX_MEMBERS 16
/* Members rewrite their entry every RO_REFRESH_READS frequent intervals;
 * an entry not rewritten for three of those is dropped by the next writer. */
#define RO_REFRESH_READS 120

typedef struct ro_member {
    char *inc; /* the member's incarnation */
    char *id;  /* its node id (a restart with the same id replaces it) */
    int64_t phase, every, at;
} ro_member;

typedef struct ro_list {
    ro_member m[RO_MAX_MEMBERS];
    size_t n;
} ro_list;

/* Parses a roster body. 0, or -1 when body is not a roster (then it is never
 * overwritten); malformed members are left out. */
int ro_parse(const char *body, size_t len, ro_list *out);
/* Serialises l; allocated, NULL when out of memory. */
char *ro_encode(const ro_list *l);
void ro_list_clear(ro_list *l);
/* The phase, as a fraction of every in [0, 1), in the middle of the widest
 * gap between the fractions f[0..n) (n > 0). */
double ro_widest_gap_mid(const double *f, size_t n);

#endif
