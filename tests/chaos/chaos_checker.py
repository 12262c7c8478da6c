# SPDX-License-Identifier: Apache-2.0
"""Checks the leadership history of a chaos run.

Input: the CMD log that every leader's CMD (leader_cmd.py) appends to, the
`s3lect run` logs, and what the test did (pauses, kills, fault times). All
times are CLOCK_MONOTONIC seconds, one clock for every process on the host.

A CMD instance (one pid) leads from its `start` line to its `end` line. A
line may carry a sixth field, the pid of the CMD whose process tree the
instance belongs to (leader_tree.py: descendants that ignore SIGTERM, in and
out of the CMD's process group); every instance of one tree is one
leadership, which lasts until its last process stops, so instances of the
same tree may overlap each other but no instance of any other tree. A
CMD killed with its node (kill -9) has no end line: its end is the time the
test saw it dead (an upper bound). A paused node's CMD does nothing while
stopped, so its interval is split into [start, pause] and [resume, end]; the
part after the resume is the time s3lect needs to notice the lease it lost
while stopped and to stop CMD (`run` checks every 250 ms, CMD exits at once
on SIGTERM), and may overlap the next leader by at most `stop_bound`.

Violations:
  overlap     two CMDs ran at the same time (beyond the post-resume allowance)
  stop        a resumed CMD ran on longer than stop_bound after its lease was gone
  term        terms did not strictly increase from one leader to the next
  acquired    one term acquired by two nodes, or a CMD ran with a term its node never acquired
  unended     a CMD has no end and the test did not kill it
  liveness    no leader within liveness_bound after a fault healed
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Instance:
    pid: int
    node: str
    term: int
    start: float
    last: float  # last line seen (start, hb or end)
    end: float | None = None
    ended_by: str = ""  # "sigterm", "killed"
    root: int = 0  # pid of the tree's CMD (the instance's own pid for a CMD)


@dataclass
class Segment:
    pid: int
    node: str
    term: int
    start: float
    end: float
    post_resume: bool = False
    root: int = 0


@dataclass
class Pause:
    node: str
    pids: list[int]  # CMD pids that were stopped with the node
    t_pause: float   # after SIGSTOP was sent to the node and its CMD
    t_resume: float  # before SIGCONT was sent


@dataclass
class Fault:
    kind: str
    node: str
    t_begin: float
    t_heal: float


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    max_post_resume_s: float = 0.0
    max_overlap_s: float = 0.0
    regain_s: list[tuple[str, float]] = field(default_factory=list)
    max_gap_s: float = 0.0  # longest time without a running CMD after the first one
    gaps_s: list[float] = field(default_factory=list)  # every such time, in order
    max_tree_tail_s: float = 0.0  # longest a descendant ran on after its tree's CMD ended

    def ok(self) -> bool:
        return not self.violations


def parse_cmd_log(text: str) -> dict[int, Instance]:
    inst: dict[int, Instance] = {}
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if len(parts) not in (5, 6) or parts[0] not in ("start", "hb", "end"):
            raise ValueError(f"CMD log line {n} is malformed: {line!r}")
        try:
            ev, term, node, pid, t = (parts[0], int(parts[1]), parts[2], int(parts[3]),
                                      float(parts[4]))
            root = int(parts[5]) if len(parts) == 6 else pid
        except ValueError:
            raise ValueError(f"CMD log line {n} is malformed: {line!r}") from None
        if ev == "start":
            if pid in inst:
                raise ValueError(f"CMD log line {n}: pid {pid} started twice")
            if root != pid and (root not in inst or inst[root].node != node
                                or inst[root].term != term):
                raise ValueError(f"CMD log line {n}: pid {pid} joins tree {root}, which is not "
                                 f"a CMD of {node} with term {term}")
            inst[pid] = Instance(pid=pid, node=node, term=term, start=t, last=t, root=root)
            continue
        if pid not in inst:
            raise ValueError(f"CMD log line {n}: {ev} of pid {pid} without a start")
        i = inst[pid]
        i.last = max(i.last, t)
        if ev == "end":
            i.end = t
            i.ended_by = "sigterm"
    return inst


ACQUIRED = re.compile(r"s3lect: acquired leadership term=(\d+) id=(\S+)")


def acquired_terms(node_logs: dict[str, str]) -> list[tuple[int, str, str]]:
    """(term, node id, log name) of every acquisition in the s3lect logs."""
    out = []
    for name, text in node_logs.items():
        for m in ACQUIRED.finditer(text):
            out.append((int(m.group(1)), m.group(2), name))
    return out


def check(cmd_log: str, node_logs: dict[str, str], pauses: list[Pause],
          deaths: dict[int, float], faults: list[Fault], *, stop_bound: float,
          liveness_bound: float, renew_deadline: float, run_end: float,
          observe: tuple[float, float] | None = None) -> Report:
    """observe: (begin, end) of a window in which a leader should run: the
    longest time without one (max_gap_s) then also counts the time from
    `begin` to the first CMD and from the last one to `end`."""
    rep = Report()
    try:
        inst = parse_cmd_log(cmd_log)
    except ValueError as e:
        rep.violations.append(f"cmdlog: {e}")
        return rep
    rep.instances = sorted(inst.values(), key=lambda i: i.start)

    # End of each CMD.
    for i in rep.instances:
        if i.end is None:
            if i.pid in deaths:
                i.end = max(deaths[i.pid], i.last)
                i.ended_by = "killed"
            else:
                rep.violations.append(
                    f"unended: CMD pid {i.pid} of {i.node} (term {i.term}) has no end line and "
                    f"was not killed by the test (last heartbeat {i.last:.3f})")
                i.end = max(i.last, run_end)

    # Segments, split at the pauses of their node.
    for i in rep.instances:
        cuts = sorted((p for p in pauses if i.pid in p.pids), key=lambda p: p.t_pause)
        s, post = i.start, False
        for p in cuts:
            rep.segments.append(Segment(i.pid, i.node, i.term, s, min(p.t_pause, i.end), post))
            s, post = p.t_resume, True
            if i.end < p.t_resume:  # ended while stopped (killed): nothing after
                s = None
                break
            run_on = i.end - p.t_resume
            if p.t_resume - p.t_pause > renew_deadline:
                rep.max_post_resume_s = max(rep.max_post_resume_s, run_on)
                if run_on > stop_bound:
                    rep.violations.append(
                        f"stop: {i.node}'s CMD pid {i.pid} (term {i.term}) ran {run_on:.3f}s after "
                        f"a {p.t_resume - p.t_pause:.1f}s pause (bound {stop_bound}s)")
        if s is not None:
            rep.segments.append(Segment(i.pid, i.node, i.term, s, i.end, post))
    for seg in rep.segments:
        seg.root = inst[seg.pid].root
    for i in rep.instances:
        if i.root != i.pid and i.root in inst:
            rep.max_tree_tail_s = max(rep.max_tree_tail_s, i.end - inst[i.root].end)

    # (a) no overlap.
    segs = sorted(rep.segments, key=lambda s: s.start)
    overlaps: dict[tuple[int, int], tuple[float, float, str]] = {}  # per pair of trees: the largest
    for a_i, a in enumerate(segs):
        for b in segs[a_i + 1:]:
            if b.start >= a.end:
                break
            if a.root == b.root:  # the same process or the same tree
                continue
            ov = min(a.end, b.end) - b.start
            if ov <= 0:
                continue
            if (a.post_resume or b.post_resume) and ov <= stop_bound:
                rep.max_overlap_s = max(rep.max_overlap_s, ov)
                continue
            key = (min(a.root, b.root), max(a.root, b.root))
            if key not in overlaps or ov > overlaps[key][0]:
                overlaps[key] = (ov, b.start, (
                    f"overlap: {a.node} (term {a.term}, pid {a.pid}, {a.start:.3f}-{a.end:.3f}) "
                    f"and {b.node} (term {b.term}, pid {b.pid}, {b.start:.3f}-{b.end:.3f}) "
                    f"overlap by {ov:.3f}s"))
    rep.violations += [msg for _, _, msg in sorted(overlaps.values(), key=lambda v: v[1])]

    # Longest time without any leader (after the first one started).
    covered_to = observe[0] if observe else None
    for s in segs:
        if covered_to is not None and s.start > covered_to:
            rep.gaps_s.append(s.start - covered_to)
        covered_to = s.end if covered_to is None else max(covered_to, s.end)
    if observe and observe[1] > (covered_to or observe[0]):
        rep.gaps_s.append(observe[1] - (covered_to or observe[0]))
    rep.max_gap_s = max(rep.gaps_s, default=0.0)

    # (b) terms strictly increase from one command run to the next: no two
    #     leaderships share a term, not even two of one node (a node that
    #     stepped down and takes its own record back writes a new term:
    #     docs/algorithm.md "Terms").
    runs = [i for i in rep.instances if i.root in (0, i.pid)]  # each tree's CMD
    for prev, cur in zip(runs, runs[1:]):
        if cur.term <= prev.term:
            rep.violations.append(
                f"term: {cur.node} started with term {cur.term} at {cur.start:.3f} after "
                f"{prev.node} led with term {prev.term}")

    # Every acquisition has its own term; every CMD ran under an acquisition of its node.
    acq = acquired_terms(node_logs)
    seen: dict[int, tuple[str, str]] = {}
    for term, node, log in acq:
        if term in seen:
            rep.violations.append(
                f"acquired: term {term} acquired twice ({seen[term][0]} in {seen[term][1]}, "
                f"{node} in {log})")
        seen[term] = (node, log)
    for i in rep.instances:
        if seen.get(i.term, ("",))[0] != i.node:
            rep.violations.append(
                f"acquired: CMD of {i.node} ran with term {i.term}, which its s3lect did not "
                f"report acquiring")

    # (c) leadership regained after every fault.
    for f in faults:
        covering = [s for s in segs if s.start <= f.t_heal < s.end and not s.post_resume]
        if covering:
            rep.regain_s.append((f.kind, 0.0))
            continue
        later = [s.start for s in segs if s.start >= f.t_heal]
        delay = (min(later) - f.t_heal) if later else None
        if delay is None or delay > liveness_bound:
            what = f"{delay:.1f}s" if delay is not None else "never"
            rep.violations.append(
                f"liveness: after {f.kind} of {f.node} healed at {f.t_heal:.3f}, a leader ran "
                f"again after {what} (bound {liveness_bound}s)")
        else:
            rep.regain_s.append((f.kind, delay))
    return rep


def read_logs(paths: list[Path]) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in paths if p.exists()}


# ---------------------------------------------------------------------------
# Fenced writes (issue 41 item 5): the appends of the chaos fence workload
# (fence_cmd.py) against the object they went to.


@dataclass
class Attempt:
    """One read-modify-write of fence_cmd.py: its outcome (ack, fenced,
    precondition, retries, error), the line it appended ("TERM SEQ NODE")
    and when its write started and ended (CLOCK_MONOTONIC)."""

    kind: str
    term: int
    seq: int
    node: str
    pid: int
    t_start: float
    t_end: float

    @property
    def line(self) -> str:
        return f"{self.term} {self.seq} {self.node}"


@dataclass
class FenceReport:
    violations: list[str] = field(default_factory=list)
    acked: int = 0            # acknowledged appends
    lines: int = 0            # lines in the final object
    fenced: int = 0           # writes refused as fenced
    zombie_refused: int = 0   # ... of them by a term older than one that had written already
    zombie_attempts: int = 0  # every write (any outcome) by such a term
    terms: int = 0            # terms that wrote

    def ok(self) -> bool:
        return not self.violations


FENCE_KINDS = ("ack", "fenced", "precondition", "retries", "error")


def parse_fence_log(text: str) -> list[Attempt]:
    """The lines of fence_cmd.py's EVENTS_LOG; ValueError on a malformed one."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        p = line.split()
        try:
            if len(p) != 7 or p[0] not in FENCE_KINDS:
                raise ValueError
            out.append(Attempt(p[0], int(p[1]), int(p[2]), p[3], int(p[4]), float(p[5]),
                               float(p[6])))
        except ValueError:
            raise ValueError(f"fence log line {n} is malformed: {line!r}") from None
    return out


def check_fence(attempts: list[Attempt], final: bytes | None) -> FenceReport:
    """The fence's properties on a run's attempts and its object's final
    bytes (the writers' bytes, envelope stripped; None: no object):

      lost        an acknowledged append is not in the final object
      order       a line of a smaller term after one of a larger term
      duplicate   a line twice (every attempt appends a line of its own)
      object      a line that no attempt wrote, or one that is malformed
      zombie      a write by term T acknowledged although it started after
                  a larger term's first acknowledged write had ended (the
                  object held a newer term's bytes when it began: the fence
                  must refuse it)

    Also counts the writes a zombie attempted (a term older than one whose
    first write had ended before this one began) and the ones of them
    refused as fenced."""
    rep = FenceReport()
    text = (final or b"").decode(errors="replace")
    lines = [ln for ln in text.split("\n") if ln]
    rep.lines = len(lines)
    written = {a.line for a in attempts}
    seen: set[str] = set()
    prev: tuple[int, str] | None = None
    for i, ln in enumerate(lines, 1):
        p = ln.split()
        if len(p) != 3 or not p[0].isdigit() or not p[1].isdigit():
            rep.violations.append(f"object: line {i} is malformed: {ln!r}")
            continue
        if ln in seen:
            rep.violations.append(f"duplicate: line {i} {ln!r} appears twice")
        seen.add(ln)
        if ln not in written:
            rep.violations.append(f"object: line {i} {ln!r} was written by no attempt")
        term = int(p[0])
        if prev is not None and term < prev[0]:
            rep.violations.append(f"order: line {i} {ln!r} (term {term}) comes after "
                                  f"{prev[1]!r} (term {prev[0]}): a term went down")
        if prev is None or term >= prev[0]:
            prev = (term, ln)
    acks = [a for a in attempts if a.kind == "ack"]
    rep.acked = len(acks)
    rep.fenced = sum(1 for a in attempts if a.kind == "fenced")
    for a in acks:
        if a.line not in seen:
            rep.violations.append(
                f"lost: {a.node}'s append {a.line!r} (term {a.term}, acknowledged at "
                f"{a.t_end:.3f}) is not in the final object")
    first: dict[int, float] = {}  # term -> end of its first acknowledged write
    for a in acks:
        first[a.term] = min(first.get(a.term, a.t_end), a.t_end)
    rep.terms = len(first)
    for a in sorted(attempts, key=lambda x: x.t_start):
        newer = [(t, e) for t, e in first.items() if t > a.term and e < a.t_start]
        if not newer:
            continue
        rep.zombie_attempts += 1
        rep.zombie_refused += a.kind == "fenced"
        if a.kind == "ack":
            t, e = min(newer, key=lambda te: te[1])
            rep.violations.append(
                f"zombie: {a.node}'s write of term {a.term} ({a.line!r}, {a.t_start:.3f}-"
                f"{a.t_end:.3f}) was accepted after term {t} had written at {e:.3f}")
    return rep
