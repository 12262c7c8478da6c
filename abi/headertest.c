/* Compiled as C99 -pedantic and as C++11: the public header must stand alone. */
#include "s3lect.h"

int main(void)
{
    s3lect_config *c = s3lect_config_new();
    int rc = s3lect_config_set_str(c, S3LECT_OPT_LOCK, "file:///tmp/x");
    s3lect_config_free(c);
    return rc == S3LECT_OK && s3lect_version_number() == S3LECT_VERSION_NUMBER ? 0 : 1;
}
