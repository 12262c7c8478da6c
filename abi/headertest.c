/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled as C99 -pedantic and as C++11: the public header must stand alone.
 * It also holds the ABI pins (abi/pins.h): every public enumerator keeps its
 * value and every public function and callback type keeps its type, or this
 * file does not compile. Linked with the library and run (ctest
 * abi_option_pins, abi/check_abi.sh), it also checks that every pinned
 * option keeps its name and type in s3lect_option_info(). */
#include "s3lect.h"

#include <stdio.h>
#include <string.h>

#if defined(__cplusplus)
#include <type_traits>
#define S3LECT_PIN_ENUM(n, v) static_assert((long long)(n) == (v), #n " changed its value");
#define S3LECT_PIN_FUNC(n, t)                                                                      \
    static_assert(std::is_same<decltype(&n), t>::value, #n " changed its type");
#define S3LECT_PIN_TYPE(n, t) static_assert(std::is_same<n, t>::value, #n " changed its type");
#else
#define S3LECT_PIN_ENUM(n, v) typedef char s3lect_pin_##n[((long long)(n) == (v)) ? 1 : -1];
#define S3LECT_PIN_FUNC(n, t)                                                                      \
    typedef char s3lect_pinf_##n[__builtin_types_compatible_p(__typeof__(&n), t) ? 1 : -1];
#define S3LECT_PIN_TYPE(n, t)                                                                      \
    typedef char s3lect_pint_##n[__builtin_types_compatible_p(n, t) ? 1 : -1];
#endif
#define S3LECT_PIN_OPTION(o, n, t)
#define S3LECT_PIN_OPTION_FACTS(o, f)
#include "pins.h"

/* The option pins, a second time through pins.h: a table for main. */
#undef S3LECT_PIN_ENUM
#undef S3LECT_PIN_FUNC
#undef S3LECT_PIN_TYPE
#undef S3LECT_PIN_OPTION
#undef S3LECT_PIN_OPTION_FACTS
#define S3LECT_PIN_ENUM(n, v)
#define S3LECT_PIN_FUNC(n, t)
#define S3LECT_PIN_TYPE(n, t)
#define S3LECT_PIN_OPTION(o, n, t) {#o, (int)(o), n, (int)(t)},
#define S3LECT_PIN_OPTION_FACTS(o, f)
static const struct pinned_option {
    const char *opt_name;
    int opt;
    const char *name;
    int type;
} pinned_options[] = {
#include "pins.h"
    {NULL, 0, NULL, 0}};

/* The option facts, a third time through pins.h. */
#undef S3LECT_PIN_OPTION
#undef S3LECT_PIN_OPTION_FACTS
#define S3LECT_PIN_OPTION(o, n, t)
#define S3LECT_PIN_OPTION_FACTS(o, f) {#o, (int)(o), (int)(f)},
static const struct pinned_facts {
    const char *opt_name;
    int opt;
    int flags;
} pinned_facts[] = {
#include "pins.h"
    {NULL, 0, 0}};

/* S3LECT_DEPRECATED: declaring with it compiles quietly; a call warns, so the
 * ctest header_deprecated (this file with S3LECT_HEADERTEST_CALL_DEPRECATED
 * and -Werror) must fail to compile. */
S3LECT_DEPRECATED("use s3lect_version_number") S3LECT_API int s3lect_headertest_old(void);

int main(void)
{
    int bad = 0;
    for (const struct pinned_option *p = pinned_options; p->opt_name; p++) {
        const char *name = NULL;
        int type = 0;
        if (s3lect_option_info(p->opt, &name, &type, NULL, NULL, NULL) != S3LECT_OK) {
            fprintf(stderr, "abi: option %s (%d) is no longer an option\n", p->opt_name, p->opt);
            bad = 1;
        } else if (!name || strcmp(name, p->name) != 0 || type != p->type) {
            fprintf(stderr,
                    "abi: option %s changed: pinned \"%s\" of type %d, now \"%s\" of type %d\n",
                    p->opt_name, p->name, p->type, name ? name : "(null)", type);
            bad = 1;
        }
    }
    for (const struct pinned_facts *p = pinned_facts; p->opt_name; p++) {
        int now = s3lect_option_flags(p->opt);
        if (now != p->flags) {
            fprintf(stderr, "abi: option %s's facts changed: pinned %d, now %d\n", p->opt_name,
                    p->flags, now);
            bad = 1;
        }
    }
#if defined(S3LECT_HEADERTEST_CALL_DEPRECATED)
    bad |= s3lect_headertest_old();
#endif
    s3lect_config *c = s3lect_config_new();
    int rc = s3lect_config_set_str(c, S3LECT_OPT_LOCK, "file:///tmp/x");
    s3lect_config_free(c);
    if (bad)
        fprintf(stderr,
                "abi: INCOMPATIBLE: an option's name, type or facts changed (abi/pins.h)\n");
    return !bad && rc == S3LECT_OK && s3lect_version_number() == S3LECT_VERSION_NUMBER ? 0 : 1;
}
