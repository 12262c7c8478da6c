# SPDX-License-Identifier: Apache-2.0
"""12-factor settings and log shipping for `s3lect run` (issue 19, Logs).

Every option of `s3lect run --help` can be set as S3LECT_<NAME>; the command
line wins; a bad value is refused in one line that names the variable.
`--log-format json` writes one JSON object per line with the key=value words of
the message as fields; `--log-time` puts an RFC 3339 time before text lines.
File locks only: nothing here needs S3, and every process has a timeout.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_")) or k == "S3LECT_NEW_LOCK_WAIT"}
    e["HOME"] = str(tmp_path)
    return e


def run_briefly(env, *args: str, seconds: float = 1.5) -> tuple[int, str]:
    """Runs `s3lect run ... -- sleep 30`, lets it lead, stops it with SIGTERM."""
    p = subprocess.Popen([str(BIN), "run", *args, "--", "sleep", "30"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        time.sleep(seconds)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)
        return p.returncode, err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def refuse(env, *args: str) -> str:
    r = subprocess.run([str(BIN), "run", *args], env=env, capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"one line: {r.stderr!r}"
    return lines[0]


def run_options() -> list[str]:
    text = subprocess.run([str(BIN), "run", "--help"], capture_output=True, text=True,
                          timeout=20).stdout
    opts = sorted(set(re.findall(r"^\s+(--[a-z][a-z-]+)", text, re.M)) - {"--help"})
    assert "--lease-timeout" in opts and "--peer" in opts and "--log-format" in opts, opts
    return opts


def env_name(opt: str) -> str:
    return "S3LECT_" + opt[2:].upper().replace("-", "_")


FLAGS = {"--peer", "--path-style", "--log-time", "--print-config"}


def test_every_run_option_is_read_from_the_environment(env, tmp_path):
    """A bad value in each option's variable is refused naming that variable:
    so every option of the help text is read from the environment."""
    lock = f"file://{tmp_path}/lock"
    checked = []
    for opt in run_options():
        if opt == "--lock":
            continue  # checked below (a lock URL is judged by the library)
        # (An empty variable is unset, in every front end: not a bad value.)
        bad = "maybe" if opt in FLAGS else "not a value\x01"
        e = dict(env, **{env_name(opt): bad})
        line = refuse(e, "--lock", lock, "--", "true")
        assert env_name(opt) in line, f"{opt}: {line}"
        checked.append(opt)
    assert len(checked) >= 20, checked


def test_environment_sets_options_and_the_command_line_wins(env, tmp_path):
    lock = f"file://{tmp_path}/lock"
    e = dict(env, S3LECT_LOCK=lock, S3LECT_ID="from-env", S3LECT_LEASE_TIMEOUT="3s",
             S3LECT_KILL_TIMEOUT="300ms")
    rc, err = run_briefly(e)
    assert rc == 0, err
    assert re.search(r"acquired leadership term=\d+ id=from-env", err), err
    rc, err = run_briefly(e, "--id", "from-flag")
    assert rc == 0 and "id=from-flag" in err and "from-env" not in err, err
    # The library's option names work too (as Python's Elector.from_env reads them).
    e2 = dict(env, S3LECT_LOCK=f"file://{tmp_path}/lock2", S3LECT_SERVER_ID="server-id-env")
    rc, err = run_briefly(e2)
    assert rc == 0 and "id=server-id-env" in err, err
    # A kill timeout above the safe bound for the lease from the environment is refused.
    line = refuse(dict(e, S3LECT_KILL_TIMEOUT="10s"), "--", "true")
    assert "kill" in line.lower(), line


def test_boolean_variables(env, tmp_path):
    lock = f"file://{tmp_path}/lock"
    for off in ("0", "false", "no", "off", ""):
        rc, err = run_briefly(dict(env, S3LECT_LOG_TIME=off), "--lock", lock, "--id", "b",
                              seconds=0.8)
        assert rc == 0 and err.startswith("s3lect: "), (off, err)
    for on in ("1", "true", "YES", "on"):
        rc, err = run_briefly(dict(env, S3LECT_LOG_TIME=on), "--lock", lock, "--id", "b",
                              seconds=0.8)
        assert rc == 0 and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z s3lect: ", err), \
            (on, err)


def test_json_log_lines(env, tmp_path):
    rc, err = run_briefly(env, "--lock", f"file://{tmp_path}/lock", "--id", "j1",
                          "--log-format", "json")
    assert rc == 0, err
    objs = [json.loads(ln) for ln in err.strip().splitlines()]
    assert objs, err
    for o in objs:
        assert set(o) >= {"time", "level", "msg"}, o
        t = datetime.datetime.strptime(o["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert abs((datetime.datetime.utcnow() - t).total_seconds()) < 120, o
        assert o["level"] in ("info", "warn", "error"), o
    acq = [o for o in objs if o["msg"].startswith("acquired leadership")]
    assert acq and acq[0]["term"] > 10**12 and acq[0]["id"] == "j1", objs
    lost = [o for o in objs if o["msg"].startswith("lost leadership")]
    assert lost and lost[0]["reason"] == "stopped", objs
    started = [o for o in objs if o["msg"].startswith("started command")]
    assert started and isinstance(started[0]["pid"], int), objs


def test_json_error_lines_and_hostile_messages(env, tmp_path):
    """An error line is level "error"; a message with quotes, backslashes and
    control characters (here: from a lock path) stays one valid JSON line."""
    d = tmp_path / 'we"ird\\dir'
    d.mkdir()
    lock = f"file://{d}/lock"
    (d / "lock").write_text("{not json")
    rc, err = run_briefly(env, "--lock", lock, "--id", 'x"y', "--log-format", "json",
                          "--lease-timeout", "1s", seconds=1.0)
    objs = [json.loads(ln) for ln in err.strip().splitlines()]
    assert any(o["msg"].startswith("following") and 'we"ird\\dir' in o["msg"] for o in objs), objs
    errors = [o for o in objs if o["level"] == "error"]
    assert errors and "corrupt" in errors[0]["msg"], objs


def test_bad_log_format_is_refused(env, tmp_path):
    line = refuse(env, "--lock", f"file://{tmp_path}/lock", "--log-format", "xml", "--", "true")
    assert "--log-format 'xml' is not text or json" in line
    line = refuse(dict(env, S3LECT_LOG_FORMAT="yaml"), "--lock", f"file://{tmp_path}/lock",
                  "--", "true")
    assert "S3LECT_LOG_FORMAT" in line


def test_read_commands_take_the_lock_from_the_environment(env, tmp_path):
    r = subprocess.run([str(BIN), "status"], env=dict(env, S3LECT_LOCK=f"file://{tmp_path}/l"),
                       capture_output=True, text=True, timeout=20)
    assert r.returncode in (0, 1, 3) and "no lock record yet" in (r.stdout + r.stderr), r
