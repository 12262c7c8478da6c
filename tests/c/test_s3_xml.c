/* SPDX-License-Identifier: Apache-2.0 */
/* test_s3_xml.c - the S3 error-body parser and the status → outcome table. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "s3_test.h"
#include "s3_xml.h"
#include "store.h"

static int parse(const char *body, s3_error_body *e)
{
    return s3_xml_parse_error(body, strlen(body), e);
}

static void test_aws_body(void)
{
    s3_error_body e;
    const char *body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                       "<Error><Code>NoSuchKey</Code><Message>The specified key does not "
                       "exist.</Message><Key>lock.json</Key>"
                       "<RequestId>4442587FB7D0A2F9</RequestId><HostId>abc=</HostId></Error>";
    CHECK(parse(body, &e) == 1, "AWS body has a code");
    CHECK_STR(e.code, "NoSuchKey", "code");
    CHECK_STR(e.message, "The specified key does not exist.", "message");
    CHECK_STR(e.request_id, "4442587FB7D0A2F9", "request id");
    CHECK_STR(e.bucket, "", "no bucket name");
}

static void test_minio_body(void)
{
    s3_error_body e;
    const char *body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>"
        "<Message>The specified bucket does not exist</Message><Key>k</Key>"
        "<BucketName>no-such</BucketName><Resource>/no-such/k</Resource>"
        "<RequestId>1880A1B2C3</RequestId><HostId>dd9025</HostId></Error>";
    CHECK(parse(body, &e) == 1, "MinIO body has a code");
    CHECK_STR(e.code, "NoSuchBucket", "code");
    CHECK_STR(e.bucket, "no-such", "bucket name");
    CHECK_STR(e.message, "The specified bucket does not exist", "message");
}

static void test_entities_and_controls(void)
{
    s3_error_body e;
    parse("<Error><Code>A&amp;B</Code><Message> x &lt;y&gt; &quot;z&quot; &apos;w&apos; &#65;&#x42;"
          "&#x10FFFF; &bogus; &#xD800; &#;\tnew\nline\x01</Message></Error>",
          &e);
    CHECK_STR(e.code, "A&B", "named entity");
    CHECK_STR(e.message, "x <y> \"z\" 'w' AB\xF4\x8F\xBF\xBF &bogus; &#xD800; &#; new line",
              "entities decoded, unknown kept, controls become spaces, trimmed");
    parse("<Error><Code>C</Code><Message>bell&#7;ring</Message></Error>", &e);
    CHECK_STR(e.message, "bell ring", "an escaped control character is a space too");
}

static void test_shapes(void)
{
    s3_error_body e;
    CHECK(parse("", &e) == 0, "empty body has no code");
    CHECK(s3_xml_parse_error(NULL, 0, &e) == 0, "NULL body has no code");
    CHECK(parse("<html><body>502 Bad Gateway</body></html>", &e) == 0, "HTML has no code");
    CHECK_STR(e.code, "", "code stays empty");
    CHECK(parse("<Error><Code/><Message>m</Message></Error>", &e) == 0, "self-closing code");
    CHECK_STR(e.message, "m", "message still read");
    CHECK(parse("<Error><Code>SlowDown", &e) == 1, "truncated body");
    CHECK_STR(e.code, "SlowDown", "text up to the end of a truncated body");
    CHECK(parse("<Error><Code attr=\"1\">X</Code><Code>Y</Code></Error>", &e) == 1, "attributes");
    CHECK_STR(e.code, "X", "first code wins; attributes ignored");
    CHECK(parse("<Error><CodeName>no</CodeName><Code>yes</Code></Error>", &e) == 1, "prefix");
    CHECK_STR(e.code, "yes", "a tag that only starts like Code is not Code");
    /* Not NUL-terminated input: the parser must stop at len. */
    char buf[] = {'<', 'C', 'o', 'd', 'e', '>', 'A', 'B', 'C', 'D'};
    CHECK(s3_xml_parse_error(buf, 8, &e) == 1, "length-bounded");
    CHECK_STR(e.code, "AB", "only len bytes are read");
}

static void test_truncation(void)
{
    s3_error_body e;
    char body[2048];
    char msg[600];
    /* 'é' is two bytes: a 255-byte budget must not split one. */
    size_t n = 0;
    msg[n++] = 'x';
    while (n + 2 < sizeof msg - 1) {
        msg[n++] = '\xC3';
        msg[n++] = '\xA9';
    }
    msg[n] = '\0';
    snprintf(body, sizeof body, "<Error><Code>C</Code><Message>%s</Message></Error>", msg);
    parse(body, &e);
    size_t len = strlen(e.message);
    CHECK(len < sizeof e.message && len >= sizeof e.message - 3, "message truncated to fit (%zu)",
          len);
    CHECK(len % 2 == 1, "no UTF-8 sequence cut in half (len %zu)", len);
}

/* A deterministic mini-fuzz: random bytes over XML-ish alphabets never crash
 * (run under ASan in the sanitizer build) and always leave clean strings. */
static void test_random_inputs(void)
{
    static const char alpha[] = "<>/&#;x!?CodeMsagRqustI Bk\n\t\"'=0123456789abcdefAF\xC3\xA9\x01";
    uint64_t state = 0x9E3779B97F4A7C15ull;
    char buf[256];
    int clean = 1;
    for (int iter = 0; iter < 50000; iter++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        size_t len = (size_t)(state % sizeof buf);
        for (size_t i = 0; i < len; i++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            buf[i] = (iter & 1) ? (char)(state & 0xFF) : alpha[state % (sizeof alpha - 1)];
        }
        if (len > 6 && (iter % 3) == 0)
            memcpy(buf, "<Code>", 6);
        s3_error_body e;
        s3_xml_parse_error(buf, len, &e);
        const char *fields[] = {e.code, e.message, e.request_id, e.bucket};
        size_t caps[] = {sizeof e.code, sizeof e.message, sizeof e.request_id, sizeof e.bucket};
        for (int f = 0; f < 4; f++) {
            size_t l = strnlen(fields[f], caps[f]);
            if (l >= caps[f])
                clean = 0;
            for (size_t i = 0; i < l && i < caps[f]; i++)
                if ((unsigned char)fields[f][i] < 0x20)
                    clean = 0;
        }
    }
    CHECK(clean, "every field NUL-terminated within its size and free of control characters");
}

static void test_classify(void)
{
    static const struct {
        long status;
        const char *code;
        int want;
    } cases[] = {
        {200, NULL, ST_OK},
        {204, "", ST_OK},
        {404, "NoSuchKey", ST_NOT_FOUND},
        {404, NULL, ST_NOT_FOUND},
        {404, "NoSuchBucket", ST_FATAL},
        {412, "PreconditionFailed", ST_PRECONDITION},
        {412, NULL, ST_PRECONDITION},
        {409, "ConditionalRequestConflict", ST_TRANSIENT},
        {409, NULL, ST_TRANSIENT},
        {403, "AccessDenied", ST_AUTH},
        {403, "SignatureDoesNotMatch", ST_AUTH},
        {403, "InvalidAccessKeyId", ST_AUTH},
        {403, "RequestTimeTooSkewed", ST_AUTH},
        {403, NULL, ST_AUTH},
        {401, NULL, ST_AUTH},
        {400, "ExpiredToken", ST_AUTH},
        {400, "InvalidToken", ST_AUTH},
        {400, "AuthorizationHeaderMalformed", ST_FATAL},
        {400, "InvalidBucketName", ST_FATAL},
        {400, "RequestTimeout", ST_TRANSIENT},
        {500, "InternalError", ST_TRANSIENT},
        {502, NULL, ST_TRANSIENT},
        {503, "SlowDown", ST_TRANSIENT},
        {503, "ServiceUnavailable", ST_TRANSIENT},
        {504, NULL, ST_TRANSIENT},
        {429, NULL, ST_TRANSIENT},
        {408, NULL, ST_TRANSIENT},
        {501, "NotImplemented", ST_FATAL},
        {301, "PermanentRedirect", ST_FATAL},
        {307, "TemporaryRedirect", ST_TRANSIENT},
        {405, "MethodNotAllowed", ST_FATAL},
        {400, NULL, ST_FATAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "classify %ld %s", cases[i].status,
                 cases[i].code ? cases[i].code : "(none)");
        CHECK_INT(s3_classify(cases[i].status, cases[i].code), cases[i].want, what);
    }
}

int main(void)
{
    test_aws_body();
    test_minio_body();
    test_entities_and_controls();
    test_shapes();
    test_truncation();
    test_random_inputs();
    test_classify();
    return t_finish("test_s3_xml");
}
