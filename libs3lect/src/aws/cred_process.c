/* SPDX-License-Identifier: Apache-2.0 */
/* cred_process.c - runs a profile's credential_process.
 *
 * Through /bin/sh -c, as the Go, Java and Rust SDKs do on Unix (botocore
 * splits the line itself instead): quoting, variables and pipes in the
 * command behave as in a terminal. stdin is /dev/null, stderr is inherited
 * (the process's own diagnostics reach the user), stdout is read into memory
 * (never logged, wiped after parsing). The process gets its own process
 * group; on timeout the whole group is killed with SIGKILL.
 *
 * The group is registered as the library's own (base/proc.h) while it runs,
 * so s3lect run's supervisor neither kills nor reaps it. A host program that
 * reaps every child with waitpid(-1) may still collect the exit status
 * first; then the output alone decides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred_parse.h"
#include "cred_sources.h"
#include "proc.h"
#include "s3lect.h"
#include "util.h"

#define MAX_OUTPUT (64 * 1024)

int64_t aws_process_timeout_ms(void)
{
    const char *v = aws_env("S3LECT_CREDENTIAL_PROCESS_TIMEOUT");
    if (v) {
        char *end;
        double s = strtod(v, &end);
        if (end != v && *end == '\0' && s > 0 && s <= 3600)
            return (int64_t)(s * 1000);
    }
    return AWS_PROCESS_TIMEOUT_MS;
}

int aws_process_fetch(const char *command, const char *what, int64_t timeout_ms,
                      const _Atomic int *abort, cred_fetched *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *argv[] = {"sh", "-c", (char *)command, NULL};
    u_helper_result r;
    u_helper_run("/bin/sh", argv, NULL, timeout_ms, MAX_OUTPUT, abort, &r);
    int rc = S3LECT_EAUTH;
    switch (r.state) {
    case U_HELPER_NOSTART:
        snprintf(err, errlen, "%s cannot be started (/bin/sh): %s", what, strerror(r.code));
        break;
    case U_HELPER_NOPIPE:
        snprintf(err, errlen, "%s: cannot create a pipe: %s", what, strerror(r.code));
        rc = S3LECT_ETRANSIENT;
        break;
    case U_HELPER_NOMEM:
        snprintf(err, errlen, "out of memory");
        rc = S3LECT_ENOMEM;
        break;
    case U_HELPER_ABORTED:
        snprintf(err, errlen, "%s was cancelled (s3lect is stopping)", what);
        rc = S3LECT_ETRANSIENT;
        break;
    case U_HELPER_TIMEOUT:
        snprintf(err, errlen,
                 "%s did not finish within %lld ms and was killed (set "
                 "S3LECT_CREDENTIAL_PROCESS_TIMEOUT to allow longer, in seconds)",
                 what, (long long)timeout_ms);
        rc = S3LECT_ETRANSIENT;
        break;
    case U_HELPER_TOO_BIG:
        snprintf(err, errlen, "%s printed more than %d bytes; it must print one JSON object", what,
                 MAX_OUTPUT);
        break;
    case U_HELPER_SIGNALED:
        snprintf(err, errlen, "%s was killed by signal %d", what, r.code);
        break;
    default:
        if (r.code != 0) {
            snprintf(err, errlen, "%s exited with status %d (its own messages are on stderr)", what,
                     r.code);
        } else {
            char why[300];
            rc = aws_parse_process_output(r.out, r.len, out, why, sizeof why);
            if (rc)
                snprintf(err, errlen, "%s: %s", what, why);
        }
    }
    u_helper_result_clear(&r);
    return rc;
}
