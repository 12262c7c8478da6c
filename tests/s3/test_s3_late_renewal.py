# SPDX-License-Identifier: Apache-2.0
"""A renewal whose answer comes after the lease's deadline, though the
write itself landed at once (a slow network on the way back, a loaded
host): `s3lect run` must stop its command when the deadline passes (it may
no longer act), and, when the late answer then shows the renewal landed
and the elector leads on, run its command again. Before the fix the node
held the lock with nothing running (a clean-clone CI run found it through a
transfer refused after 6 s). A proxy in front of MinIO holds back the
answer of the leader's renewals (PUT) while armed."""

from __future__ import annotations

import secrets
import time

from harness.cli import FAST, Node, wait_for
from harness.countproxy import CountingProxy

DELAY_S = 1.4  # renew 1 s, deadline 2 s: the answer lands 0.4 s past the deadline


class LateAnswerProxy(CountingProxy):
    """Forwards untouched; while armed, the answer to each PUT is held back
    DELAY_S before it is relayed."""

    def __init__(self, host: str, port: int):
        self.armed = False
        self.held = 0
        self._hold_next = False
        super().__init__(host, port)

    def key(self, method, path, headers):
        if method == "PUT" and self.armed:
            self._hold_next = True
        return method

    def _pipe(self, src, dst):
        try:
            while not self._stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if self._hold_next:
                    self._hold_next = False
                    self.held += 1
                    time.sleep(DELAY_S)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._shut(src, dst)


def test_command_runs_again_after_a_late_renewal_answer(minio, s3lect_bin, clean_env, tmp_path):
    host, port = minio.endpoint.rsplit("/", 1)[-1].rsplit(":", 1)
    proxy = LateAnswerProxy(host, int(port))
    env = dict(clean_env, AWS_ACCESS_KEY_ID=minio.access_key,
               AWS_SECRET_ACCESS_KEY=minio.secret_key, AWS_REGION=minio.region,
               AWS_EC2_METADATA_DISABLED="true", AWS_ENDPOINT_URL_S3=proxy.endpoint)
    lock = f"s3://{minio.bucket}/late/{secrets.token_hex(4)}.json"
    node = Node(s3lect_bin, tmp_path, lock, "solo", env, [*FAST, "--no-peer"])
    try:
        wait_for(node.started_command, 30, "the leader's command")
        proxy.armed = True
        # The elector usually steps down at the deadline (LOST renew_timeout);
        # where its thread runs late the supervisor's sample sees the lapse
        # first ("lease no longer valid") and the late answer keeps the term.
        wait_for(lambda: "stopping command" in node.text(), 15,
                 "the command stopped at the lease's deadline")
        proxy.armed = False
        dipped_at = time.monotonic()
        # Led on (the late renewal landed) or lost and acquired again: either
        # way the lock must not stay held with nothing running.
        wait_for(lambda: node.text().count("started command") >= 2, 10,
                 "the command started again after the late answer")
        again = time.monotonic() - dipped_at
        time.sleep(2.0)
        assert node.leading(), node.text()
        assert node.alive(), node.text()
        terms = node.terms()
        assert len(terms) == len(set(terms)), f"a term acquired twice: {terms}"
        print(f"{proxy.held} answer(s) held back {DELAY_S}s; command again {again:.2f}s after "
              f"the stop; terms {node.terms()}")
    finally:
        node.stop()
        proxy.close()
