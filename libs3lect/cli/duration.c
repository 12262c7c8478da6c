/* duration.c - "500ms", "2s", "1m" → milliseconds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_parse_duration(const char *s, int64_t *ms)
{
    if (!s || !*s)
        return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return -1;
    double scale;
    if (!*end || strcmp(end, "s") == 0)
        scale = 1000;
    else if (strcmp(end, "ms") == 0)
        scale = 1;
    else if (strcmp(end, "m") == 0)
        scale = 60000;
    else if (strcmp(end, "h") == 0)
        scale = 3600000;
    else
        return -1;
    double r = v * scale;
    if (r > 9e15)
        return -1;
    *ms = (int64_t)llround(r);
    return 0;
}
