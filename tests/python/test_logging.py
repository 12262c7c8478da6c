# SPDX-License-Identifier: Apache-2.0
"""Logging: leadership changes at INFO on the "s3lect" logger, errors at
WARNING/ERROR, never secrets."""

from __future__ import annotations

import logging

import s3lect
from pyutil import wait_until


def _records(caplog, text, level=None):
    return [r for r in caplog.records
            if r.name == "s3lect" and text in r.getMessage()
            and (level is None or r.levelno == level)]


def test_leadership_changes_are_logged_at_info(electors, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="s3lect")
    lock = f"file://{tmp_path}/lock"
    a = electors(lock, server_id="node-a").start()
    assert a.wait_for_leadership(timeout=15)
    term_a = a.term
    b = electors(lock, server_id="node-b").start()
    wait_until(lambda: b.leader_id == "node-a", 10, "b to see a as leader")
    a.stop()  # releases: b takes over
    assert b.wait_for_leadership(timeout=15)
    wait_until(lambda: _records(caplog, "node-b acquired leadership"), 10,
               "b's acquisition to be logged")

    acq = _records(caplog, f"node-a acquired leadership of {lock} (term {term_a})", logging.INFO)
    assert acq, caplog.text
    assert acq[0].s3lect_term == term_a and acq[0].s3lect_event == "acquired"
    lost = _records(caplog, f"node-a lost leadership of {lock} (term {term_a}): stopped",
                    logging.INFO)
    assert lost, caplog.text
    assert lost[0].s3lect_reason == "stopped"
    assert _records(caplog, f"leader of {lock} is now node-a", logging.INFO), caplog.text
    assert _records(caplog, f"leader of {lock} is now node-b", logging.INFO), caplog.text
    # The logger's name says s3lect; a message does not say it again (with
    # logging.basicConfig() a line read "INFO:s3lect:s3lect: node-a ...").
    twice = [r.getMessage() for r in caplog.records
             if r.name == "s3lect" and r.getMessage().startswith("s3lect")]
    assert not twice, twice
    assert logging.Formatter(logging.BASIC_FORMAT).format(acq[0]) == \
        f"INFO:s3lect:node-a acquired leadership of {lock} (term {term_a})"
    # In order: a acquired before it lost, and b acquired after that.
    msgs = [r.getMessage() for r in caplog.records if r.name == "s3lect"]
    i_acq = next(i for i, m in enumerate(msgs) if "node-a acquired" in m)
    i_lost = next(i for i, m in enumerate(msgs) if "node-a lost" in m)
    i_b = next(i for i, m in enumerate(msgs) if "node-b acquired" in m)
    assert i_acq < i_lost < i_b, msgs


def test_veto_is_logged_with_its_reason(electors, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="s3lect")

    def veto(term):
        raise RuntimeError("not now")

    el = electors(f"file://{tmp_path}/lock", server_id="v", on_acquire=veto).start()
    wait_until(lambda: _records(caplog, "lost leadership"), 15, "the veto's LOST to be logged")
    assert _records(caplog, "on_acquire callback raised", logging.ERROR)
    assert "hook_failed" in _records(caplog, "lost leadership")[0].getMessage()
    el.stop()


def test_a_custom_logger_gets_the_records(electors, tmp_path, caplog):
    mine = logging.getLogger("myapp.election")
    caplog.set_level(logging.INFO, logger="myapp.election")
    el = electors(f"file://{tmp_path}/lock", server_id="c", logger=mine).start()
    assert el.wait_for_leadership(timeout=15)
    wait_until(lambda: any("c acquired leadership" in r.getMessage() and
                           r.name == "myapp.election" for r in caplog.records),
               10, "the record on the custom logger")


def test_store_errors_are_logged_without_secrets(electors, minio, s3_settings, caplog):
    caplog.set_level(logging.DEBUG, logger="s3lect")
    secret = "wrong-" + minio.secret_key
    token = "tok-" + "x" * 24
    bad = dict(s3_settings, secret_access_key=secret, session_token=token)
    el = electors(f"s3://{minio.bucket}/py/log-errors.json", server_id="e", **bad).start()
    wait_until(lambda: [r for r in caplog.records if r.levelno >= logging.WARNING], 15,
               "an error to be logged")
    errs = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errs[0].levelno == logging.ERROR, "an authentication failure is an ERROR"
    assert errs[0].s3lect_error_code == s3lect._core.S3LECT_EAUTH
    el.stop()
    assert secret not in caplog.text and minio.secret_key not in caplog.text
    assert token not in caplog.text


def test_lock_urls_are_shown_without_passwords(electors):
    from s3lect._elector import lock_display
    assert lock_display("postgres://app:hunter2@db/ops?key=k") == "postgres://db/ops?key=k"
    assert (lock_display("postgres://db/ops?key=k&password=hunter2&sslmode=require")
            == "postgres://db/ops?key=k&password=***&sslmode=require")
    assert lock_display("s3://bucket/key") == "s3://bucket/key"
    el = electors("postgres://app:hunter2@127.0.0.1:1/ops?key=k&password=hunter2",
                  server_id="node-a")
    assert "hunter2" not in repr(el) and "postgres://127.0.0.1:1/ops" in repr(el), repr(el)
