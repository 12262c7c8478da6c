/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "store.h"

int st_route53_open(const struct s3lect_config *cfg, const st_location *loc, st_store **out,
                    char *err, size_t errlen)
{
    (void)cfg;
    (void)loc;
    *out = NULL;
    snprintf(err, errlen, "not yet");
    return S3LECT_EINVAL;
}
