#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that libs3lect's layers only depend downwards.

libs3lect/src has one folder per layer, lowest first (the order of
S3LECT_LAYERS in libs3lect/CMakeLists.txt):

    base < config < cred < aws < gcp < azure < store < engine < peer < runtime < api

A file may include headers of its own layer and lower ones (and the public
s3lect.h), and may call functions defined in its own layer or lower ones.
Calls are found by name: every non-static function defined in a layer's .c
files belongs to that layer; a call to it from a lower layer is an error.

The CLI (libs3lect/cli) is a client of the public API: it includes s3lect.h,
its own headers, and of the library's internal headers only those in
CLI_INTERNAL, each with the reason the public API cannot serve there
(docs/architecture.md). A header on the list that no CLI file includes any
more is an error too, so the list only shrinks with the code.

Within the library the include graph of modules (a module: NAME.c with
NAME.h; the public s3lect.h is a module of its own) has no cycle: A's files
including B's header while B's include A's is two modules that are one, or
a header in the wrong place (issue 40).

  tests/check_layers.py [REPO_ROOT]
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
SRC = ROOT / "libs3lect" / "src"


# header -> what the CLI needs it for that s3lect.h does not offer.
CLI_INTERNAL = {
    "util.h": "the library's clocks, u_asprintf, RFC 3339 formatting and base64 (check-store "
              "--data's fence tokens) (base helpers, not API: the CLI shares them rather than "
              "keeping copies)",
    "proc.h": "u_thread_create (threads with asynchronous signals blocked, docs/threading.md) "
              "and the process-ownership lock the supervisor shares with the library's own "
              "child processes",
    "net.h": "u_listen, the dual-stack listener of --metrics-listen (the peer endpoint's)",
    "store.h": "status, watch, init-store, reset-term, check-store and whoami read, write and "
               "describe a lock's store directly; an elector (the public API) only elects",
    "record.h": "status, watch and reset-term decode and write the lock record",
    "aws_creds.h": "whoami and check-store resolve the credential chain and say which source "
                   "answered",
    "gcp_creds.h": "whoami resolves the Google credential chain of a gs:// lock and says which "
                   "source answered",
    "crypto.h": "check-store's random scratch key name",
    "az_auth.h": "whoami names the explicit Azure credential source (Shared Key, SAS) and "
                 "a SAS token's expiry",
    "az_creds.h": "whoami resolves the Entra ID chain and says which source answered",
    "duration.h": "the one duration syntax (config/duration.c) for the CLI's own flags that are "
                  "not library options (--kill-timeout, --startup-timeout, --interval)",
    "peer.h": "s3lect transfer tells a peer-mode leader that its record holds a request "
              "(peer_client_* with ?xfer=1, the record's key pinned and its succKey as proof): "
              "a one-off check the public API has no call for",
}


def check_cli(errors):
    cli = ROOT / "libs3lect" / "cli"
    own = {f.name for f in cli.glob("*.h")}
    used = set()
    for f in sorted(cli.glob("*.[ch]")):
        for m in re.finditer(r'#include\s+"([^"]+)"', f.read_text()):
            h = m.group(1)
            if h == "s3lect.h" or h in own:
                continue
            if Path(h).name in CLI_INTERNAL and "/" not in h:
                used.add(h)
                continue
            errors.append(f"{f.relative_to(ROOT)} (cli) includes {h}: the CLI uses the public "
                          "API (s3lect.h); add the header to CLI_INTERNAL in "
                          "tests/check_layers.py, saying why s3lect.h cannot serve, only if it cannot")
    for h in sorted(set(CLI_INTERNAL) - used):
        errors.append(f"CLI_INTERNAL lists {h}, which no file of libs3lect/cli includes: "
                      "drop it from the list")
    # docs/architecture.md's table of them says the same (issue 40 item 6).
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc.split("own headers, only these internal headers", 1)[-1].split("\n\n", 2)[1]
    documented = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            documented |= set(re.findall(r"`([\w.]+\.h)`", row.split("|")[1]))
    for h in sorted(set(CLI_INTERNAL) ^ documented):
        where = "docs/architecture.md" if h in CLI_INTERNAL else "CLI_INTERNAL"
        errors.append(f"the CLI's internal header {h} is missing from {where} (the table of "
                      "docs/architecture.md and CLI_INTERNAL list the same headers)")
    return len(used)


def layers():
    cm = (ROOT / "libs3lect" / "CMakeLists.txt").read_text()
    m = re.search(r"set\(S3LECT_LAYERS ([^)]*)\)", cm)
    if not m:
        raise SystemExit("check_layers: S3LECT_LAYERS not found in libs3lect/CMakeLists.txt")
    return m.group(1).split()


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def module_cycles(files):
    """The cycles of the include graph of modules (NAME.c + NAME.h), each as
    its modules' names; [] when there is none."""
    def module(name):  # the public header is not api/s3lect.c's own
        return "s3lect.h" if Path(name).name == "s3lect.h" else Path(name).stem

    graph = {}
    for f in files:
        for m in re.finditer(r'#include\s+"([^"]+)"', f.read_text()):
            dep = module(m.group(1))
            if dep != module(f.name):
                graph.setdefault(module(f.name), set()).add(dep)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    order = layers()
    rank = {name: i for i, name in enumerate(order)}
    files = {}
    for d in SRC.iterdir():
        if not d.is_dir():
            continue
        if d.name not in rank:
            print(f"check_layers: folder libs3lect/src/{d.name} is not a layer in S3LECT_LAYERS")
            return 1
        for f in d.iterdir():
            if f.suffix in (".c", ".h"):
                files[f] = d.name
    loose = [f.name for f in SRC.iterdir() if f.is_file()]
    errors = []
    if loose:
        errors.append(f"files outside a layer folder: {', '.join(sorted(loose))}")
    header_layer = {f.name: layer for f, layer in files.items() if f.suffix == ".h"}
    defined = {}
    for f, layer in files.items():
        if f.suffix != ".c":
            continue
        for m in re.finditer(r"^(?!static\b)[A-Za-z][\w \*]*?\b([a-z_][a-z0-9_]*)\(([^;{]*)\)\s*\{",
                             strip(f.read_text()), flags=re.M):
            defined.setdefault(m.group(1), layer)
    for f, layer in sorted(files.items()):
        text = f.read_text()
        for m in re.finditer(r'#include\s+"([^"]+)"', text):
            h = Path(m.group(1)).name
            hl = header_layer.get(h)
            if hl is not None and rank[hl] > rank[layer]:
                errors.append(f"{f.relative_to(ROOT)} ({layer}) includes {h} ({hl})")
        body = strip(text)
        for m in re.finditer(r"\b([a-z_][a-z0-9_]*)\s*\(", body):
            name = m.group(1)
            dl = defined.get(name)
            if dl is not None and rank[dl] > rank[layer]:
                errors.append(f"{f.relative_to(ROOT)} ({layer}) calls {name} ({dl})")
    # Every thread of the library and the CLI is made by u_thread_create
    # (base/proc.c), which blocks asynchronous signals in it (docs/threading.md).
    for f in sorted(list(files) + list((ROOT / "libs3lect" / "cli").glob("*.c"))):
        if f.name != "proc.c" and re.search(r"\bpthread_create\s*\(", strip(f.read_text())):
            errors.append(f"{f.relative_to(ROOT)} calls pthread_create: use u_thread_create "
                          "(base/proc.h), which blocks asynchronous signals in the new thread")
    # A store that is not an AWS one, and the Google and Azure credential
    # layers, include no AWS header (issue 40 item 3): what they share with
    # AWS (the credential cache, the HTTP client, the OAuth2 token call) is in
    # cred/, store/http_store.h and base/. One file of gcp/ is on AWS's
    # credential sources and SigV4 by design: the AWS identity source of
    # Google's workload identity federation signs a GetCallerIdentity request.
    aws_stores = {"store_s3.c", "store_dynamodb.c", "store_route53.c", "aws_http.c"}
    aws_users = {"gcp_aws.c": "the AWS identity source of Google's workload identity federation"}
    # The SQL stores of Amazon RDS and Aurora sign their IAM database
    # authentication token (?auth=aws-iam) with the AWS chain: that one header
    # only, nothing else of aws/.
    rds_users = {"store_postgres.c", "store_mysql.c"}
    aws_headers = {f.name for f, layer in files.items() if layer == "aws" and f.suffix == ".h"}
    aws_headers.add("aws_http.h")
    for f, layer in sorted(files.items()):
        if layer == "store":
            if f.suffix != ".c" or f.name in aws_stores:
                continue
            what = "is not an AWS store"
            where = "store/http_store.h, cred/ or base/"
        elif layer in ("gcp", "azure"):
            if f.name in aws_users:
                continue
            what = f"is in {layer}/"
            where = "cred/ (the cache, cred_http.h) or base/"
        else:
            continue
        for m in re.finditer(r'#include\s+"([^"]+)"', f.read_text()):
            if layer == "store" and f.name in rds_users and Path(m.group(1)).name == "rds_token.h":
                continue
            if Path(m.group(1)).name in aws_headers:
                errors.append(f"{f.relative_to(ROOT)} {what} but includes {m.group(1)}: take what "
                              f"it needs from {where}")
    for name in sorted(aws_users):
        if not any(f.name == name for f in files):
            errors.append(f"check_layers' aws_users lists {name}, which is no file of "
                          "libs3lect/src any more: drop it from the list")
    for cycle in module_cycles(list(files) + [ROOT / "libs3lect" / "include" / "s3lect.h"]):
        errors.append(f"modules include each other ({' <-> '.join(cycle)}): move what both need "
                      "into one of them or a lower one")
    ncli = check_cli(errors)
    for e in sorted(set(errors)):
        print("check_layers: " + e)
    if errors:
        print(f"check_layers: {len(set(errors))} problems: dependencies against the layers "
              "or CLI includes beyond its list "
              f"({' < '.join(order)})")
        return 1
    print(f"check_layers: {len(files)} files in {len(order)} layers, every dependency points down "
          f"({' < '.join(order)}), no two modules include each other; the CLI includes "
          f"s3lect.h and {ncli} internal headers of its documented list")
    return 0


if __name__ == "__main__":
    sys.exit(main())
