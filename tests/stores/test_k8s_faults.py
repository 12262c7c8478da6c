# SPDX-License-Identifier: Apache-2.0
"""The k8s:// store when its API server fails (tests/harness/kube_apiserver.py:
a real kube-apiserver with its own etcd).

Three `s3lect run` nodes on one Lease at short timings (lease 3 s, renew
deadline 2 s), each with the command `sleep TAGn`; /proc is read every
20 ms for the commands that run (harness.cli.running_commands), the truth
about who leads. Faults:

  - the API server restarted (SIGTERM, and SIGKILL) on the same port, etcd
    kept;
  - the API server paused (SIGSTOP) for two leases: the leader's requests
    hang, it must stop its command by its renew deadline (+ kill timeout);
  - etcd behind it paused for two leases: the API server accepts requests
    and answers late or with errors; the same rule.

Checked every time: never two commands at once; after the fault a command
runs again within the lease + a poll + slack of the server answering again.
And RBAC: a node whose user may get and create but not update leases never
leads a Lease that exists (its error names the verb update and the
resource), a node whose user may do nothing exits by --startup-timeout
naming the verb get.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.cli import running_commands, wait_for
from harness.kube_apiserver import KubeApiServer

# A fault test of its own: the second session of suite stores (scripts/test).
pytestmark = pytest.mark.second_session

LEASE, RENEW_DEADLINE, FREQUENT, INFREQUENT, KILL = 3.0, 2.0, 0.5, 1.0, 0.5
FAST = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
        "--frequent-interval", "500ms", "--infrequent-interval", "1s", "--kill-timeout", "500ms"]
SLACK = 3.0  # a loaded 2-core machine
# A command runs again this long after the API server answers again: a
# follower waits a lease from its last sight of a renewal, then polls.
RECOVERY = LEASE + INFREQUENT + SLACK
# The leader's command is stopped this long after its store stops answering.
STEP_DOWN = RENEW_DEADLINE + KILL + SLACK


@pytest.fixture(scope="module")
def kube(kube_apiserver, s3lect_bin) -> KubeApiServer:
    r = subprocess.run([str(s3lect_bin), "stores", "--json"], capture_output=True, text=True,
                       timeout=30)
    schemes = {s.get("scheme") for s in json.loads(r.stdout or "[]")} if r.returncode == 0 else set()
    if "k8s" not in schemes:
        pytest.skip(f"{s3lect_bin} has no k8s:// store (`s3lect stores --json`)")
    return kube_apiserver


def _env(kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "S3LECT_", "KUBE")) or k == "S3LECT_NEW_LOCK_WAIT"}
    env["KUBECONFIG"] = str(kubeconfig)
    return env


class Watch:
    """Reads the running commands every 20 ms in a thread: every sample with
    more than one fails the test at the end (check())."""

    def __init__(self, tag: str):
        self.tag = tag
        self.samples: list[tuple[float, list[str]]] = []
        self.overlaps: list[tuple[float, list[str]]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = sorted(running_commands(self.tag))
            t = time.monotonic()
            self.samples.append((t, now))
            if len(now) > 1:
                self.overlaps.append((t, now))
            self._stop.wait(0.02)

    def running(self) -> list[str]:
        return self.samples[-1][1] if self.samples else []

    def first(self, cond, after: float) -> float | None:
        """The first sample time at or after `after` whose commands satisfy cond."""
        return next((t for t, now in list(self.samples) if t >= after and cond(now)), None)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=5)

    def check(self, logs: str) -> None:
        assert not self.overlaps, (f"two commands at once: {self.overlaps[:5]}\n{logs}")


class Nodes:
    def __init__(self, bin_: Path, kube: KubeApiServer, tmp: Path, user: str = "s3lect"):
        self.bin, self.kube, self.tmp = bin_, kube, tmp
        self.name = f"fault-{secrets.token_hex(4)}"
        self.lock = f"k8s://{kube.namespace}/{self.name}"
        self.tag = f"{70000 + secrets.randbelow(9000)}"
        self.kubeconfig = kube.kubeconfig(tmp / f"kubeconfig-{user}", user=user)
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        self._files: list = []

    def start(self, n: int, startup_timeout: str = "0") -> None:
        for _ in range(n):
            i = len(self.procs) + 1
            log = self.tmp / f"n{i}.log"
            f = open(log, "w")
            self._files.append(f)
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [str(self.bin), "run", "--lock", self.lock, "--id", f"n{i}", *FAST,
                 "--startup-timeout", startup_timeout, "--", "sleep", f"{self.tag}{i}"],
                stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=_env(self.kubeconfig), start_new_session=True))

    def text(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in self.logs)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 15)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait(timeout=10)
        for f in self._files:
            f.close()


@pytest.fixture
def nodes(kube, s3lect_bin, tmp_path):
    made: list[Nodes] = []

    def make(user: str = "s3lect") -> Nodes:
        n = Nodes(s3lect_bin, kube, tmp_path, user)
        made.append(n)
        return n

    try:
        yield make
    finally:
        for n in made:
            n.stop()


def _leading(c: Nodes, w: Watch, timeout: float = 30) -> str:
    return wait_for(lambda: w.running()[0] if len(w.running()) == 1 else None, timeout,
                    f"one command to run\n{c.text()}")


@pytest.mark.parametrize("fault", ["restart", "kill", "pause", "etcd-pause"])
def test_api_server_faults_never_two_commands_and_recover(fault, kube, nodes):
    c = nodes()
    w = Watch(c.tag)
    try:
        c.start(3)
        old = _leading(c, w)
        time.sleep(LEASE)  # settled: the followers have seen the leader renew
        assert w.running() == [old]
        t0 = time.monotonic()
        if fault in ("restart", "kill"):
            took = kube.restart(hard=fault == "kill")
            back = time.monotonic()
            down = f"restarted ({'SIGKILL' if fault == 'kill' else 'SIGTERM'}) in {took:.2f} s"
        else:
            (kube.pause if fault == "pause" else kube.pause_etcd)()
            try:
                time.sleep(2 * LEASE)
                # The leader cannot have renewed: its command is stopped.
                stopped = w.first(lambda now: old not in now, t0)
                assert stopped is not None and stopped - t0 <= STEP_DOWN, (
                    f"{fault}: the leader's command still ran {time.monotonic() - t0:.2f} s "
                    f"after its store stopped answering (bound {STEP_DOWN:g} s)\n{c.text()}")
                assert not w.running(), f"{fault}: a command runs without a store\n{c.text()}"
            finally:
                (kube.resume if fault == "pause" else kube.resume_etcd)()
            wait_for(kube.ready, 60, "the API server to answer again")
            back = time.monotonic()
            what = "was paused" if fault == "pause" else "had etcd paused behind it"
            down = (f"{what} for {back - t0:.2f} s; the leader's command stopped "
                    f"{stopped - t0:.2f} s in")
        again = wait_for(lambda: w.first(lambda now: len(now) == 1, back), RECOVERY + 10,
                         f"a command to run again after the {fault}\n{c.text()}")
        new = next(now[0] for t, now in list(w.samples) if t == again)
        recovered = max(0.0, again - back)
        assert recovered <= RECOVERY, (f"{fault}: a command ran {recovered:.2f} s after the API "
                                       f"server answered again (bound {RECOVERY:g} s)\n{c.text()}")
        time.sleep(LEASE)  # and it stays alone
        print(f"\nk8s {fault}: the API server {down}; {new} runs {recovered:.2f} s after it answered "
              f"again (was {old})")
    finally:
        w.stop()
    w.check(c.text())
    assert all(p.poll() is None for p in c.procs), f"a node exited\n{c.text()}"


def test_a_user_without_update_never_leads_and_names_the_verb(kube, nodes):
    """A released Lease (client-go's release: no holder, 1 s): the noupdate
    user may read it but not take it (an update); its node never runs its
    command, and its log names the missing verb and the resource."""
    c = nodes("noupdate")
    kube.put_lease(c.name, {"holderIdentity": "", "leaseDurationSeconds": 1})
    w = Watch(c.tag)
    try:
        c.start(1)
        line = wait_for(lambda: [ln for ln in c.logs[0].read_text().splitlines()
                                 if "update" in ln and "leases" in ln], 20,
                        f"an error naming verb update on leases\n{c.text()}")[0]
        time.sleep(2 * LEASE)
        assert not w.samples or all(not now for _, now in w.samples), c.text()
        text = c.logs[0].read_text()
        assert "acquired leadership" not in text, text
        assert kube.get_lease(c.name)["spec"].get("holderIdentity", "") == ""
        assert kube.tokens["noupdate"] not in text
        print(f"\nnoupdate's error: {line.strip()[:300]}")
    finally:
        w.stop()


def test_a_user_with_no_lease_verbs_exits_by_the_startup_timeout(kube, nodes):
    c = nodes("nobody")
    c.start(1, startup_timeout="3s")
    rc = c.procs[0].wait(timeout=60)
    text = c.logs[0].read_text()
    assert rc == 1, f"exit {rc}\n{text}"
    assert "get" in text and "leases" in text, text
    assert "acquired leadership" not in text and kube.tokens["nobody"] not in text
    assert not running_commands(c.tag)
