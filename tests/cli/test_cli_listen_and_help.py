# SPDX-License-Identifier: Apache-2.0
"""The CLI does what its documentation says (issue 26 items 12 and 9).

- `--metrics-listen :PORT` and `S3LECT_PEER_LISTEN=:PORT` (every address, as
  every Prometheus exporter accepts) bind and answer on 127.0.0.1 (and ::1
  where the host has IPv6); `--addr :PORT` stays refused (it is advertised).
- An unknown command gets "did you mean ...?" (edit distance).
- `--renew-deadline 0s` is reported as the renew deadline, not as the renew
  interval derived from it.
- docs/cli.md's list of lock schemes and the man page's NAME line name every store.

Every process has a timeout and is killed at the end, even on failure.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from harness.wait import wait_for
from harness.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build"))
BIN = BUILD / "bin" / "s3lect"
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "300ms", "--infrequent-interval", "600ms",
          "--kill-timeout", "300ms"]
# Every store's scheme, from the scheme table (`s3lect stores --json`;
# tests/cli/test_cli_stores.py checks that table against the store files).
STORES = tuple(f"{s['scheme']}://" for s in json.loads(subprocess.run(
    [str(BIN), "stores", "--json"], capture_output=True, text=True, timeout=30,
    check=True).stdout))


def has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture
def env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}


def cli(env, *args, timeout=8):
    return subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def start(env):
    procs: list[subprocess.Popen] = []

    def go(args, extra_env=None):
        p = subprocess.Popen([str(BIN), *args], env={**env, **(extra_env or {})},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        procs.append(p)
        return p

    yield go
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


def get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.read().decode()
    except OSError:
        return None


def test_metrics_listen_any_address(start, tmp_path):
    port = free_port()
    p = start(["run", "--lock", str(tmp_path / "l.json"), "--id", "m1", *TIMING,
               "--metrics-listen", f":{port}", "--", "sleep", "60"])
    text = wait_for(lambda: p.poll() is None and get(f"http://127.0.0.1:{port}/metrics"), 10,
                    "a scrape on 127.0.0.1")
    assert re.search(r'^s3lect_leader\{[^}]*id="m1"[^}]*\} [01]$', text, re.M), text
    if has_ipv6():  # one dual-stack socket: ::1 answers too
        assert get(f"http://[::1]:{port}/metrics"), "no answer on ::1"
    assert p.poll() is None, p.stderr.read() if p.poll() is not None else ""


def test_peer_listen_any_address_from_the_environment(start, tmp_path, env):
    port = free_port()
    lock = str(tmp_path / "l.json")
    p = start(["run", "--lock", lock, "--id", "p1", "--peer", *TIMING, "--", "sleep", "60"],
              {"S3LECT_PEER_LISTEN": f":{port}"})

    def advertised():
        r = cli(env, "status", lock, "--json")
        return r.returncode == 0 and json.loads(r.stdout)["leaderAddr"]

    addr = wait_for(advertised, 15, "a live leader in the record")
    # A file lock advertises 127.0.0.1 (the route to the store) with the port asked for.
    assert addr == f"127.0.0.1:{port}", addr
    with socket.create_connection(("127.0.0.1", port), timeout=3):
        pass
    assert p.poll() is None


@pytest.mark.parametrize("opt,value", [("--metrics-listen", ":0"), ("--metrics-listen", ":x"),
                                       ("--peer-listen", ":65536"), ("--addr", ":8443")])
def test_bad_any_addresses_are_refused(opt, value, env, tmp_path):
    r = cli(env, "run", "--lock", str(tmp_path / "l.json"), f"{opt}={value}", "--", "true")
    assert r.returncode == 2 and "is not HOST:PORT" in r.stderr, r
    assert len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("argv,suggestion", [
    (["stats"], "did you mean status?"),
    (["stat", "x.json"], "did you mean status?"),
    (["wacth"], "did you mean watch?"),
    (["check"], "did you mean check-store?"),
    (["whoamI"], "did you mean whoami?"),
    (["help", "stats"], "did you mean status?"),
    (["frobnicate"], "commands: run, status, watch, check-store, init-store, whoami, reset-term, "
                     "stores, fence, transfer, help, completion"),
    (["stors"], "did you mean stores?"),
])
def test_unknown_command_suggests(argv, suggestion, env):
    r = cli(env, *argv)
    assert r.returncode == 2 and suggestion in r.stderr, r
    assert len(r.stderr.splitlines()) == 1


@pytest.mark.parametrize("args,needle,not_needle", [
    (["--renew-deadline", "0s"], "renew_deadline must be between", "renew_interval"),
    (["--renew-deadline", "15ms"], "renew_interval was not set and its value derived from min(lease_timeout/3, renew_deadline/2), 7ms", None),
])
def test_renew_deadline_is_named(args, needle, not_needle, env, tmp_path):
    r = cli(env, "run", "--lock", str(tmp_path / "l.json"), *args, "--", "true")
    assert r.returncode == 2 and needle in r.stderr, r
    if not_needle:
        assert not_needle not in r.stderr, r


def test_docs_name_every_store(env):
    doc = (ROOT / "docs" / "cli.md").read_text()
    schemes = re.search(r"^- Schemes: (.*?)(?=^- )", doc, re.M | re.S)
    assert schemes, "docs/cli.md has no '- Schemes:' item"
    for s in STORES:
        assert s in schemes.group(1), f"docs/cli.md's scheme list lacks {s}"
    top = cli(env, "--help").stdout
    for s in STORES:
        assert s in top, f"s3lect --help lacks {s}"


def test_man_page_name_line_names_every_store():
    man = BUILD / "share" / "man" / "s3lect.1"
    if not man.exists():
        pytest.skip("the man page was not generated (needs Python 3 and a native build)")
    text = man.read_text()
    name = text.split(".SH NAME", 1)[1].split(".SH", 1)[0]
    for store in ("S3", "DynamoDB", "PostgreSQL", "Route 53", "file"):
        assert store in name, f"the man page's NAME line lacks {store}: {name!r}"
