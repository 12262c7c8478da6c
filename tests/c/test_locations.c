/* SPDX-License-Identifier: Apache-2.0 */
/* test_locations.c - lock URLs of the DynamoDB, PostgreSQL and Route 53
 * stores (st_location_parse), and lock URLs as they may be shown
 * (st_lock_display: never a password). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "testutil.h"

static int s_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void ok(const char *url, const char *kind, const char *bucket, const char *key,
               const char *o1, const char *o2, const char *o3)
{
    st_location loc;
    char err[600] = "";
    int rc = st_location_parse(url, &loc, err, sizeof err);
    CHECK(rc == 0, "%s: refused: %s", url, err);
    if (rc)
        return;
    CHECK(loc.scheme && strcmp(loc.scheme->name, kind) == 0, "%s: scheme %s", url,
          loc.scheme ? loc.scheme->name : "(none)");
    CHECK(s_eq(loc.bucket, bucket), "%s: bucket '%s' want '%s'", url, loc.bucket, bucket);
    CHECK(s_eq(loc.key, key), "%s: key '%s' want '%s'", url, loc.key, key);
    CHECK(s_eq(loc.opt1, o1), "%s: opt1 '%s' want '%s'", url, loc.opt1, o1 ? o1 : "(null)");
    CHECK(s_eq(loc.opt2, o2), "%s: opt2 '%s'", url, loc.opt2 ? loc.opt2 : "(null)");
    CHECK(s_eq(loc.opt3, o3), "%s: opt3 '%s'", url, loc.opt3 ? loc.opt3 : "(null)");
    st_location_clear(&loc);
}

/* Refused with one line that contains want (and never the secret). */
static void bad(const char *url, const char *want, const char *secret)
{
    st_location loc;
    char err[600] = "";
    int rc = st_location_parse(url, &loc, err, sizeof err);
    CHECK(rc == S3LECT_EINVAL, "%s: accepted (rc %d)", url, rc);
    if (rc == 0)
        st_location_clear(&loc);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", url, err, want);
    CHECK(strchr(err, '\n') == NULL, "%s: message has a newline", url);
    CHECK(!secret || strstr(err, secret) == NULL, "%s: message shows the secret: %s", url, err);
}

static void shown(const char *url, const char *want)
{
    char *s = st_lock_display(url);
    CHECK(s && strcmp(s, want) == 0, "display(%s) = '%s', want '%s'", url, s ? s : "(null)", want);
    free(s);
}

int main(void)
{
    /* Azure Blob Storage */
    ok("az://acct1/locks/app/leader.json", "az", "acct1", "app/leader.json", "locks", NULL, NULL);
    ok("AZ://acct1/locks/x", "az", "acct1", "x", "locks", NULL, NULL);
    ok("https://acct1.blob.core.windows.net/locks/a/b.json", "https", "acct1", "a/b.json", "locks",
       NULL, NULL);
    ok("https://acct1.blob.core.usgovcloudapi.net/locks/b", "https", "acct1", "b", "locks",
       "core.usgovcloudapi.net", NULL);
    bad("az://acct1/locks", "needs a container and a blob", NULL);
    bad("az://acct1", "needs an account, a container and a blob", NULL);
    bad("az://Acct1/locks/x", "not a storage account name", NULL);
    bad("az://acct1/lo/x", "not a container name", NULL);
    bad("az://acct1/lo--cks/x", "not a container name", NULL);
    bad("az://acct1/locks/a//b", "blob name", NULL);
    bad("az://acct1/locks/x?sig=hunter2", "query or fragment", "hunter2");
    bad("az:/acct1/locks/x", "az://ACCOUNT/CONTAINER/BLOB (two slashes)", NULL);
    bad("https://example.com/locks/x", "an https lock URL names an Azure blob", NULL);
    bad("https://example.com/locks/x?sig=hunter2", "an https lock URL names", "hunter2");
    bad("https://acct1.blob.core.windows.net/locks/x?se=1&sig=hunter2", "query", "hunter2");
    bad("https://acct1.blob.core.windows.net:8443/locks/x", "an https lock URL names", NULL);
    bad("https://acct1.blob.core.windows.net/locks", "needs a container and a blob", NULL);
    {
        char *c1 = st_lock_canonical("AZ://acct1/locks/x");
        char *c2 = st_lock_canonical("https://acct1.blob.core.windows.net/locks/x");
        char *c3 = st_lock_canonical("https://acct1.blob.core.chinacloudapi.cn/locks/x");
        CHECK(c1 && strcmp(c1, "az://acct1/locks/x") == 0, "canonical %s", c1 ? c1 : "(null)");
        CHECK(c2 && strcmp(c2, "az://acct1/locks/x") == 0, "canonical %s", c2 ? c2 : "(null)");
        CHECK(c3 && strcmp(c3, "https://acct1.blob.core.chinacloudapi.cn/locks/x") == 0,
              "canonical %s", c3 ? c3 : "(null)");
        free(c1);
        free(c2);
        free(c3);
    }

    /* DynamoDB */
    ok("dynamodb://locks/leader", "dynamodb", "locks", "leader", "LockID", NULL, NULL);
    ok("DynamoDB://my_table.v2/a/b", "dynamodb", "my_table.v2", "a/b", "LockID", NULL, NULL);
    ok("dynamodb://locks/k%20x?partition_key=pk", "dynamodb", "locks", "k x", "pk", NULL, NULL);
    ok("dynamodb://locks/k?partition_key=pk&sort_key=sk&sort_value=lock%2Fv", "dynamodb", "locks",
       "k", "pk", "sk", "lock/v");
    bad("dynamodb://locks", "needs a table and a key", NULL);
    bad("dynamodb://locks/", "needs a table and a key", NULL);
    bad("dynamodb://ab/k", "not a DynamoDB table name", NULL);
    bad("dynamodb://bad*name/k", "not a DynamoDB table name", NULL);
    bad("dynamodb://locks/k?sort_key=sk", "sort_key and sort_value go together", NULL);
    bad("dynamodb://locks/k?partition=x", "unknown parameter 'partition'", NULL);
    bad("dynamodb://locks/k?partition_key=", "needs a value", NULL);
    bad("dynamodb://locks/k?partition_key=a&partition_key=b", "given twice", NULL);
    bad("dynamodb://locks/k?partition_key=a%2", "malformed %-escape", NULL);
    bad("dynamodb://locks/k%00", "malformed %-escape", NULL);
    bad("dynamodb://locks/k%0a", "control character", NULL);
    bad("dynamodb://locks/k?partition_key=a&sort_key=a&sort_value=v", "the same attribute", NULL);
    bad("dynamodb://locks/k#frag", "fragment", NULL);

    /* PostgreSQL: s3lect's parameters are taken out, libpq's stay. */
    ok("postgres://u@127.0.0.1:5432/db?key=leader", "postgres", "postgres://u@127.0.0.1:5432/db",
       "leader", "s3lect_locks", NULL, NULL);
    ok("postgresql:///db?sslmode=require&key=a%20b&table=ops.locks&connect_timeout=5", "postgres",
       "postgresql:///db?sslmode=require&connect_timeout=5", "a b", "ops.locks", NULL, NULL);
    bad("postgres://u@h/db", "add ?key=NAME", NULL);
    bad("postgres://u:hunter2@h/db?table=x", "add ?key=NAME", "hunter2");
    bad("postgres://u:hunter2@h/db?key=k&table=1abc", "must be NAME or SCHEMA.NAME", "hunter2");
    bad("postgres://h/db?key=k&table=a;drop", "must be NAME or SCHEMA.NAME", NULL);
    bad("postgres://h/db?key=k&table=a.b.c", "must be NAME or SCHEMA.NAME", NULL);
    bad("postgres://h/db?key=k&key=j", "given twice", NULL);
    bad("postgres://u:hunter2@h/db?key=k#x", "fragment", "hunter2");
    bad("postgres://h/db?password=hunter2&key=k&key=x", "given twice", "hunter2");

    /* PostgreSQL with IAM database authentication (?auth=aws-iam): the
     * lock's credentials are the AWS chain's, TLS only, no password. */
    ok("postgres://iam_user@db.abc.us-east-1.rds.amazonaws.com:5432/app?key=leader&auth=aws-iam",
       "postgres", "postgres://iam_user@db.abc.us-east-1.rds.amazonaws.com:5432/app", "leader",
       "s3lect_locks", NULL, NULL);
    ok("postgres://u@h/db?auth=aws-iam&region=eu-west-1&key=k&sslmode=verify-full", "postgres",
       "postgres://u@h/db?sslmode=verify-full", "k", "s3lect_locks", "eu-west-1", NULL);
    {
        st_location loc;
        char err[600] = "";
        CHECK(st_location_parse("postgres://u@h/db?key=k&auth=aws-iam", &loc, err, sizeof err) == 0,
              "iam: %s", err);
        CHECK(loc.cred == ST_CRED_AWS && st_location_cred(&loc) == ST_CRED_AWS &&
                  st_location_is_aws(&loc),
              "auth=aws-iam: cred %d", st_location_cred(&loc));
        st_location_clear(&loc);
        CHECK(st_location_parse("postgres://u@h/db?key=k", &loc, err, sizeof err) == 0, "%s", err);
        CHECK(loc.cred == 0 && st_location_cred(&loc) == loc.scheme->cred &&
                  !st_location_is_aws(&loc),
              "no auth: cred %d", st_location_cred(&loc));
        st_location_clear(&loc);
        char *c = st_lock_canonical("POSTGRES://u@h/db?region=eu-west-1&auth=aws-iam&key=k");
        CHECK(c && strcmp(c, "postgres://u@h/db?key=k&table=s3lect_locks&auth=aws-iam&region=eu-"
                             "west-1") == 0,
              "canonical iam: %s", c ? c : "(null)");
        free(c);
    }
    bad("postgres://u@h/db?key=k&auth=password", "auth=password is not known", NULL);
    bad("postgres://u@h/db?key=k&region=eu-west-1", "region= goes with auth=aws-iam", NULL);
    bad("postgres://u@h/db?key=k&auth=aws-iam&region=eu%20west", "is not a region name", NULL);
    bad("postgres://u@h/db?key=k&auth=aws-iam&sslmode=disable", "RDS requires TLS", NULL);
    bad("postgres://u@h/db?sslmode=allow&key=k&auth=aws-iam", "sslmode=allow", NULL);
    bad("postgres://u@h/db?key=k&auth=aws-iam&sslmode=prefer", "sslmode=prefer", NULL);
    bad("postgres://u:hunter2@h/db?key=k&auth=aws-iam", "takes no password", "hunter2");
    bad("postgres://u@h/db?key=k&auth=aws-iam&password=hunter2", "takes no password", "hunter2");
    bad("postgres://u@h/db?key=k&auth=aws-iam&auth=aws-iam", "given twice", NULL);

    /* Route 53: names lower case, with the final dot. */
    ok("route53://Z0123456789ABC/Lock.Example.com", "route53", "Z0123456789ABC",
       "lock.example.com.", NULL, NULL, NULL);
    ok("route53://Z1/_leader.example.com.", "route53", "Z1", "_leader.example.com.", NULL, NULL,
       NULL);
    bad("route53://Z1", "needs a hosted zone id and a record name", NULL);
    bad("route53://hostedzone/Z1/x.example.com", "needs a hosted zone id and a record name", NULL);
    bad("route53://Z-1/x.example.com", "not a hosted zone id", NULL);
    bad("route53://Z1/bad..name.com", "not a DNS record name", NULL);
    bad("route53://Z1/bad name.com", "not a DNS record name", NULL);
    bad("route53://Z1/x.com?ttl=5", "query or fragment", NULL);

    /* Google Cloud Storage. */
    ok("gs://my-bucket/locks/leader.json", "gs", "my-bucket", "locks/leader.json", NULL, NULL,
       NULL);
    ok("GS://b_1.example.com/k", "gs", "b_1.example.com", "k", NULL, NULL, NULL);
    ok("gs://bkt/caf\xc3\xa9 x", "gs", "bkt", "caf\xc3\xa9 x", NULL, NULL, NULL);
    bad("gs://bucket", "needs a bucket and an object", NULL);
    bad("gs://bucket/", "needs a bucket and an object", NULL);
    bad("gs:/bucket/k", "gs://bucket/object", NULL);
    bad("gs://Bucket/k", "invalid character", NULL);
    bad("gs://ab/k", "3 to 63", NULL);
    bad("gs://-ab/k", "start and end with a letter or digit", NULL);
    bad("gs://abc-/k", "start and end with a letter or digit", NULL);
    bad("gs://bkt/a//b", "segment", NULL);
    bad("gs://bkt/a/../b", "segment", NULL);
    bad("gs://bkt/a\nb", "control character", NULL);
    bad("gs://bkt/\xff", "UTF-8", NULL);
    bad("gs://bkt/k?generation=1", "query or fragment", NULL);
    bad("gs://u:hunter2@bkt/k", "lock URL", "hunter2");
    bad("gcs://bkt/k", "gs://BUCKET/OBJECT", NULL);

    /* etcd: endpoints (lower case, port defaulted), key as written, user and
     * password decoded, the client certificate files. */
    ok("etcd://127.0.0.1:2379/locks/leader", "etcd", "http://127.0.0.1:2379", "locks/leader", NULL,
       NULL, NULL);
    ok("ETCD://Host-A,host-b:3000,[::1]:4000//k", "etcd",
       "http://host-a:2379,host-b:3000,[::1]:4000", "/k", NULL, NULL, NULL);
    ok("etcds://u%40x:p%3Ass@h:1/a/b", "etcd", "https://h:1", "a/b", "u@x", "p:ss", NULL);
    ok("etcd://app@h:1/k", "etcd", "http://h:1", "k", "app", NULL, NULL);
    ok("etcds://h:1/k?cert=/c.pem&cert_key=/k.pem", "etcd", "https://h:1", "k", NULL, NULL,
       "/c.pem\n/k.pem");
    ok("etcds://h:1/k?cert=/both.pem", "etcd", "https://h:1", "k", NULL, NULL, "/both.pem\n");
    bad("etcd://h:1", "needs endpoints and a key", NULL);
    bad("etcd://h:1/", "needs endpoints and a key", NULL);
    bad("etcd://h:1/?cert=a", "needs endpoints and a key", NULL);
    bad("etcd:///k", "an endpoint is empty", NULL);
    bad("etcd://a:1,/k", "an endpoint is empty", NULL);
    bad("etcd://a:/k", "port is not a number", NULL);
    bad("etcd://a:65536/k", "port is not a number", NULL);
    bad("etcd://a:1x/k", "port is not a number", NULL);
    bad("etcd://a b/k", "invalid character", NULL);
    bad("etcd://[::1/k", "lacks its ']'", NULL);
    bad("etcd://[::g]:1/k", "invalid character", NULL);
    bad("etcd://[::1]x/k", "after its ']'", NULL);
    bad("etcd://:pw@h:1/k", "no user name", "pw@");
    bad("etcd://h:1/k?tls=1", "unknown parameter 'tls'", NULL);
    bad("etcd://h:1/k?cert=/c", "need TLS", NULL);
    bad("etcds://h:1/k?cert_key=/k", "cert_key= needs cert=", NULL);
    bad("etcd://h:1/k#x", "no fragment", NULL);
    bad("etcd://h:1/a\nb", "control character", NULL);
    bad("etcd:h/k", "etcd://HOST:PORT/KEY", NULL);
    bad("etcd://a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9,j:10,k:11,l:12,m:13,n:14,o:15,p:16,q:17/k",
        "more than 16 endpoints", NULL);
    bad("etcd://u:hunter2@h:0/k", "etcd://u:***@h:0/k", "hunter2");
    bad("etcd://u:hunter2@h:1/k?x=1", "lock URL", "hunter2");
    shown("etcd://u:hunter2@a:1,b:2/k", "etcd://u:***@a:1,b:2/k");
    {
        char *c = st_lock_canonical("ETCDS://U:pw@Host:1,h2/k?cert=/c");
        CHECK(c && strcmp(c, "etcds://host:1,h2:2379/k") == 0, "canonical etcd: %s",
              c ? c : "(null)");
        free(c);
    }
    /* Redis: bucket HOST:PORT, key, opt1 user, opt2 password, opt3 db (NULL: 0). */
    ok("redis://127.0.0.1:6379/locks/app", "redis", "127.0.0.1:6379", "locks/app", NULL, NULL,
       NULL);
    ok("redis://cache.internal/k", "redis", "cache.internal:6379", "k", NULL, NULL, NULL);
    ok("REDIS://h:1/k?db=3", "redis", "h:1", "k", NULL, NULL, "3");
    ok("redis://h:1/k?db=0", "redis", "h:1", "k", NULL, NULL, NULL);
    ok("rediss://elector:s%40cret@[::1]:6380/a%2Fb", "rediss", "[::1]:6380", "a/b", "elector",
       "s@cret", NULL);
    ok("redis://:pw@h/k", "redis", "h:6379", "k", NULL, "pw", NULL);
    ok("redis://elector@h/k", "redis", "h:6379", "k", "elector", NULL, NULL);
    ok("redis://elector:@h/k", "redis", "h:6379", "k", "elector", NULL, NULL);
    bad("redis://h:6379", "names no key", NULL);
    bad("redis://h:6379/", "names no key", NULL);
    bad("redis://h/?db=1", "names no key", NULL);
    bad("redis:///k", "names no server", NULL);
    bad("redis://h:0/k", "from 1 to 65535", NULL);
    bad("redis://h:65536/k", "from 1 to 65535", NULL);
    bad("redis://h:x/k", "from 1 to 65535", NULL);
    bad("redis://h:/k", "from 1 to 65535", NULL);
    bad("redis://[::1/k", "IPv6", NULL);
    bad("redis://[::1]x/k", "[ADDRESS]:PORT", NULL);
    bad("redis://h^/k", "not a host name", NULL);
    bad("redis://h/k?db=a", "database number", NULL);
    bad("redis://h/k?db=123456", "database number", NULL);
    bad("redis://h/k?user=u", "unknown parameter", NULL);
    bad("redis://h/k#x", "fragment", NULL);
    bad("redis://h/a\nb", "control character", NULL);
    bad("redis://u%zz@h/k", "%-escape", NULL);
    bad("redis://u:hunter2@h", "lock URL", "hunter2");
    bad("redis:h/k", "redis://HOST:PORT/KEY", NULL);
    bad("rediss:/h/k", "rediss://HOST:PORT/KEY", NULL);

    /* MySQL and MariaDB: bucket HOST:PORT/DB (host lower case, port
     * defaulted), key, opt1 the table, opt2 the URL's password (decoded), opt3
     * the connection's settings as a query (user, tls, ...). */
    ok("mysql://elector@DB.example.com/app?key=leader", "mysql", "db.example.com:3306/app",
       "leader", "s3lect_locks", NULL, "user=elector&tls=preferred");
    ok("MariaDB://u:p%40ss@[::1]:3307/app?key=a%20b&table=Locks_2&tls=verify-full&ca=/etc/ca.pem"
       "&timeout=2500ms&password_env=APP_DB_PW",
       "mysql", "[::1]:3307/app", "a b", "Locks_2", "p@ss",
       "user=u&tls=verify-full&ca=/etc/ca.pem&timeout=2500ms&password_env=APP_DB_PW");
    ok("mysql://u@h:1/d?key=k&auth=aws-iam&region=eu-west-1", "mysql", "h:1/d", "k", "s3lect_locks",
       NULL, "user=u&tls=required&auth=aws-iam&region=eu-west-1");
    ok("mysql://u%26x@h/d?key=k&tls=disable", "mysql", "h:3306/d", "k", "s3lect_locks", NULL,
       "user=u%26x&tls=disable");
    {
        st_location loc;
        char err[300];
        CHECK(st_location_parse("mysql://u@h/d?key=k&auth=aws-iam", &loc, err, sizeof err) == 0 &&
                  st_location_cred(&loc) == ST_CRED_AWS,
              "mysql auth=aws-iam takes the AWS chain: %s", err);
        st_location_clear(&loc);
        CHECK(st_location_parse("mysql://u@h/d?key=k", &loc, err, sizeof err) == 0 &&
                  st_location_cred(&loc) == ST_CRED_URL,
              "mysql: credentials of the URL: %s", err);
        st_location_clear(&loc);
        char *c = st_lock_canonical("MARIADB://u:hunter2@Host/d?tls=required&key=a%26b&table=T");
        CHECK(c && strcmp(c, "mysql://u@host:3306/d?key=a%26b&table=T") == 0, "canonical mysql: %s",
              c ? c : "(null)");
        free(c);
        c = st_lock_canonical("mysql://u@h:1/d?key=k&auth=aws-iam");
        CHECK(c && strcmp(c, "mysql://u@h:1/d?key=k&table=s3lect_locks&auth=aws-iam") == 0,
              "canonical mysql iam: %s", c ? c : "(null)");
        free(c);
    }
    bad("mysql://h/db?key=k", "names no user", NULL);
    bad("mysql://:hunter2@h/db?key=k", "names no user", "hunter2");
    bad("mysql://u@h/db", "add ?key=NAME", NULL);
    bad("mysql://u@h?key=k", "names no database", NULL);
    bad("mysql://u@h/a/b?key=k", "one name", NULL);
    bad("mysql://u@/db?key=k", "names no server", NULL);
    bad("mysql://u@h:0/db?key=k", "from 1 to 65535", NULL);
    bad("mysql://u@h:x/db?key=k", "from 1 to 65535", NULL);
    bad("mysql://u@h%20x/db?key=k", "not a host name", NULL);
    bad("mysql://u@h/db?key=k&table=a;drop", "letters, digits and '_'", NULL);
    bad("mysql://u@h/db?key=k&table=a`b", "letters, digits and '_'", NULL);
    bad("mysql://u:hunter2@h/db?key=k&tls=on", "tls=on is not a mode", "hunter2");
    bad("mysql://u@h/db?key=k&tls=verify-ca", "needs ca=FILE", NULL);
    bad("mysql://u@h/db?key=k&tls=disable&ca=/x", "remove one", NULL);
    bad("mysql://u@h/db?key=k&timeout=5", "timeout=5 is not a duration", NULL);
    bad("mysql://u@h/db?key=k&timeout=0", "above zero", NULL);
    bad("mysql://u@h/db?key=k&password_env=1X", "password_env=", NULL);
    bad("mysql://u@h/db?key=k&auth=kerberos", "auth=kerberos is not known", NULL);
    bad("mysql://u@h/db?key=k&region=eu-west-1", "goes with auth=aws-iam", NULL);
    bad("mysql://u:hunter2@h/db?key=k&auth=aws-iam", "remove the password", "hunter2");
    bad("mysql://u@h/db?key=k&auth=aws-iam&tls=preferred", "needs TLS", NULL);
    bad("mysql://u@h/db?key=k&password=hunter2", "unknown parameter 'password'", "hunter2");
    bad("mysql://u@h/db?key=k&key=j", "given twice", NULL);
    bad("mysql://u:hunter2@h/db?key=k#x", "fragment", "hunter2");
    bad("mysql:u@h/db?key=k", "mysql://USER@HOST", NULL);
    shown("mysql://u:hunter2@h:3306/db?key=k", "mysql://u:***@h:3306/db?key=k");

    /* A password never shows in a message, whatever the scheme. */
    bad("dynamodb://u:hunter2@locks/k", "lock URL", "hunter2");
    bad("s3://u:hunter2@bucket", "lock URL", "hunter2");
    bad("route53://Z1/x.com?password=hunter2", "query or fragment", "hunter2");
    bad("mysql://u:hunter2@h/db", "add ?key=NAME", "hunter2");

    /* Unknown schemes name the new ones. */
    bad("cockroach://h/db", "dynamodb://", NULL);
    bad("cockroach://h/db", "mysql://", NULL);

    /* Display: passwords hidden, the rest kept. */
    shown("postgres://u:hunter2@h:5432/db?key=k", "postgres://u:***@h:5432/db?key=k");
    shown("postgres://u@h/db?key=k", "postgres://u@h/db?key=k");
    shown("postgres://h/db?key=k&password=hunter2&sslmode=require",
          "postgres://h/db?key=k&password=***&sslmode=require");
    shown("postgres://u:p%40ss@h/db?password=a&password=b",
          "postgres://u:***@h/db?password=***&password=***");
    shown("redis://elector:hunter2@h:6379/k", "redis://elector:***@h:6379/k");
    shown("rediss://:hunter2@h/k", "rediss://:***@h/k");
    shown("redis://elector@h/k", "redis://elector@h/k");
    shown("s3://bucket/key", "s3://bucket/key");
    shown("/tmp/a:b@c", "/tmp/a:b@c");
    return t_done("locations");
}
