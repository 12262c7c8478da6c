# SPDX-License-Identifier: Apache-2.0
"""Implementations under test, and the timing settings they are run with.

An implementation is anything that can run one election node as a process
and say on stderr when it acquires and loses leadership. The benchmarks
only use the `Impl` interface below: a second implementation (Go s3lect,
`GoS3lect`; see bench/README.md "Go s3lect") is one more subclass registered
in `make_impls`; the failover and cost tables then get its rows and the
summary its ratios.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from common import REPO, BenchError


@dataclass(frozen=True)
class Timing:
    """Election timing in seconds. `flags` names only what differs from the
    defaults, so the defaults run really uses each implementation's defaults."""

    name: str
    lease: float = 15.0
    renew: float = 5.0
    deadline: float = 10.0
    frequent: float = 5.0
    infrequent: float = 30.0
    skew: float = 0.0  # s3lect's default: the wall-clock takeover rule is off
    flags: tuple[str, ...] = ()

    def describe(self) -> str:
        return (f"lease {self.lease:g} s, renew {self.renew:g} s, deadline {self.deadline:g} s, "
                f"frequent {self.frequent:g} s, infrequent {self.infrequent:g} s, "
                f"max clock skew {self.skew:g} s" + (" (off)" if self.skew == 0 else ""))

    # The targets of issue 9 (failover after kill -9, handover after SIGTERM).
    # "shipped" is s3lect run with no mode flag (peer mode on by default);
    # "firewalled" the same with every peer port unreachable, so followers
    # read the store every frequent interval (docs/peer.md).
    def kill_target(self, mode: str) -> float:
        if mode in ("peer", "shipped"):
            return self.lease + 0.5
        if mode == "firewalled" or self.infrequent <= self.lease:
            return self.lease + self.frequent + 0.5
        return max(self.infrequent, self.lease + self.skew) + self.frequent + 0.5

    def graceful_target(self, mode: str) -> float:
        return 0.5 if mode in ("peer", "shipped") else self.frequent + 0.5


def _timing(name: str, lease, renew, deadline, frequent, infrequent) -> Timing:
    return Timing(name, lease, renew, deadline, frequent, infrequent, 0.0,
                  ("lease", "renew", "deadline", "frequent", "infrequent"))


DEFAULTS = Timing("defaults")
# Both implementations poll S3 equally often (Go s3lect has no infrequent interval).
LIKE_FOR_LIKE = _timing("like-for-like", 3, 1, 2, 1, 1)
# What the dual interval trades: stable followers poll every 6 s instead of every 1 s.
COST = _timing("cost", 3, 1, 2, 1, 6)
# Go s3lect's defaults (lease 15 s, every node's cycle 5 s), with s3lect's
# followers reading as often (infrequent = frequent = 5 s): failover at an
# equal follower read rate (issue 28 item 3). Only with --timing equal-rate.
EQUAL_RATE = _timing("equal-rate", 15, 5, 10, 5, 5)
TIMINGS = {t.name: t for t in (LIKE_FOR_LIKE, COST, DEFAULTS, EQUAL_RATE)}


# The modes a configuration can run a node in (Cluster, NodeSpec.mode):
#   s3          no peer mode (s3lect: --no-peer when its `run` has peer mode
#               on by default; Go s3lect: its default)
#   peer        peer mode asked for (--peer, with certificates or zero-config)
#   shipped     no mode flag at all: what `s3lect run` does out of the box
#               (peer mode on by default, zero-config, ephemeral port)
#   firewalled  shipped, but every node advertises (--addr) a port on which
#               nothing listens and listens elsewhere (--peer-listen), so every
#               follower's connect to the leader's endpoint is refused, as
#               behind a REJECT firewall, and it follows through the store
MODES = ("s3", "peer", "shipped", "firewalled")
MODE_TEXT = """*shipped*: `s3lect run` with no mode flag: peer mode on by default,
zero-config (a self-signed certificate whose key's SHA-256 the lock record
carries, followers pin it), listening on this host's address on the route
to the S3 endpoint (127.0.0.1 here) with an ephemeral port. *firewalled*:
the same, but each node also gets `--addr 127.0.0.1:A --peer-listen
127.0.0.1:B`: it listens on B and advertises A, a port the bench holds bound
without listening, so a follower's connect to the leader's endpoint is
refused at once, as behind a firewall that REJECTs; every follower then
follows the leader through the store every frequent interval (docs/peer.md
"When the peer check fails"). A firewall that DROPs instead would add up to
`peer_timeout` (3 s) to each failed check, which a follower makes once per
leader and then once per 5 minutes (doubling to an hour). *s3 (--no-peer)*:
s3lect with peer mode turned off; Go s3lect's *s3* is its own default (no
peer mode)."""

# How peer-mode nodes are set up, for the result files' "how measured" text.
PEER_SETUPS_TEXT = """Peer mode (the mode column names the setup): *certificates* adds
`--peer --addr 127.0.0.1:PORT --peer-cert … --peer-key … --peer-ca …` with a
throwaway EC P-256 CA and a certificate per node, its id as CN (s3lect
counts an answer only from a certificate naming the leader the record
names) and 127.0.0.1 as subjectAltName (Go s3lect's node program always
runs this way: Go s3lect has no zero-config peer mode);
*zero-config* (the tradeoff's s3lect peer points, when the build has it) adds only
`--peer`: no certificate flags, no `--addr`, no `--peer-listen`, so the
leader makes a self-signed certificate and publishes its key's SHA-256 in
the lock record, followers pin it, and the advertised address is this
host's address on the route to the S3 endpoint (127.0.0.1 here) with an
ephemeral port."""


def zero_config_for(timing: Timing, mode: str) -> bool:
    """Whether a configuration runs peer mode zero-config (only `--peer`) on
    implementations that have it: the defaults, as a user who adds nothing but
    `--peer` gets them. The other peer configurations keep the certificate
    flags they were measured with."""
    return mode == "peer" and timing is DEFAULTS


@dataclass
class PeerSpec:
    addr: str  # host:port advertised and listened on
    cert: Path
    key: Path
    ca: Path
    # Zero-config peer mode (s3lect run --peer with no certificate flags and
    # no --addr: the leader makes a self-signed certificate and publishes its
    # key's fingerprint in the lock record, followers pin it). Only for an
    # implementation whose zero_config_peer is true; others get the
    # certificates above.
    zero_config: bool = False


@dataclass
class FirewallSpec:
    """Mode "firewalled": advertise `addr` (nothing listens there: a
    follower's connect is refused) and listen on `listen`."""

    addr: str
    listen: str


@dataclass
class NodeSpec:
    """Everything an implementation needs to start one node."""

    node_id: str
    bucket: str
    key: str
    endpoint: str  # S3 endpoint URL (MinIO, or a counting proxy in front of it)
    access_key: str
    secret_key: str
    region: str
    timing: Timing
    peer: PeerSpec | None = None
    cmd: list[str] = field(default_factory=lambda: ["sleep", "86400"])
    mode: str = ""  # one of MODES ("": "peer" when peer is set, else "s3")
    firewall: FirewallSpec | None = None  # mode "firewalled"

    def node_mode(self) -> str:
        return self.mode or ("peer" if self.peer else "s3")


# What a line on a node's stderr means. Kinds:
#   acquired (term)   the node starts leading
#   lost              the node stops leading (lease lost, released, stopped)
#   releasing         the node is about to give leadership up on a graceful stop
#   leader_is (id)    the node follows a leader with this id
#   cmd_started (pid) / cmd_exited (pid)   the supervised command
LineEvent = tuple[str, dict]


class Impl:
    name = "abstract"  # short, used in file names and tables
    label = "abstract"
    modes: tuple[str, ...] = ("s3", "peer")
    # Whether acquisitions carry a fencing term the failover bench can check
    # grows with every new leader (Go s3lect writes none).
    has_term = True
    # Whether the node runs the supervised command (Go s3lect's node does not:
    # the failover bench's grandchild variant would repeat its plain rows).
    runs_command = True
    # Whether peer mode can run without certificate flags (PeerSpec.zero_config).
    zero_config_peer = False
    # Whether the node program runs peer mode when no mode flag is given
    # (s3lect run since issue 28), so mode "s3" must turn it off.
    peer_default = False
    # Whether the leader renews at the follower poll interval (Go s3lect: one
    # cycle per FrequentInterval for every node), so a poll interval at or
    # above the lease cannot keep a leader.
    renew_is_poll = False

    def peer_setup(self, spec: "PeerSpec | None", mode: str = "") -> str:
        """How a node of this implementation is set up for its mode (the
        result files' mode column: "MODE (SETUP)")."""
        if mode == "shipped":
            return "peer on by default" if self.peer_default else "its default: no peer mode"
        if mode == "firewalled":
            return "peer ports refused"
        if mode == "s3":
            return "--no-peer" if self.peer_default else ""
        if spec is None:
            return ""
        return "zero-config" if spec.zero_config and self.zero_config_peer else "certificates"

    def check(self) -> None:
        """Raises BenchError saying why this implementation cannot run here."""

    def version(self) -> str:
        raise NotImplementedError

    def node_argv(self, spec: NodeSpec) -> list[str]:
        raise NotImplementedError

    def node_env(self, spec: NodeSpec) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": spec.access_key, "AWS_SECRET_ACCESS_KEY": spec.secret_key,
                "AWS_REGION": spec.region}

    def parse_line(self, line: str) -> LineEvent | None:
        raise NotImplementedError

    # Which library the footprint program runs on: "HEAD" (this tree) or a
    # baseline commit; the report labels rows with it and the runtime seen.
    rev = ""
    # RLIMIT_NOFILE the footprint program runs under (soft = hard), and why.
    nofile = 1024
    nofile_note = "the common default"

    def footprint_argv(self, count: int, per_key: int, prefix: str, endpoint: str | None,
                       timing: Timing, ready_timeout_ms: int) -> list[str] | None:
        """A program that runs `count` electors in one process, `per_key` of them
        on each lock key (bench/footprint's stdin/stdout protocol), or None if
        this implementation has none."""
        return None


# The `s3lect run` stderr lines (docs/cli.md); Go s3lect's node program
# (bench/peers/gos3lect) prints the same, with term=0.
_LINES = [
    ("acquired", re.compile(r"^s3lect: acquired leadership term=(?P<term>\d+)")),
    ("lost", re.compile(r"^s3lect: lost leadership")),
    ("lost", re.compile(r"^s3lect: stopping command pid=\d+ \(lease no longer valid\)")),
    ("releasing", re.compile(r"^s3lect: releasing leadership")),
    ("leader_is", re.compile(r"^s3lect: leader is (?P<id>\S+) term=(?P<term>\d+)")),
    ("cmd_started", re.compile(r"^s3lect: started command pid=(?P<pid>\d+)")),
    ("cmd_exited", re.compile(r"^s3lect: command exited pid=(?P<pid>\d+)")),
]


def parse_s3lect_line(line: str) -> LineEvent | None:
    for kind, rx in _LINES:
        m = rx.match(line)
        if m:
            d = {k: (v if k == "id" else int(v)) for k, v in m.groupdict().items()}
            return kind, d
    return None


class S3lectC(Impl):
    """This repository's `s3lect run` (C library + CLI) and bench/footprint."""

    name = "s3lect-c"
    label = "s3lect (C, this repo)"

    def __init__(self, build_dir: Path, work: Path, footprint_bin: Path | None = None,
                 rev: str = "HEAD"):
        self.build_dir = build_dir
        self.rev = rev
        src = build_dir / "bin" / "s3lect"
        if not src.exists():
            raise BenchError(f"{src} does not exist: build it first "
                             f"(cmake -S {REPO} -B {build_dir} -G Ninja && ninja -C {build_dir})")
        # A private copy, so a rebuild of the build tree during the run cannot
        # swap the binary between trials.
        self.bin = work / f"s3lect-{self.name}"
        shutil.copy2(src, self.bin)
        self.footprint_bin = footprint_bin
        self.zero_config_peer, self.peer_default = _peer_facts(self.bin)
        self.modes = ("s3", "peer", "shipped", "firewalled") if self.peer_default else ("s3",
                                                                                       "peer")

    def version(self) -> str:
        out = subprocess.run([str(self.bin), "--version"], stdout=subprocess.PIPE, text=True,
                             timeout=10).stdout.strip()
        return out

    def node_argv(self, spec: NodeSpec) -> list[str]:
        argv = [str(self.bin), "run", "--lock", f"s3://{spec.bucket}/{spec.key}",
                "--id", spec.node_id, "--endpoint", spec.endpoint, "--region", spec.region]
        # No --kill-timeout: the default is the largest value that still
        # stops the command's tree before another node can lead.
        t = spec.timing
        names = {"lease": "--lease-timeout", "renew": "--renew-interval",
                 "deadline": "--renew-deadline", "frequent": "--frequent-interval",
                 "infrequent": "--infrequent-interval"}
        for f in t.flags:
            argv += [names[f], f"{int(getattr(t, f) * 1000)}ms"]
        mode = spec.node_mode()
        if mode == "shipped":
            pass  # what a user gets who adds nothing: peer mode on by default
        elif mode == "firewalled":
            # Peer mode as shipped, but followers are refused at the
            # advertised port (lib/cluster.py holds it bound, not listening).
            argv += ["--addr", spec.firewall.addr, "--peer-listen", spec.firewall.listen]
        elif mode == "s3":
            if self.peer_default:
                argv += ["--no-peer"]
        elif spec.peer and self.peer_setup(spec.peer) == "zero-config":
            # Only --peer: no certificates, no --addr (it defaults to this
            # host's address on the route to the S3 endpoint, 127.0.0.1 here,
            # with an ephemeral port, so three nodes on one host do not
            # collide) and no --peer-listen.
            argv += ["--peer"]
        elif spec.peer:
            p = spec.peer
            argv += ["--peer", "--addr", p.addr, "--peer-cert", str(p.cert),
                     "--peer-key", str(p.key), "--peer-ca", str(p.ca)]
        return argv + ["--", *spec.cmd]

    def parse_line(self, line: str) -> LineEvent | None:
        return parse_s3lect_line(line)

    def footprint_argv(self, count, per_key, prefix, endpoint, timing, ready_timeout_ms):
        if not self.footprint_bin:
            return None
        argv = [str(self.footprint_bin), "--lock-prefix", prefix, "--count", str(count),
                "--per-key", str(per_key), "--ready-timeout", str(ready_timeout_ms)]
        if endpoint:
            argv += ["--endpoint", endpoint]
        for f in timing.flags:
            argv += [f"--{f}", str(int(getattr(timing, f) * 1000))]
        return argv


def _peer_facts(binary: Path) -> tuple[bool, bool]:
    """(zero-config, on by default) for this `s3lect`'s peer mode, from `run
    --help`: zero-config when its line for --peer no longer says it needs
    certificate flags; on by default when it has --no-peer (issue 28)."""
    try:
        out = subprocess.run([str(binary), "run", "--help"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False, False
    zero = False
    for line in out.splitlines():
        if line.strip().startswith("--peer "):
            zero = "--peer-cert" not in line
            break
    default = any(line.strip().startswith("--no-peer ") for line in out.splitlines())
    return zero, default and zero


class S3lectCBaseline(S3lectC):
    """The same programs built from an older commit (bench/run --baseline REV,
    lib/baseline.py), measured beside this tree in the same run. Its footprint
    program runs under a raised fd limit: the thread-per-elector runtime holds
    a connection and several descriptors per elector, so 10,000 S3 electors
    cannot run under 1,024 descriptors at all."""

    def __init__(self, base, work: Path, footprint_bin: Path | None, nofile: int,
                 nofile_note: str):
        self.name = f"s3lect-c@{base.short}"
        self.label = f"s3lect (C, commit {base.short})"
        self.nofile = nofile
        self.nofile_note = nofile_note
        super().__init__(base.build_dir, work, footprint_bin, rev=base.short)


class GoS3lect(Impl):
    """Go s3lect (github.com/nadrama-com/s3lect) through bench/peers/gos3lect:
    one Go s3lect elector per process with an aws-sdk-go-v2 Storage, built by
    tests/harness/gos3lect.py from the checkout named by GOS3LECT_SRC (Go
    s3lect cannot be fetched from the module proxy and may not be copied
    here). It prints `s3lect run`'s lines with term=0 (Go s3lect has no term)
    and runs no command, so its command-tree columns stay empty."""

    name = "go-s3lect"
    label = "Go s3lect"
    runs_command = False
    has_term = False  # failover.py skips its growing-term check
    renew_is_poll = True

    def __init__(self):
        self.bin: Path | None = None
        self.commit = "unknown"

    def check(self) -> None:
        from harness import gos3lect
        try:
            self.bin = gos3lect.build_node()
            self.commit = gos3lect.source_commit()
        except gos3lect.Unavailable as e:
            raise BenchError(f"go-s3lect cannot run: {e}") from None
        except gos3lect.BuildError as e:
            raise BenchError(f"go-s3lect: {e}") from None

    def version(self) -> str:
        go = subprocess.run(["go", "env", "GOVERSION"], stdout=subprocess.PIPE, text=True,
                            timeout=60).stdout.strip()
        return f"Go s3lect {self.commit} (bench/peers/gos3lect, {go}, aws-sdk-go-v2)"

    def node_argv(self, spec: NodeSpec) -> list[str]:
        assert self.bin is not None, "check() builds the node program first"
        argv = [str(self.bin), "--lock", f"s3://{spec.bucket}/{spec.key}", "--id", spec.node_id,
                "--endpoint", spec.endpoint, "--region", spec.region]
        t = spec.timing
        # Go s3lect's ElectorConfig: LeaderTimeout, FrequentInterval (every
        # node's cycle: the leader renews, with a GET and a PUT, and followers
        # poll at it), InfrequentInterval (kept but unused by c45cfbd). It has
        # no renew interval or renew deadline of its own.
        names = {"lease": "--leader-timeout", "frequent": "--frequent-interval",
                 "infrequent": "--infrequent-interval"}
        if "renew" in t.flags and t.renew != t.frequent:
            raise BenchError(f"timing {t.name}: Go s3lect renews every FrequentInterval, so it "
                             f"cannot run renew {t.renew:g} s with frequent {t.frequent:g} s")
        for f in t.flags:
            if f in names:
                argv += [names[f], f"{int(getattr(t, f) * 1000)}ms"]
        if spec.peer:
            p = spec.peer
            argv += ["--peer", "--addr", p.addr, "--peer-cert", str(p.cert),
                     "--peer-key", str(p.key), "--peer-ca", str(p.ca)]
        return argv

    def parse_line(self, line: str) -> LineEvent | None:
        return parse_s3lect_line(line)


def _go_s3lect_unavailable() -> str | None:
    """Why Go s3lect cannot be measured here, or None when GOS3LECT_SRC names
    a usable checkout (the build itself happens in GoS3lect.check)."""
    from harness import gos3lect
    try:
        gos3lect.find_source()
    except gos3lect.Unavailable as e:
        return (f"{e}. Go s3lect is refused by the Go module proxy and its code may not be "
                "copied into this repository, so its numbers are missing, not estimated.")
    if not shutil.which("go"):
        return "the go command is not on PATH (Go ≥ 1.24 builds the Go s3lect node)."
    return None


# Implementations that cannot be measured in this run, with the reason.
# Reported in every result file; never given numbers.
BLOCKED: dict[str, str] = {}
_why = _go_s3lect_unavailable()
if _why:
    BLOCKED[GoS3lect.name] = _why


def default_impl_names() -> list[str]:
    """What to measure when no --impl is given: s3lect-c, and Go s3lect
    beside it when GOS3LECT_SRC names a usable checkout."""
    return [S3lectC.name] + ([] if GoS3lect.name in BLOCKED else [GoS3lect.name])


def make_impls(names: list[str], build_dir: Path, work: Path,
               footprint_bin: Path | None, baseline=None,
               baseline_footprint: Path | None = None,
               baseline_nofile: tuple[int, str] = (65536, "raised")) -> list[Impl]:
    """The implementations to measure; `work` is a scratch directory for this
    run. With a baseline (lib/baseline.Baseline), s3lect-c built from that
    commit is added right after this tree's s3lect-c, so ratios read new/old."""
    impls: list[Impl] = []
    for n in names:
        if n == S3lectC.name:
            impls.append(S3lectC(build_dir, work, footprint_bin, rev=head_rev(build_dir)))
            if baseline is not None:
                impls.append(S3lectCBaseline(baseline, work, baseline_footprint,
                                             *baseline_nofile))
        elif n in BLOCKED:
            raise BenchError(f"implementation {n} is blocked: {BLOCKED[n]}")
        elif n == GoS3lect.name:
            impls.append(GoS3lect())
        else:
            raise BenchError(f"unknown implementation {n!r}; known: {S3lectC.name}, "
                             f"{GoS3lect.name}")
    if baseline is not None and not any(isinstance(i, S3lectCBaseline) for i in impls):
        raise BenchError("--baseline needs --impl s3lect-c (the baseline is an older s3lect-c)")
    if GoS3lect.name not in names and GoS3lect.name not in BLOCKED:
        BLOCKED[GoS3lect.name] = ("not asked for in this run (GOS3LECT_SRC names a usable "
                                  "checkout): add --impl s3lect-c --impl go-s3lect.")
    for i in impls:
        i.check()
    return impls


def head_rev(build_dir: Path) -> str:
    """What the build tree was built from: "HEAD" when it is this repository's
    and libs3lect/ matches the checked-out commit, "working tree" when
    libs3lect/ has changes, else the build tree's source directory."""
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                src = Path(line.split("=", 1)[1])
                if src.resolve() != REPO.resolve():
                    # e.g. a baseline's tree, ~/.cache/s3lect/bench-baseline/<sha>/src
                    return f"tree {src.parent.name[:10]}/{src.name}"
    except OSError:
        pass
    try:
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--",
                                "libs3lect"], stdout=subprocess.PIPE, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "HEAD"
    return "working tree" if dirty else "HEAD"
