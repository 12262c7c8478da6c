/* SPDX-License-Identifier: Apache-2.0 */
/* duration.h - the duration syntax ("500ms", "2s", "1.5m", "1h30m"). */
#ifndef S3LECT_DURATION_H
#define S3LECT_DURATION_H

#include <stdint.h>

/* Parses "500ms", "2s", "1.5m", "1h", "1m30s" (and a bare "0") into ms.
 * Returns 0, or one of the CFG_DUR_* codes; cfg_duration_error() says why. */
int cfg_parse_duration(const char *s, int64_t *ms);
const char *cfg_duration_error(int code);
enum { CFG_DUR_EMPTY = 1, CFG_DUR_SYNTAX, CFG_DUR_NO_UNIT, CFG_DUR_TOO_LONG, CFG_DUR_SUB_MS };
#define CFG_DUR_MAX_MS ((int64_t)24 * 3600 * 1000)

#endif
