#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the hand-made seed corpora of tests/fuzz/corpus/<target>/.

    python3 tests/fuzz/make_seeds.py

Seeds are small: typical and edge-case lock records, S3 error bodies (as
MinIO and AWS send them), the AWS SigV4 suite's requests (tests/data/aws-sigv4,
Apache-2.0, see its LICENSE/NOTICE) and the S3 examples converted into
fuzz_sigv4's input format, and peer-endpoint HTTP requests. File names are
seed-<name>; inputs the fuzzers found are kept as found-<what> (minimised)
and are not touched by this script.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
SIGV4 = HERE.parent / "data" / "aws-sigv4"


def write(target: str, name: str, data: bytes | str) -> None:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / f"seed-{name}").write_bytes(data)


def records() -> None:
    t = "fuzz_record"
    rec = {"leaderID": "web-1", "leaderAddr": "10.0.0.5:8443",
           "lastUpdated": "2025-11-22T02:53:20.123Z", "term": 3, "leaseMs": 15000,
           "incarnation": "5f0c3a9e2b7d4c11"}
    write(t, "full", json.dumps(rec, separators=(",", ":")))
    write(t, "pretty", json.dumps(rec, indent=2))
    write(t, "released", json.dumps(dict(rec, leaderID="", leaderAddr="",
                                         lastUpdated="0001-01-01T00:00:00Z")))
    write(t, "go-v1", '{"leaderID":"go-1","leaderAddr":"","lastUpdated":"2025-11-22T02:53:20.5+01:00"}')
    write(t, "go-released", '{"leaderID":"","leaderAddr":"","lastUpdated":"0001-01-01T00:00:00Z"}')
    write(t, "unknown-fields", '{"leaderID":"x","lastUpdated":"2025-11-22T02:53:20Z",'
          '"future":{"a":[1,2,{"b":null}]},"term":9007199254740992}')
    write(t, "unicode", '{"leaderID":"n\\u00f6de-\\ud83d\\ude00","leaderAddr":"[::1]:8443",'
          '"lastUpdated":"2025-11-22t02:53:20,Z","term":1}')
    write(t, "escapes", '{"leaderID":"a\\"b\\\\c\\n\\u0000d","lastUpdated":"2025-11-22T02:53:20Z"}')
    write(t, "leap-second", '{"leaderID":"a","lastUpdated":"2016-12-31T23:59:60.999999Z"}')
    write(t, "offset-year-edge", '{"leaderID":"a","lastUpdated":"0001-01-01T00:30:00+01:00"}')
    write(t, "null-fields", '{"leaderID":"a","leaderAddr":null,"incarnation":null,'
          '"lastUpdated":"2025-11-22T02:53:20Z","term":0,"leaseMs":0}')
    write(t, "bad-term-float", '{"leaderID":"a","lastUpdated":"2025-11-22T02:53:20Z","term":1.5}')
    write(t, "bad-term-huge", '{"leaderID":"a","lastUpdated":"2025-11-22T02:53:20Z","term":1e300}')
    write(t, "bad-time", '{"leaderID":"a","lastUpdated":"2025-13-22T02:53:20Z"}')
    write(t, "bad-type", '{"leaderID":1,"lastUpdated":"2025-11-22T02:53:20Z"}')
    write(t, "array", '[{"leaderID":"a"}]')
    write(t, "truncated", '{"leaderID":"a","lastUpd')
    write(t, "duplicate-keys", '{"leaderID":"a","leaderID":"b","lastUpdated":"2025-11-22T02:53:20Z"}')


def xml_bodies() -> None:
    t = "fuzz_s3_xml"
    head = '<?xml version="1.0" encoding="UTF-8"?>\n'

    def err(code: str, msg: str, extra: str = "") -> str:
        return (f"{head}<Error><Code>{code}</Code><Message>{msg}</Message>{extra}"
                "<RequestId>1823A4E5B6C7D8E9</RequestId><HostId>dd9025bab4ad464b</HostId></Error>")

    write(t, "access-denied", err("AccessDenied", "Access Denied.", "<Resource>/b/k</Resource>"))
    write(t, "no-such-bucket", err("NoSuchBucket", "The specified bucket does not exist",
                                   "<BucketName>s3lect-test</BucketName>"))
    write(t, "no-such-key", err("NoSuchKey", "The specified key does not exist.", "<Key>leader.json</Key>"))
    write(t, "slow-down", err("SlowDown", "Please reduce your request rate."))
    write(t, "precondition", err("PreconditionFailed",
                                 "At least one of the pre-conditions you specified did not hold",
                                 "<Condition>If-Match</Condition>"))
    write(t, "conflict", err("ConditionalRequestConflict",
                             "A conflicting conditional operation is currently in progress"))
    write(t, "signature", err("SignatureDoesNotMatch",
                              "The request signature we calculated does not match &amp; &lt;x&gt;"))
    write(t, "entities", "<Error><Code>A&amp;B</Code><Message> x &lt;y&gt; &quot;z&quot; &apos;w&apos;"
          " &#65;&#x42;&#x1F600;&#7;&#xD800;&#0;&bogus;</Message></Error>")
    write(t, "not-implemented", err("NotImplemented", "A header you provided implies functionality"
                                    " that is not implemented"))
    write(t, "self-closing", "<Error><Code/><Message>m</Message><Code>X</Code></Error>")
    write(t, "truncated", "<Error><Code>SlowDown")
    write(t, "attributes", '<Error xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Code attr="1">X'
          "</Code></Error>")
    write(t, "comment-cdata", "<Error><!-- <Code>no</Code> --><Code><![CDATA[Y]]></Code></Error>")
    write(t, "bad-utf8", b"<Error><Code>\xc3\x28\xe0\x80\x80\xed\xa0\x80\xf4\x90\x80\x80ok</Code>"
          b"<Message>\xc2\x9b[31mred\x1b[0m</Message></Error>")
    write(t, "long-message", "<Error><Code>C</Code><Message>" + "\u00e9" * 300 + "</Message></Error>")
    write(t, "html", "<html><body><h1>502 Bad Gateway</h1></body></html>")


def parse_request(raw: str) -> tuple[str, str, str, list[tuple[str, str]], str]:
    head, _, body = raw.partition("\n\n")
    lines = head.split("\n")
    method, target, _ = lines[0].split(" ", 2) if lines[0].count(" ") >= 2 else (*lines[0].split(" ", 1), "")
    path, _, query = target.partition("?")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and headers:   # continuation of a multi-line value
            name, value = headers[-1]
            headers[-1] = (name, value + "\n" + line)
        elif ":" in line:
            name, value = line.split(":", 1)
            headers.append((name, value))
    return method, path, query, headers, body


def sigv4_input(flags: int, method: str, path: str, query: str, payload_hash: str, date: str,
                body: str, headers: list[tuple[str, str]]) -> bytes:
    fields = [method, path, query, payload_hash, date, body]
    for n, v in headers:
        fields += [n, v]
    return bytes([flags]) + b"\0".join(f.encode() for f in fields)


def sigv4() -> None:
    t = "fuzz_sigv4"
    for case in sorted((SIGV4 / "v4").iterdir()):
        ctx = json.loads((case / "context.json").read_text())
        raw = (case / "request.txt").read_text()
        method, path, query, headers, body = parse_request(raw)
        ts = re.sub(r"[-:]", "", ctx["timestamp"])   # 2015-08-30T12:36:00Z -> 20150830T123600Z
        flags = (1 if ctx.get("normalize") else 0) | (2 if ctx.get("sign_body") else 0) | 32
        if ctx["credentials"].get("session_token"):
            flags |= 4
        write(t, case.name, sigv4_input(flags, method, path, query, "", ts, body, headers))
    ex = json.loads((SIGV4 / "s3-examples.json").read_text())
    for case in ex["cases"]:
        hdrs = list(case["headers"].items())
        write(t, "s3-" + case["name"], sigv4_input(2 | 32, case["method"], case["path"],
                                                   case.get("query", ""), "", ex["timestamp"],
                                                   case.get("body", ""), hdrs))
    # What the S3 store sends: a conditional PUT of a record, path style.
    write(t, "s3lect-put", sigv4_input(
        2 | 16, "PUT", "/s3lect-test/cli/leader%20one.json", "x-id=PutObject&a=%2F&b", "UNSIGNED-PAYLOAD",
        "", '{"leaderID":"a"}',
        [("Host", "127.0.0.1:9000"), ("If-Match", '"3858f62230ac3c915f300c664312c63f"'),
         ("Content-Type", "application/json"), ("X-Amz-Date", "20150830T123600Z")]))
    write(t, "dot-segments", sigv4_input(1 | 64, "GET", "/a/./b/../../c//d/%2e%2E/%2F/..", "", "", "", "", []))


def peer_requests() -> None:
    t = "fuzz_peer_request"
    write(t, "get", "GET /health/leadership HTTP/1.1\r\nHost: 10.0.0.5:8443\r\n\r\n")
    write(t, "long-poll", "GET /health/leadership?wait=30000&etag=%223858f62230ac3c915f300c664312c63f%22"
          " HTTP/1.1\r\nHost: a\r\nUser-Agent: s3lect/0.1\r\nAccept: */*\r\n\r\n")
    write(t, "close", "GET /health/leadership HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    write(t, "http10", "HEAD /health/leadership HTTP/1.0\r\n\r\n")
    write(t, "post-body", "POST /health/leadership HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
    write(t, "pipelined", "GET /x HTTP/1.1\r\nHost: a\r\n\r\nGET /health/leadership HTTP/1.1\r\n\r\n")
    write(t, "huge-wait", "GET /health/leadership?wait=99999999999999999999&etag= HTTP/1.1\r\n\r\n")
    write(t, "bad-version", "GET / HTTP/2.0\r\n\r\n")
    write(t, "bare-lf", "GET /health/leadership HTTP/1.1\nHost: a\n\n")
    write(t, "partial", "GET /health/leadership HTTP/1.1\r\nHost: a\r\n")
    write(t, "bad-percent", "GET /health/leadership?etag=%zz%2&wait=-5&wait=7 HTTP/1.1\r\n\r\n")
    write(t, "too-large", "GET / HTTP/1.1\r\nX-Pad: " + "a" * 8300 + "\r\n\r\n")
    write(t, "connection-keep-alive", "GET /health/leadership HTTP/1.0\r\nConnection: Keep-Alive\r\n"
          "content-length: 0\r\n\r\n")
    write(t, "incarnation", "GET /health/leadership?incarnation=0a1b2c3d4e5f60718293a4b5c6d7e8f9"
          "&wait=30000&etag=%221-ab%22 HTTP/1.1\r\nHost: a\r\n\r\n")
    write(t, "batch-head", "POST /health/leadership HTTP/1.1\r\nHost: a\r\nContent-Type: "
          "application/json\r\nContent-Length: 1048577\r\n\r\n")


def peer_batches() -> None:
    t = "fuzz_peer_batch"
    write(t, "two", '{"wait":25000,"locks":[{"incarnation":"0a1b2c3d4e5f60718293a4b5c6d7e8f9","term":3,'
          '"etag":"\\"1-ab\\""},{"incarnation":"ff","term":0,"etag":""}]}')
    write(t, "empty", '{"wait":1,"locks":[]}')
    write(t, "bad-inc", '{"wait":1,"locks":[{"incarnation":"xyz","term":1,"etag":""}]}')
    write(t, "fraction", '{"wait":1.5,"locks":[{"incarnation":"a","term":1.5,"etag":""}]}')
    write(t, "nested", '{"wait":1,"locks":[[[[{"incarnation":"a"}]]]]}')
    write(t, "truncated", '{"wait":1,"locks":[{"incarnation":"a","term":1,"etag":"')


def peer_answers() -> None:
    """Answers to a batched follower check of three locks (fuzz_peer_answer.c)."""
    t = "fuzz_peer_answer"
    a, b, c = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "0" * 31 + "1"

    def rec(inc: str, leader: str = "node1", etag: str = '"e2"') -> dict:
        return {"leaderID": leader, "leaderAddr": "10.0.0.1:7000", "lastUpdated": "2026-01-01T00:00:00Z",
                "leaseMs": 15000, "term": 8, "incarnation": inc, "peerKeySha256": "k" * 44, "etag": etag}

    def answer(*locks: dict) -> str:
        return json.dumps({"locks": list(locks)}, separators=(",", ":"))

    write(t, "changed-and-gone", answer({"incarnation": a, "status": 200, "record": rec(a)},
                                        {"incarnation": c, "status": 404}))
    write(t, "all-after-wait", answer({"incarnation": a, "status": 200, "record": rec(a)},
                                      {"incarnation": b, "status": 200, "record": rec(b, "node2")},
                                      {"incarnation": c, "status": 200, "record": rec(c, "x")}))
    write(t, "twice", answer({"incarnation": c, "status": 404}, {"incarnation": c, "status": 404}))
    write(t, "other-leader", answer({"incarnation": a, "status": 200, "record": rec(a, "node2")}))
    write(t, "other-incarnation", answer({"incarnation": a, "status": 200, "record": rec(b)}))
    write(t, "not-asked", answer({"incarnation": "9" * 32, "status": 404}))
    write(t, "empty", answer())
    write(t, "status-500", answer({"incarnation": c, "status": 500}))


def main() -> None:
    records()
    xml_bodies()
    sigv4()
    peer_requests()
    peer_batches()
    peer_answers()
    for d in sorted(CORPUS.iterdir()):
        print(f"{d.name}: {len(list(d.iterdir()))} files")


if __name__ == "__main__":
    main()
