# SPDX-License-Identifier: Apache-2.0
"""Environments for the store tests' nodes: the parent's, without any AWS_,
S3LECT_ or PG variable of the machine, plus the server's own."""

from __future__ import annotations

import os


_GCP_VARS = ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_CONFIG",
             "GCE_METADATA_HOST", "STORAGE_EMULATOR_HOST")


def _base() -> dict[str, str]:
    # S3LECT_NEW_LOCK_WAIT stays: tests/conftest.py says why.
    return {k: v for k, v in os.environ.items()
            if (not k.startswith(("AWS_", "S3LECT_", "PG", "AZURE_")) and k not in _GCP_VARS)
            or k == "S3LECT_NEW_LOCK_WAIT"}


def gcs_env(server) -> dict[str, str]:
    """For fake-gcs-server: its endpoint as STORAGE_EMULATOR_HOST (no token)."""
    env = _base()
    env.update(server.env())
    return env


def redis_env(server) -> dict[str, str]:
    """For redis-server: the ACL user's password (S3LECT_REDIS_PASSWORD) and,
    with TLS, the CA (S3LECT_TEST_REDIS_CA_FILE, for --ca-file)."""
    env = _base()
    env.update(server.env())
    return env


def ddb_env(server) -> dict[str, str]:
    """For an AWS server (DynamoDB Local, moto): its credentials and endpoint."""
    env = _base()
    env.update(server.env())
    return env


def pg_env(server) -> dict[str, str]:
    """For PostgreSQL: nothing but the URL (no PG* variable)."""
    return _base()


# Release seen at the follower's next read (frequent 500 ms) + start; expiry
# takes at least 7 s at an 8 s lease (tests/test_s3_signals.py's bound).
SIGNAL_TIMING = ["--lease-timeout", "8s", "--renew-interval", "1s", "--renew-deadline", "5s",
                 "--frequent-interval", "500ms", "--infrequent-interval", "1s"]
SIGNAL_HANDOVER_S = 4.0


def sighup_then_sigterm(nodes, what: str, ready=None) -> list[float]:
    """SIGHUP to the leader of nodes (forwarded: its command dies of it, and
    s3lect run releases and exits 128 + 1), then SIGTERM to the next leader
    (it stops its command, releases, exits 0). Each time the next node's
    command starts within SIGNAL_HANDOVER_S + 1.5 s: by the release, not
    after the lease. ready: a condition to wait for before the first signal
    (a credential refresh has happened). The handover times."""
    import signal
    import time

    from harness.cli import only_leader, wait_for

    def leader_with_cmd(ns):
        n = only_leader(ns)
        return n if n is not None and n.cmd_wrote_start() else None

    took = []
    for sig, want_rc, line in ((signal.SIGHUP, 128 + signal.SIGHUP,
                                f"forwarding signal {int(signal.SIGHUP)} to command"),
                               (signal.SIGTERM, 0,
                                f"received signal {int(signal.SIGTERM)}: stopping")):
        live = [n for n in nodes if n.alive()]
        leader = wait_for(lambda: leader_with_cmd(live), 40, f"a leader ({what})")
        time.sleep(1.5)  # the others follow; the credential refresher runs
        if ready is not None and sig == signal.SIGHUP:
            wait_for(ready, 20, f"a credential refresh before the signals ({what})")
        t = time.monotonic()
        leader.proc.send_signal(sig)
        rc = leader.proc.wait(timeout=15)
        text = leader.text()
        assert rc == want_rc, f"{what}: {sig.name} to s3lect run: exit {rc}, want {want_rc}\n{text}"
        assert line in text and "releasing leadership" in text, f"{what}:\n{text}"
        rest = [n for n in live if n is not leader]
        wait_for(lambda: leader_with_cmd(rest), SIGNAL_HANDOVER_S + 6,
                 f"the next leader after {sig.name} ({what})")
        took.append(time.monotonic() - t)
        assert took[-1] < SIGNAL_HANDOVER_S + 1.5, (
            f"{what}: the next node led {took[-1]:.2f} s after {sig.name}: no release?")
    return took
