/* SPDX-License-Identifier: Apache-2.0 */
/* roster.c - followers that read the store take turns (roster.h). */
#include "roster.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3lect.h"
#include "util.h"

#define RO_MAGIC "s3lectRoster"
#define RO_MAX_INC 128
#define RO_MAX_ID 256
#define RO_MAX_EVERY (24LL * 3600 * 1000)

/* ---- the object ---------------------------------------------------------- */

void ro_list_clear(ro_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->m[i].inc);
        free(l->m[i].id);
    }
    memset(l, 0, sizeof *l);
}

/* A whole number in [lo, hi] named name in o, else -1. */
static int64_t ro_int(const cJSON *o, const char *name, int64_t lo, int64_t hi)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(it) || it->valuedouble < (double)lo || it->valuedouble > (double)hi ||
        it->valuedouble != (double)(int64_t)it->valuedouble)
        return -1;
    return (int64_t)it->valuedouble;
}

static const char *ro_text(const cJSON *o, const char *name, size_t min, size_t max)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(it) || !it->valuestring)
        return NULL;
    size_t n = strlen(it->valuestring);
    return n >= min && n <= max ? it->valuestring : NULL;
}

int ro_parse(const char *body, size_t len, ro_list *out)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *members = root ? cJSON_GetObjectItemCaseSensitive(root, "members") : NULL;
    if (!cJSON_IsObject(root) || ro_int(root, RO_MAGIC, 1, 1) != 1 || !cJSON_IsArray(members)) {
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, members)
    {
        if (out->n == RO_MAX_MEMBERS)
            break;
        const char *inc = ro_text(it, "inc", 1, RO_MAX_INC), *id = ro_text(it, "id", 0, RO_MAX_ID);
        int64_t every = ro_int(it, "every", 10, RO_MAX_EVERY);
        int64_t phase = every > 0 ? ro_int(it, "phase", 0, every - 1) : -1;
        int64_t at = ro_int(it, "at", 1, (int64_t)1 << 53);
        if (!inc || !id || phase < 0 || at < 0)
            continue; /* left out: the next writer drops it */
        ro_member *m = &out->m[out->n];
        m->inc = u_strdup(inc);
        m->id = u_strdup(id);
        if (!m->inc || !m->id) {
            free(m->inc);
            free(m->id);
            continue;
        }
        m->phase = phase;
        m->every = every;
        m->at = at;
        out->n++;
    }
    cJSON_Delete(root);
    return 0;
}

char *ro_encode(const ro_list *l)
{
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    int bad = !root || !arr;
    if (!bad) {
        cJSON_AddItemToObject(root, "members", arr);
        arr = NULL;
        bad = !cJSON_AddNumberToObject(root, RO_MAGIC, 1);
    }
    const cJSON *members = root ? cJSON_GetObjectItemCaseSensitive(root, "members") : NULL;
    for (size_t i = 0; !bad && i < l->n; i++) {
        cJSON *m = cJSON_CreateObject();
        bad = !m || !cJSON_AddItemToArray((cJSON *)members, m) ||
              !cJSON_AddStringToObject(m, "inc", l->m[i].inc) ||
              !cJSON_AddStringToObject(m, "id", l->m[i].id) ||
              !cJSON_AddNumberToObject(m, "phase", (double)l->m[i].phase) ||
              !cJSON_AddNumberToObject(m, "every", (double)l->m[i].every) ||
              !cJSON_AddNumberToObject(m, "at", (double)l->m[i].at);
    }
    char *s = bad ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(arr);
    cJSON_Delete(root);
    return s;
}

double ro_widest_gap_mid(const double *f, size_t n)
{
    double s[RO_MAX_MEMBERS + 1];
    if (n > RO_MAX_MEMBERS + 1)
        n = RO_MAX_MEMBERS + 1;
    for (size_t i = 0; i < n; i++) { /* insertion sort: n ≤ 17 */
        size_t j = i;
        for (; j > 0 && s[j - 1] > f[i]; j--)
            s[j] = s[j - 1];
        s[j] = f[i];
    }
    double best = -1, mid = 0;
    for (size_t i = 0; i < n; i++) {
        double next = i + 1 < n ? s[i + 1] : s[0] + 1.0; /* the last gap wraps round */
        if (next - s[i] > best) {
            best = next - s[i];
            mid = s[i] + best / 2;
        }
    }
    return mid >= 1.0 ? mid - 1.0 : mid;
}
