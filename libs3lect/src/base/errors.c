/* SPDX-License-Identifier: Apache-2.0 */
/* errors.c - the error strings (s3lect_strerror). In the lowest layer: the
 * engine, the stores and the runtime name errors too. */
#include "s3lect.h"

const char *s3lect_strerror(int code)
{
    switch (code) {
    case S3LECT_OK:
        return "success";
    case S3LECT_EINVAL:
        return "invalid argument or configuration";
    case S3LECT_ENOMEM:
        return "out of memory";
    case S3LECT_ESTATE:
        return "not valid in the elector's current state";
    case S3LECT_EBUSY:
        return "called from the elector's own callback (would deadlock)";
    case S3LECT_ETIMEDOUT:
        return "timed out";
    case S3LECT_ESTOPPED:
        return "elector stopped";
    case S3LECT_EAUTH:
        return "store refused credentials or permission";
    case S3LECT_ETRANSIENT:
        return "temporary store failure";
    case S3LECT_EFATAL:
        return "store misconfigured (bucket, endpoint or directory)";
    case S3LECT_ECORRUPT:
        return "lock record is corrupt";
    case S3LECT_EPRECONDITION:
        return "conditional write lost the race";
    case S3LECT_ENOTFOUND:
        return "lock object not found";
    case S3LECT_EIO:
        return "local I/O or system error";
    case S3LECT_EUNSUPPORTED:
        return "not supported by this build";
    case S3LECT_ECALLBACK:
        return "callback failed";
    case S3LECT_EFENCED:
        return "fenced: a newer term owns the object";
    case S3LECT_ENOTLEADER:
        return "not the leader";
    case S3LECT_ERETRIES:
        return "retries exhausted: the object kept changing";
    default:
        return "unknown error";
    }
}
