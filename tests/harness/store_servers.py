# SPDX-License-Identifier: Apache-2.0
"""The servers of the registry's stores for the bindings' store tests.

    python3 tests/harness/store_servers.py [--cli PATH] -- CMD [ARGS...]

starts, per store of the registry (tests/harness/stores.py) but those in
ELSEWHERE, its backend (tests/harness/backends.py FAMILY: the server, and
what the backend makes at start, a Route 53 hosted zone, ...), creates what
its locks need with `PATH init-store` (a DynamoDB table, a PostgreSQL
table; PATH defaults to build/bin/s3lect), runs CMD with the variables below
added to its environment, stops every server (even on failure or a signal)
and exits with CMD's status. If a server cannot start, it exits with status
1 and the server's log, before running CMD. Nothing here is per store: a new
store of the registry is served once it has its backend.

S3LECT_TEST_STORES says per store what an elector needs, one setting a line
(the registry's order; fields separated by tabs, values have neither tab
nor newline):

    KIND  lock       -     a lock URL with {key} where a lock name goes
    KIND  staggered  -     1: start electors one after the other (the test
                           server does not enforce compare-and-set), else 0
    KIND  option     NAME  VALUE: an elector option, by the library's
                           option names (endpoint, access_key_id, region...)
    KIND  env        NAME  VALUE: a variable the store reads from the
                           process's environment (exported here too)

so the Go and Lua store tests (bindings/go/stores_test.go,
bindings/lua/tests/test_stores.lua) have no per-store code. Also exported:

    S3LECT_CLI      the s3lect CLI (--cli)
    each store's env variables (above)

Credentials and endpoints that scripts/with-minio sets for MinIO too
(AWS_ACCESS_KEY_ID, ...) are options, never variables, so this wrapper nests
with scripts/with-minio in either order; two stores that need one variable
with different values stop it (status 1).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.backends import FAMILY  # noqa: E402
    from harness.servers import ServerStartError, run_child  # noqa: E402
    from harness.stores import STORES  # noqa: E402
else:
    from .backends import FAMILY
    from .servers import ServerStartError, run_child
    from .stores import STORES

ROOT = Path(__file__).resolve().parents[2]

# The registry's stores the bindings' main suites cover without this wrapper.
ELSEWHERE = {
    "s3": "scripts/with-minio's MinIO (the bindings' main suites)",
    "file": "no server (the bindings' main suites)",
    "mem": "no server: one process's memory (the bindings' test helpers)",
}


def served_kinds() -> list[str]:
    """The registry's stores this wrapper serves, in its order; raises
    RuntimeError naming a registry store with no backend that is not left
    to the main suites."""
    missing = [s.kind for s in STORES if s.kind not in FAMILY and s.kind not in ELSEWHERE]
    if missing:
        raise RuntimeError(f"the registry's store(s) {', '.join(missing)} (tests/harness/stores.py) "
                           "have no backend in tests/harness/backends.py")
    return [s.kind for s in STORES if s.kind not in ELSEWHERE]


KEY = "{key}"
_MARK = "s3lectkeyz9"  # letters and digits: every store keeps them as they are


def settings(kind: str, backend) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(S3LECT_TEST_STORES's lines of a started backend, as (what, name,
    value); the variables to export)."""
    template = backend.lock_url(_MARK, backend.port)
    if template.count(_MARK) != 1:
        raise RuntimeError(f"{kind}: the lock URL {template!r} does not hold the key once")
    options, env = backend.elector()
    lines = [("lock", "-", template.replace(_MARK, KEY)),
             ("staggered", "-", "0" if backend.cas else "1")]
    lines += [("option", k, v) for k, v in sorted(options.items())]
    lines += [("env", k, v) for k, v in sorted(env.items())]
    for what, name, value in lines:
        if "\t" in value or "\n" in value or "\t" in name:
            raise RuntimeError(f"{kind}: {what} {name} has a tab or a newline")
    return lines, env


def _clean_env() -> dict[str, str]:
    """The environment without the machine's store settings, for init-store."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "S3LECT_", "PG", "AZURE_"))}


def main(argv: list[str]) -> int:
    cli = str(ROOT / "build" / "bin" / "s3lect")
    if len(argv) >= 2 and argv[0] == "--cli":
        cli, argv = argv[1], argv[2:]
    if len(argv) < 2 or argv[0] != "--":
        print("usage: store_servers.py [--cli PATH] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    cmd = argv[1:]
    if not os.access(cli, os.X_OK):
        print(f"store_servers: --cli {cli}: not an executable file (build the CLI first: "
              "scripts/build)", file=sys.stderr)
        return 1
    cli = str(Path(cli).resolve())
    backends = []
    try:
        env = dict(os.environ)
        exported: dict[str, tuple[str, str]] = {}  # variable -> (kind, value)
        lines, said = [], []
        try:
            for kind in served_kinds():
                b = FAMILY[kind]()
                backends.append(b)
                b.start()
                b.init(Path(cli), f"init-{secrets.token_hex(4)}", {**_clean_env(), **b.direct_env()})
                mine, variables = settings(kind, b)
                for name, value in variables.items():
                    other = exported.setdefault(name, (kind, value))
                    if other[1] != value:
                        raise RuntimeError(f"{kind} and {other[0]} both need {name}, with "
                                           "different values")
                lines += ["\t".join((kind, *line)) for line in mine]
                env.update(variables)
                said.append(f"{kind}: {b.server.name} on port {b.port}")
        except (ServerStartError, RuntimeError, OSError) as e:
            print(f"store_servers: {e}", file=sys.stderr)
            return 1
        env["S3LECT_TEST_STORES"] = "\n".join(lines) + "\n"
        env["S3LECT_CLI"] = cli
        print(f"store_servers: {'; '.join(said)}", file=sys.stderr)
        return run_child("store_servers", cmd, env)
    finally:
        for b in reversed(backends):
            try:
                b.destroy()
            except Exception as e:  # noqa: BLE001 - stop the others
                print(f"store_servers: stopping {b.kind}: {e}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
