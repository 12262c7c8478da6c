# SPDX-License-Identifier: Apache-2.0
"""`s3lect transfer`, `s3lect run --priority` and `--max-hold` with real
processes (issue 42 items 1, 2, 6).

Nodes are real `s3lect run` processes on a file lock at short timings
(lease 3 s), in peer mode (the default, --peer-listen on a free loopback
port) and with --no-peer. Each node's command is a shell that appends
"start ID TERM PID TIME" to an events file when it starts and "stop ID TERM
PID TIME" when it is told to stop (SIGTERM), and runs `sleep TAG`: a sampler
thread reads /proc every 50 ms, and no two `sleep TAG` may ever run at once;
the events' intervals may not overlap either ("never two command trees").

Cases: a named transfer (the old command stops before the new one starts,
in bounded time); a transfer to the best follower; an unknown target
(refused, the leader and its command untouched); the target killed right
after it confirmed; records that cannot hand over (Go s3lect, no
incarnation) and no record / a released one; priority (the preferred node
takes over after a lease, not while it flaps, and again once it stays up);
--max-hold rotation; SIGTERM of the leader while a transfer is pending.
Every wait is bounded; every process is stopped, also on failure.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from harness import cli
from harness.cli import running_commands, wait_for
from harness.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
LEASE, RENEW, FREQUENT = 3.0, 1.0, 1.0
TIMING = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", "1s", "--infrequent-interval", "3s", "--max-clock-skew", "0",
          "--new-lock-wait", "0"]
MODES = ["peer", "no-peer"]

# The command: records its start and its SIGTERM, then waits on `sleep TAG`
# (what /proc shows). $1 events file, $2 tag, $3 "slow": ignore SIGTERM (the
# tree then dies of --kill-timeout's SIGKILL).
SCRIPT = r"""
ev="$1"; tag="$2"
echo "start $S3LECT_LEADER_ID $S3LECT_TERM $$ $(date +%s.%N)" >> "$ev"
if [ "$3" = slow ]; then
  trap '' TERM
  sleep "$tag" &
  trap 'echo "term $S3LECT_LEADER_ID $S3LECT_TERM $$ $(date +%s.%N)" >> "$ev"' TERM
else
  sleep "$tag" &
  trap 'kill $! 2>/dev/null
        echo "stop $S3LECT_LEADER_ID $S3LECT_TERM $$ $(date +%s.%N)" >> "$ev"; exit 0' TERM
fi
while :; do wait; kill -0 $! 2>/dev/null || break; done
"""


class Cluster:
    """Nodes of one test on one file lock, the events file, and the /proc
    sampler; close() stops everything."""

    def __init__(self, tmp: Path, mode: str):
        self.tmp = tmp
        self.mode = mode
        self.lock = f"file://{tmp}/lock.json"
        self.events = tmp / "events"
        self.script = tmp / "cmd.sh"
        self.script.write_text(SCRIPT)
        self.tag = f"{60000 + secrets.randbelow(9000)}"
        self.nodes: list[cli.Node] = []
        self.kills: dict[int, float] = {}  # pid of a shell killed with -9 -> when
        self.max_running = 0
        self.both: list[list[str]] = []
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            cmds = running_commands(self.tag)
            self.max_running = max(self.max_running, len(cmds))
            if len(cmds) > 1:
                self.both.append(cmds)
            self._stop.wait(0.05)

    def node(self, nid: str, extra: list[str] | None = None, *, slow: bool = False,
             log: str | None = None, kill_timeout: str = "500ms",
             timing: list[str] | None = None) -> cli.Node:
        port = free_port()
        mode = ["--no-peer"] if self.mode == "no-peer" else [
            "--peer-listen", f"127.0.0.1:{port}"]
        cmd = ["sh", str(self.script), str(self.events), self.tag, "slow" if slow else "-"]
        n = cli.Node(BIN, self.tmp, self.lock, nid, cli.node_env(),
                     [*(timing or TIMING), *mode, *(extra or [])], cmd=cmd,
                     kill_timeout=kill_timeout,
                     log=self.tmp / (log or f"{nid}.log"))
        n.peer_listen = port if self.mode != "no-peer" else None  # type: ignore[attr-defined]
        self.nodes.append(n)
        return n

    def kill9(self, n: cli.Node) -> None:
        """kill -9 of the node's group (its command included), noted."""
        for ev in self.parsed():
            if ev[0] == "start" and ev[1] == n.id:
                self.kills.setdefault(ev[3], time.time())
        n.kill9()

    def parsed(self) -> list[tuple[str, str, int, int, float]]:
        """(kind, id, term, pid, time) of every line of the events file."""
        if not self.events.exists():
            return []
        out = []
        for line in self.events.read_text().splitlines():
            p = line.split()
            if len(p) == 5:
                out.append((p[0], p[1], int(p[2]), int(p[3]), float(p[4])))
        return out

    def starts(self, nid: str | None = None) -> list[tuple[str, str, int, int, float]]:
        return [e for e in self.parsed() if e[0] == "start" and (nid is None or e[1] == nid)]

    def intervals(self) -> list[tuple[str, int, float, float]]:
        """(id, pid, start, end) of every command: end its stop line, its
        kill -9, or (still running) now. Not the slow ones (a "term" line):
        they end at a SIGKILL no line records (the /proc sampler sees them)."""
        evs = self.parsed()
        ends = {e[3]: e[4] for e in evs if e[0] == "stop"}
        slow = {e[3] for e in evs if e[0] == "term"}
        out = []
        for kind, nid, _term, pid, t in evs:
            if kind == "start" and pid not in slow:
                end = ends.get(pid, self.kills.get(pid, time.time()))
                out.append((nid, pid, t, end))
        return out

    def check_never_two(self) -> None:
        """No two commands ran at once: by /proc, and by the events' times
        (of the commands that stop at SIGTERM: a slow one ends later)."""
        assert not self.both, f"two commands ran at once (/proc): {self.both[:3]}"
        iv = sorted(self.intervals(), key=lambda x: x[2])
        for x, y in zip(iv, iv[1:]):
            assert x[3] <= y[2], f"commands overlap: {x} and {y}\n{self.events.read_text()}"

    def leader(self) -> cli.Node | None:
        """The one live node that leads with its command started, else None."""
        return cli.only_leader(self.nodes)

    def runs(self, n: cli.Node) -> bool:
        """The command of n's latest term has written its start line."""
        terms = n.terms()
        return bool(terms) and any(e[2] == terms[-1] for e in self.starts(n.id))

    def wait_leader(self, timeout: float, what: str = "a leader") -> cli.Node:
        """The one leader, once its command has written its start line."""
        return wait_for(lambda: (lambda n: n if n and self.runs(n) else None)(self.leader()),
                        timeout, what)

    def follows(self, n: cli.Node, leader: str, timeout: float = 10) -> None:
        n.wait_log(f"leader is {leader} ", timeout, f"{n.id} follows {leader}")

    def transfer(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return cli.run([str(BIN), "transfer", self.lock, *args], cli.node_env(), timeout=timeout)

    def transferred(self) -> int:
        """How many "reason=transferred" lines the logs hold."""
        return sum(p.read_text(errors="replace").count("reason=transferred")
                   for p in self.tmp.glob("*.log"))

    def close(self) -> None:
        self._stop.set()
        self._sampler.join(timeout=5)
        for n in self.nodes:
            n.stop()


@pytest.fixture
def cluster(tmp_path):
    made: list[Cluster] = []
    cwd = os.getcwd()

    def make(mode: str = "peer") -> Cluster:
        made.append(Cluster(tmp_path, mode))
        return made[-1]
    yield make
    os.chdir(cwd)
    for c in made:
        c.close()


def three(c: Cluster, extra: list[str] | None = None) -> tuple[cli.Node, cli.Node, cli.Node]:
    """a leads (its command started), b and c follow it."""
    a = c.node("a", extra)
    assert c.wait_leader(10, "a leads") is a
    b, d = c.node("b", extra), c.node("c", extra)
    c.follows(b, "a")
    c.follows(d, "a")
    return a, b, d


@pytest.mark.parametrize("mode", MODES)
def test_named_transfer_stops_the_old_command_first(cluster, mode):
    c = cluster(mode)
    a, b, d = three(c)
    # a follower in peer mode is parked on the leader's long poll: let it be
    time.sleep(0.5)
    term0 = a.terms()[-1]
    t0 = time.time()
    r = c.transfer("--to", "c")
    assert r.returncode == 0, (r.stdout, r.stderr)
    m = re.search(r"'c' leads now \(term (\d+)\), (\d+\.\d\d)s after the request", r.stdout)
    assert m, r.stdout
    assert int(m.group(1)) > term0
    wait_for(lambda: c.runs(d), 5, "c's command starts")
    assert c.leader() is d
    assert d.terms()[-1] == int(m.group(1))
    took = c.starts("c")[0][4] - t0
    bound = 3.0 if mode == "peer" else LEASE + 2
    print(f"[{mode}] transfer call -> c's command start: {took:.2f}s "
          f"(the CLI said {m.group(2)}s; bound {bound}s)")
    assert took < bound, f"c's command started {took:.2f}s after the call"
    # a's command got its SIGTERM and stopped before c's started
    a_stop = [e for e in c.parsed() if e[0] == "stop" and e[1] == "a"]
    assert a_stop and a_stop[0][4] <= c.starts("c")[0][4], c.events.read_text()
    log = a.text()
    assert "handing leadership to c" in log, log
    assert re.search(rf"lost leadership term={term0} reason=transferred", log), log
    assert b.alive() and not b.started_command()
    # a's command ran once: it was not started again between the commit and
    # the LOST that follows it (the elector still led for a moment)
    time.sleep(0.5)
    assert len(c.starts("a")) == 1, c.events.read_text()
    c.check_never_two()


@pytest.mark.parametrize("mode", MODES)
def test_transfer_without_to_hands_to_a_follower(cluster, mode):
    c = cluster(mode)
    a, b, d = three(c)
    time.sleep(0.5)
    r = c.transfer()
    assert r.returncode == 0, (r.stdout, r.stderr)
    m = re.search(r"'([bc])' leads now", r.stdout)
    assert m, r.stdout
    new = c.wait_leader(8, "the new leader's command runs")
    assert new.id == m.group(1) and new is not a
    assert "reason=transferred" in a.text()
    c.check_never_two()


@pytest.mark.parametrize("mode", MODES)
def test_transfer_to_an_unknown_node_is_refused(cluster, mode):
    c = cluster(mode)
    a, b, d = three(c)
    term0 = a.terms()[-1]
    pid0 = c.starts("a")[0][3]
    t0 = time.monotonic()
    r = c.transfer("--to", "nobody")
    took = time.monotonic() - t0
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "did not confirm" in r.stderr, r.stderr
    # refused after lease + renew_interval + frequent, not much later
    assert LEASE < took < LEASE + RENEW + FREQUENT + 4, took
    time.sleep(1)
    assert c.leader() is a and a.terms() == [term0]
    assert [e[3] for e in c.starts()] == [pid0], c.events.read_text()
    assert not [e for e in c.parsed() if e[0] == "stop"], c.events.read_text()
    assert "handing leadership" not in a.text()
    c.check_never_two()


@pytest.mark.parametrize("mode", MODES)
def test_target_killed_after_it_confirmed(cluster, mode):
    c = cluster(mode)
    a, b, d = three(c)
    time.sleep(0.5)
    # The CLI polls the record every 200 ms and may miss the moment (the
    # target can confirm and take the lock between two of its reads): the
    # test reads the record itself, every 5 ms, and kills c once it has
    # confirmed (xferAckId), as the CLI would print "confirmed".
    p = cli.Proc([BIN, "transfer", c.lock, "--to", "c", "--timeout", "20s"], c.tmp / "tx.log",
                 cli.node_env())
    record = c.tmp / "lock.json"
    try:
        def confirmed() -> bool:
            try:
                return json.loads(record.read_text()).get("xferAckId") == "c"
            except (OSError, ValueError):
                return False
        wait_for(confirmed, 10, "c confirms", step=0.005)
        c.kill9(d)
        killed = time.time()
        p.wait(timeout=25)
    finally:
        p.stop()
    # someone leads again: a (its transfer void) or b, once c's reservation ends
    new = c.wait_leader(LEASE + FREQUENT + 5, "a node leads after the target died")
    took = c.starts(new.id)[-1][4] - killed
    print(f"[{mode}] target killed after confirming: {new.id} leads {took:.2f}s later; "
          f"c had started its command: {bool(c.starts('c'))}; the CLI: {p.text().strip()!r}")
    assert new in (a, b)
    assert took < LEASE + FREQUENT + 3, took
    c.check_never_two()


def write_record(path: Path, rec: dict) -> None:
    path.write_text(json.dumps(rec))


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


@pytest.mark.parametrize("incarnation", [None, ""], ids=["go-s3lect", "empty-incarnation"])
def test_leader_without_incarnation_cannot_hand_over(tmp_path, incarnation):
    rec = {"leaderID": "gonode", "leaderAddr": "", "lastUpdated": now_rfc3339(),
           "term": 7, "leaseMs": 15000}
    if incarnation is not None:
        rec["incarnation"] = incarnation
    lock = tmp_path / "lock.json"
    write_record(lock, rec)
    before = lock.read_bytes()
    r = cli.run([str(BIN), "transfer", f"file://{lock}", "--to", "b"], cli.node_env(), 30)
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "'gonode' runs Go s3lect or an s3lect without transfers" in r.stderr, r.stderr
    assert "stop it instead" in r.stderr
    assert lock.read_bytes() == before  # nothing asked


def test_no_lock_or_released_lock_exits_3(tmp_path):
    lock = tmp_path / "lock.json"
    r = cli.run([str(BIN), "transfer", f"file://{lock}", "--to", "b"], cli.node_env(), 30)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "no lock record" in r.stdout
    assert not lock.exists()
    write_record(lock, {"leaderID": "", "leaderAddr": "", "lastUpdated": "0001-01-01T00:00:00Z",
                        "term": 9, "leaseMs": 3000, "incarnation": ""})
    before = lock.read_bytes()
    r = cli.run([str(BIN), "transfer", f"file://{lock}"], cli.node_env(), 30)
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "released (no leader)" in r.stdout
    assert lock.read_bytes() == before


def test_priority_takes_over_but_not_while_it_flaps(cluster):
    c = cluster("peer")
    a = c.node("a")
    assert c.wait_leader(10, "a leads") is a
    b = c.node("b")
    c.follows(b, "a")
    t0 = time.time()
    p = c.node("p", ["--priority", "10"], log="p0.log")
    p.wait_log("leader is a ", 10)
    wait_for(lambda: c.runs(p), 2 * LEASE + RENEW + 3, "the priority node leads")
    first = c.starts("p")[0][4] - t0
    assert first >= LEASE - 0.5, f"p led {first:.2f}s after its start: before a lease"
    assert "reason=transferred" in a.text()
    # it stops (releasing the lock to a or b), then flaps: up for ~1 s (less
    # than a lease), SIGTERM, up again, three times, and then stays up
    p.terminate()
    assert p.wait(timeout=10) == 0
    assert c.wait_leader(LEASE + 3, "a or b leads after p stopped") in (a, b)
    flap_t0 = time.monotonic()
    starts_before = len(c.starts("p"))
    for i in range(1, 4):
        p = c.node("p", ["--priority", "10"], log=f"p{i}.log")
        if i == 3:
            break
        time.sleep(1.0)
        p.terminate()
        assert p.wait(timeout=10) == 0
        time.sleep(0.2)
    flapping = [f"p{i}.log" for i in (1, 2)]
    for f in flapping:
        assert "acquired leadership" not in (c.tmp / f).read_text(), f
    last = time.time()
    wait_for(lambda: c.runs(p), 2 * LEASE + RENEW + 4, "the priority node leads again")
    again = c.starts("p")[-1][4] - last
    elapsed = time.monotonic() - flap_t0
    assert len(c.starts("p")) == starts_before + 1, c.events.read_text()
    transfers = c.transferred()
    per_lease = transfers / max(1.0, (time.time() - t0) / LEASE)
    print(f"priority: first takeover {first:.2f}s after start; after flapping, leads again "
          f"{again:.2f}s after its last start; {transfers} transfers in "
          f"{time.time() - t0:.1f}s ({per_lease:.2f} per lease); flap phase {elapsed:.1f}s")
    assert again >= LEASE - 0.5, again
    assert transfers <= (time.time() - t0) / LEASE + 1
    # a transfer (not a SIGTERM release) each time: the first and the last
    assert transfers == 2, transfers
    c.check_never_two()


@pytest.mark.parametrize("mode", MODES)
def test_max_hold_rotates(cluster, mode):
    c = cluster(mode)
    extra = ["--max-hold", "4s"]
    a = c.node("a", extra)
    assert c.wait_leader(10, "a leads") is a
    c.node("b", extra)
    c.node("c", extra)
    t0 = time.monotonic()
    wait_for(lambda: c.transferred() >= 2 and len(c.starts()) >= 3, 20, "two rotations")
    took = time.monotonic() - t0
    leaders = [e[1] for e in c.starts()]
    print(f"[{mode}] max-hold 4s: {c.transferred()} transfers in {took:.1f}s; "
          f"leaders {leaders}")
    assert len(leaders) >= 3 and all(x != y for x, y in zip(leaders, leaders[1:])), leaders
    c.wait_leader(8, "a leader after the rotations")
    c.check_never_two()


@pytest.mark.parametrize("mode", MODES)
def test_sigterm_while_a_transfer_is_pending(cluster, mode):
    c = cluster(mode)
    a = c.node("a", slow=True, kill_timeout="700ms")
    assert c.wait_leader(10, "a leads") is a
    b = c.node("b")
    c.follows(b, "a")
    time.sleep(0.5)
    p = cli.Proc([BIN, "transfer", c.lock, "--to", "b", "--timeout", "20s"], c.tmp / "tx.log",
                 cli.node_env())
    try:
        # a's command ignores SIGTERM: the transfer stays pending until
        # --kill-timeout's SIGKILL; a gets its SIGTERM in that window
        a.wait_log("handing leadership to b", 10)
        a.terminate()
        assert a.wait(timeout=10) == 0, a.text()
        t = a.text()  # the signal came while the transfer was pending
        assert t.index("handing leadership to b") < t.index("received signal 15") < \
            t.index("command exited"), t
        new = c.wait_leader(LEASE + FREQUENT + 3, "b leads")
        assert new is b
        p.wait(timeout=25)
    finally:
        p.stop()
    print(f"[{mode}] SIGTERM while pending: transfer exit {p.proc.returncode}; "
          f"{p.text().strip()}")
    c.check_never_two()


def test_peer_transfer_does_not_wait_for_the_renewal(cluster):
    """In peer mode `s3lect transfer` tells the leader's endpoint (?xfer=1,
    the record's succKey as proof) that its record holds a request: the
    leader reads it at once instead of at its next renewal, here up to 30 s
    later. Three transfers, there and back and there again, each well under
    the interval (without the hint each would land under 2 s with a chance
    of 2/30: all three, 3 in 10,000; test_forged_transfer_hint_is_ignored
    counts the hint's reads exactly)."""
    c = cluster("peer")
    slow = ["--lease-timeout", "90s", "--renew-interval", "30s", "--renew-deadline", "60s",
            "--frequent-interval", "1s", "--infrequent-interval", "30s", "--new-lock-wait", "0"]
    a = c.node("a", timing=slow, kill_timeout="2s")
    assert c.wait_leader(10, "a leads") is a
    b = c.node("b", timing=slow, kill_timeout="2s")
    c.follows(b, "a")
    time.sleep(0.5)
    for target in ("b", "a", "b"):
        r = c.transfer("--to", target)
        assert r.returncode == 0, (r.stdout, r.stderr)
        m = re.search(rf"'{target}' leads now \(term \d+\), (\d+\.\d\d)s after the request",
                      r.stdout)
        assert m, r.stdout
        print(f"transfer to {target}: {m.group(1)}s after the request (renew interval 30s)")
        assert float(m.group(1)) < 2.0, r.stdout
        time.sleep(1.5)
    c.check_never_two()


def _store_gets(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return sum(float(m.group(1)) for m in re.finditer(
        r'^s3lect_store_requests_total\{[^}]*op="get"[^}]*\} (\S+)$', text, re.M))


def _hint(port: int, query: str) -> int:
    """A check sent as anyone could: zero-config peer mode serves TLS with a
    self-signed certificate, which this client does not verify."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/health/leadership?{query}", timeout=5,
                                    context=ctx) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_forged_transfer_hint_is_ignored(cluster):
    """The hint makes the leader read its record at once: one store read,
    at most one a second. Only a store reader can send it: without the
    record's succKey as proof (none, a wrong one, or the right one without
    xfer=1) the leader reads nothing, so nobody who can merely reach the
    endpoint can make it read the store at will. Counted exactly, by the
    leader's own store request metrics, with renewals 30 s apart."""
    c = cluster("peer")
    slow = ["--lease-timeout", "90s", "--renew-interval", "30s", "--renew-deadline", "60s",
            "--frequent-interval", "1s", "--infrequent-interval", "30s", "--new-lock-wait", "0"]
    mport = free_port()
    a = c.node("a", ["--metrics-listen", f"127.0.0.1:{mport}"], timing=slow, kill_timeout="2s")
    assert c.wait_leader(10, "a leads") is a
    port = a.peer_listen  # type: ignore[attr-defined]
    wait_for(lambda: _store_gets(mport) > 0, 10, "the leader's first read counted")
    time.sleep(1.0)
    succ = json.loads((c.tmp / "lock.json").read_text())["succKey"]
    assert re.fullmatch(r"[0-9a-f]{32}", succ), succ
    wrong = "0" * 32 if succ != "0" * 32 else "1" * 32
    before = _store_gets(mport)
    for query in ("xfer=1", f"proof={wrong}&xfer=1", f"proof={succ}", f"proof={succ}&xfer=0",
                  f"proof={succ.upper()}&xfer=1", f"proof={succ}x&xfer=1"):
        _hint(port, query)
        time.sleep(1.2)  # past the one-a-second bound each time
    forged = _store_gets(mport)
    assert forged == before, f"forged hints made the leader read: {before} -> {forged}"
    assert _hint(port, f"proof={succ}&xfer=1") == 200
    wait_for(lambda: _store_gets(mport) >= before + 1, 5, "the hint's read")
    _hint(port, f"proof={succ}&xfer=1")  # within the second: not another read
    time.sleep(1.0)
    after = _store_gets(mport)
    print(f"store reads: {before} before, {forged} after 6 forged hints, {after} after 2 true "
          f"ones within a second")
    assert after == before + 1, f"{before} -> {after}: two hints within a second read twice"
    c.check_never_two()
