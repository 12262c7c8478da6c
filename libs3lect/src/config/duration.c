/* SPDX-License-Identifier: Apache-2.0 */
/* duration.c - "500ms", "2s", "1.5m", "1h30m" → milliseconds: the one
 * duration syntax of the CLI, S3LECT_* and s3lect_config_set_text.
 *
 * A duration is one or more NUMBER UNIT pairs: NUMBER is decimal digits with
 * an optional fraction ("1.5"), UNIT is ms, s, m or h. A bare "0" is allowed
 * (zero needs no unit); any other number without a unit is refused, because
 * "15" could mean seconds or milliseconds. No signs, exponents, spaces, NaN or
 * infinity; the result must be whole milliseconds and at most 24 h.
 */
#include <string.h>

#include "duration.h"

#define MAX_DIGITS 9 /* per integer part and per fraction: no overflow below */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int cfg_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !*s)
        return CFG_DUR_EMPTY;
    size_t len = strlen(s), nint = strspn(s, "0123456789");
    if (nint == len || (nint > 0 && s[nint] == '.' && nint + 1 < len &&
                        strspn(s + nint + 1, "0123456789") == len - nint - 1)) {
        /* A bare number: fine for zero ("0", "0.0"), ambiguous otherwise. */
        if (strspn(s, "0.") != len)
            return CFG_DUR_NO_UNIT;
        *ms = 0;
        return 0;
    }
    int64_t total = 0;
    const char *p = s;
    while (*p) {
        int64_t whole = 0, frac = 0, frac_scale = 1;
        int nd = 0, nf = 0;
        while (is_digit(*p)) {
            if (++nd > MAX_DIGITS)
                return CFG_DUR_TOO_LONG;
            whole = whole * 10 + (*p++ - '0');
        }
        if (*p == '.') {
            p++;
            while (is_digit(*p)) {
                if (++nf > MAX_DIGITS)
                    return CFG_DUR_SYNTAX;
                frac = frac * 10 + (*p++ - '0');
                frac_scale *= 10;
            }
            if (nf == 0)
                return CFG_DUR_SYNTAX;
        }
        if (nd == 0)
            return CFG_DUR_SYNTAX; /* ".5s", "-1s", "+1s", "s", "nan", "inf", " 1s" */
        int64_t scale;
        if (p[0] == 'm' && p[1] == 's') {
            scale = 1;
            p += 2;
        } else if (p[0] == 's') {
            scale = 1000;
            p += 1;
        } else if (p[0] == 'm') {
            scale = 60000;
            p += 1;
        } else if (p[0] == 'h') {
            scale = 3600000;
            p += 1;
        } else {
            return CFG_DUR_SYNTAX; /* "1e3", "2x", "1s ", "1s5" */
        }
        if (whole > CFG_DUR_MAX_MS / scale)
            return CFG_DUR_TOO_LONG;
        /* frac < 10^9 and scale <= 3.6e6: the product fits easily. */
        if ((frac * scale) % frac_scale != 0)
            return CFG_DUR_SUB_MS;
        total += whole * scale + frac * scale / frac_scale;
        if (total > CFG_DUR_MAX_MS)
            return CFG_DUR_TOO_LONG;
    }
    *ms = total;
    return 0;
}

const char *cfg_duration_error(int code)
{
    switch (code) {
    case CFG_DUR_EMPTY:
        return "is empty; give a number with a unit, e.g. 500ms, 2s, 1m or 1h";
    case CFG_DUR_NO_UNIT:
        return "has no unit; write it with one, e.g. 15s or 15ms (only 0 may go without)";
    case CFG_DUR_TOO_LONG:
        return "is too long; durations go up to 24h";
    case CFG_DUR_SUB_MS:
        return "is finer than a millisecond; durations are whole milliseconds";
    default:
        return "is not a duration; use a number with a unit, e.g. 500ms, 2s, 1.5m or 1h "
               "(no signs, exponents or spaces)";
    }
}
