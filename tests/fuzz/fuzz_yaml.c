/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_yaml.c - the YAML subset reader (base/yaml.c) that reads kubeconfig
 * files for the k8s:// store.
 *
 * Properties:
 * - no crash, no read past len (the input is copied to an exact-size buffer,
 *   which is not NUL-terminated);
 * - success gives a tree that prints; failure gives a non-empty one-line
 *   message and no tree;
 * - parsing is deterministic (the same tree, or the same message, twice).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <string.h>

#include "yaml.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    char err[300], err2[300];
    cJSON *a = u_yaml_parse(buf, size, err, sizeof err);
    cJSON *b = u_yaml_parse(buf, size, err2, sizeof err2);
    FUZZ_CHECK((a == NULL) == (b == NULL), "not deterministic");
    if (a) {
        char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
        FUZZ_CHECK(ta && tb && strcmp(ta, tb) == 0, "two trees");
        free(ta);
        free(tb);
    } else {
        FUZZ_CHECK(err[0] && memchr(err, '\0', sizeof err) && !strchr(err, '\n'),
                   "bad message '%s'", err);
        FUZZ_CHECK(strcmp(err, err2) == 0, "two messages");
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(buf);
    return 0;
}
