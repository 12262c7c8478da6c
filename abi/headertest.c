/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled as C99 -pedantic and as C++11: the public header must stand alone.
 * It also holds the ABI pins (abi/pins.h): every public enumerator keeps its
 * value and every public function and callback type keeps its type, or this
 * file does not compile. */
#include "s3lect.h"

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
#include "pins.h"

int main(void)
{
    s3lect_config *c = s3lect_config_new();
    int rc = s3lect_config_set_str(c, S3LECT_OPT_LOCK, "file:///tmp/x");
    s3lect_config_free(c);
    return rc == S3LECT_OK && s3lect_version_number() == S3LECT_VERSION_NUMBER ? 0 : 1;
}
