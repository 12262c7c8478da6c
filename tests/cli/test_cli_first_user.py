# SPDX-License-Identifier: Apache-2.0
"""What a first user trips over (issue 39 items 6 and 7): a typo in an
option gets a "did you mean"; a lock given as an http:// address says how to
write it; a command that is not there exits 127 before the node competes
(the lock is not touched, no term is taken); a command that ends by itself
is explained; a store address where nothing listens is named once the
startup timeout has passed, while the node keeps waiting; the metrics line
prints an address one can paste; --print-config shows effective values."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from harness.cli import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_"))}
    e.update(S3LECT_NEW_LOCK_WAIT="0", AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
             AWS_SECRET_ACCESS_KEY="throwaway", AWS_REGION="us-east-1")
    return e


def cli(*args, timeout=30):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout,
                          env=env())


@pytest.mark.parametrize("args,typo,meant", [
    (["run", "--lock", "/tmp/x.json", "--lease-timout", "3s", "--", "true"],
     "--lease-timout", "--lease-timeout"),
    (["run", "--lock", "/tmp/x.json", "--kill-timout=1s", "--", "true"],
     "--kill-timout=1s", "--kill-timeout"),
    (["status", "/tmp/x.json", "--jsn"], "--jsn", "--json"),
    (["check-store", "/tmp/x.json", "--racer", "3"], "--racer", "--racers"),
    (["whoami", "s3://b/k", "--endpont", "http://127.0.0.1:1"], "--endpont", "--endpoint"),
])
def test_a_mistyped_option_gets_a_did_you_mean(args, typo, meant):
    r = cli(*args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"unknown option '{typo}'; did you mean {meant}?" in r.stderr, r.stderr


def test_an_unknown_option_far_from_any_has_no_guess():
    r = cli("run", "--lock", "/tmp/x.json", "--frobnicate", "--", "true")
    assert r.returncode == 2 and "unknown option '--frobnicate'" in r.stderr, r.stderr
    assert "did you mean" not in r.stderr, r.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:9000/bucket/key",
                                 "HTTP://minio.example:9000/b/k"])
def test_an_http_lock_url_says_how_to_write_it(url):
    r = cli("run", "--lock", url, "--", "true")
    assert r.returncode == 2, r.stderr
    scheme = url.split(":", 1)[0]  # (an https:// URL names an Azure blob: another message)
    assert "is a server's address, not a lock URL" in r.stderr, r.stderr
    assert f"--lock s3://BUCKET/KEY --endpoint {scheme}://HOST:PORT" in r.stderr, r.stderr


@pytest.mark.parametrize("cmd,why", [
    (["no-such-command-s3lect-test"], "no such command on PATH"),
    (["/nonexistent/dir/job"], "No such file or directory"),
    (["NOT-EXECUTABLE"], "Permission denied"),
    (["/tmp"], "Is a directory"),
])
def test_a_command_that_cannot_run_exits_127_before_competing(tmp_path, cmd, why):
    lock = tmp_path / "lock.json"
    if cmd == ["NOT-EXECUTABLE"]:
        f = tmp_path / "job.sh"
        f.write_text("#!/bin/sh\n")
        f.chmod(0o644)
        cmd = [str(f)]
    r = cli("run", "--lock", str(lock), "--", *cmd)
    assert r.returncode == 127, (r.returncode, r.stderr)
    assert f"cannot run '{cmd[0]}': {why}; nothing was started and the lock was not touched" \
        in r.stderr, r.stderr
    assert not lock.exists(), "the node competed for the lock with a command it cannot run"


def test_a_command_that_ends_by_itself_is_explained(tmp_path):
    r = cli("run", "--lock", str(tmp_path / "lock.json"), "--", "sh", "-c", "exit 3")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "the command ended by itself while leading: s3lect run releases the lock and exits " \
           "with its status (3)" in r.stderr, r.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_named_after_the_startup_timeout(tmp_path):
    port = _closed_port()
    p = subprocess.Popen([str(BIN), "run", "--lock", "s3://bucket/key", "--endpoint",
                          f"http://127.0.0.1:{port}", "--startup-timeout", "2s", "--",
                          "sleep", "60"], stderr=subprocess.PIPE, text=True, env=env(),
                         start_new_session=True)
    lines: list[str] = []
    try:
        import threading
        t = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
        t.start()
        wait_for(lambda: any("nothing listens" in x for x in lines), 15,
                 "the nothing-listens warning")
        time.sleep(2.5)
        assert p.poll() is None, "it gave up: a store that only refuses is waited for"
        said = [x for x in lines if "nothing listens" in x]
        assert len(said) == 1, said
        assert f"nothing listens at the store's address (http://127.0.0.1:{port})" in said[0]
        assert "a wrong port or host?" in said[0]
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


@pytest.mark.parametrize("host", ["", "0.0.0.0"])
def test_the_metrics_line_is_an_address_one_can_paste(tmp_path, host):
    """":PORT" and "0.0.0.0:PORT" listen on every address: in a network
    namespace of its own (`unshare -rn`: loopback only, nothing reaches
    out), where the line's URL is fetched with curl from the same namespace."""
    r = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10)
    if r.returncode != 0:
        pytest.skip(f"unshare -rn cannot make a network namespace here: {r.stderr.decode()}")
    port = _closed_port()
    script = (f"ip link set lo up; {BIN} run --lock {tmp_path}/l.json --metrics-listen "
              f"{host}:{port} -- sleep 60 2>{tmp_path}/run.log >/dev/null & pid=$!; "
              f"for i in $(seq 100); do grep -q 'metrics at' {tmp_path}/run.log 2>/dev/null "
              f"&& break; sleep 0.1; done; "
              f"url=$(sed -n 's/.*metrics at \\([^ ]*\\).*/\\1/p' {tmp_path}/run.log); "
              f"echo \"URL $url\"; curl -sf -o /dev/null -w 'HTTP %{{http_code}}\\n' \"$url\"; "
              f"kill $pid; wait $pid")
    r = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True, text=True,
                       timeout=60, env=env())
    log = (tmp_path / "run.log").read_text()
    assert f"URL http://localhost:{port}/metrics\n" in r.stdout, (r.stdout, r.stderr, log)
    assert "(listening on every address)" in log, log
    assert "HTTP 200" in r.stdout, (r.stdout, r.stderr, log)


def test_print_config_shows_effective_values(tmp_path):
    e = {k: v for k, v in env().items() if k != "S3LECT_NEW_LOCK_WAIT"}
    r = subprocess.run([str(BIN), "run", "--lock", str(tmp_path / "l.json"), "--print-config", "--", "true"],
                       capture_output=True, text=True, timeout=30, env=e)
    assert r.returncode == 0, r.stderr
    got = dict(x.split("=", 1) for x in r.stdout.split())
    # The defaults as the node would run: max_lease_timeout 4 leases (not 0),
    # the kill timeout run derives (lease - deadline - margin), the hold and
    # the new-lock wait it implies.
    assert got["max_lease_timeout"] == "60000", got
    assert got["kill_timeout"] == "4720", got
    assert got["leader_hold"] == "15000" and got["new_lock_wait"] == "15000", got
    r = cli("run", "--lock", str(tmp_path / "l.json"), "--lease-timeout", "30s",
            "--kill-timeout", "1s", "--print-config", "--", "true")
    got = dict(x.split("=", 1) for x in r.stdout.split())
    assert got["max_lease_timeout"] == "120000" and got["kill_timeout"] == "1000", got


STORES = ["S3", "local file", "DynamoDB", "PostgreSQL", "Route 53", "Google Cloud Storage",
          "Azure", "etcd", "Redis"]


def test_help_and_man_page_name_every_store():
    """The first paragraph of --help and of help run, and the man page's NAME
    line, come from the scheme table: every store, and every lock URL form
    in --help's list (issue 39 item 7)."""
    top = cli("--help").stdout
    run_help = cli("help", "run").stdout
    for text, what in ((top, "--help"), (run_help, "help run")):
        first = " ".join(text.split("\n\n")[1].split())
        missing = [s for s in STORES if s not in first]
        assert not missing, f"{what}'s first paragraph misses {missing}: {first}"
    for url in ("s3://", "file://", "dynamodb://", "postgres://", "route53://", "gs://", "az://",
                "etcd://", "redis://"):
        assert url in top.split("lock URLs")[1], f"--help's lock URLs miss {url}"
    man = BIN.parent.parent / "share" / "man" / "s3lect.1"
    name = man.read_text().split(".SH NAME\n", 1)[1].split("\n.SH", 1)[0]
    name = " ".join(name.replace("\\-", "-").split())
    missing = [s for s in STORES if s not in name]
    assert not missing, f"the man page's NAME misses {missing}: {name}"
