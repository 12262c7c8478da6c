# SPDX-License-Identifier: Apache-2.0
"""The chaos checker on hand-made histories: it must catch every violation it
claims to, and accept the allowed post-resume stop latency."""

from __future__ import annotations

import chaos_checker as ck

BOUNDS = dict(stop_bound=1.0, liveness_bound=12.0, renew_deadline=2.0, run_end=100.0)


def cmdlog(*rows: tuple) -> str:
    """rows: (event, term, node, pid, t)"""
    return "".join(f"{e} {term} {node} {pid} {t:.6f}\n" for e, term, node, pid, t in rows)


def acquired(**terms: list[int]) -> dict[str, str]:
    return {f"{node}.1.log": "".join(f"s3lect: acquired leadership term={t} id={node}\n" for t in ts)
            for node, ts in terms.items()}


def kinds(rep: ck.Report) -> list[str]:
    return sorted({v.split(":")[0] for v in rep.violations})


def test_clean_handover_passes():
    log = cmdlog(("start", 1, "a", 10, 1.0), ("hb", 1, "a", 10, 1.1), ("end", 1, "a", 10, 5.0),
                 ("start", 2, "b", 20, 8.0), ("end", 2, "b", 20, 20.0))
    rep = ck.check(log, acquired(a=[1], b=[2]), [], {},
                   [ck.Fault("kill_leader", "a", 5.0, 5.0)], **BOUNDS)
    assert rep.ok(), rep.violations
    assert rep.regain_s == [("kill_leader", 3.0)] and rep.max_gap_s == 3.0


def test_overlap_is_caught():
    log = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 5.0),
                 ("start", 2, "b", 20, 4.9), ("end", 2, "b", 20, 9.0))
    rep = ck.check(log, acquired(a=[1], b=[2]), [], {}, [], **BOUNDS)
    assert kinds(rep) == ["overlap"], rep.violations


def test_killed_cmd_ends_when_seen_dead():
    log = cmdlog(("start", 1, "a", 10, 1.0), ("hb", 1, "a", 10, 3.9),
                 ("start", 2, "b", 20, 4.5), ("end", 2, "b", 20, 9.0))
    ok = ck.check(log, acquired(a=[1], b=[2]), [], {10: 4.0}, [], **BOUNDS)
    assert ok.ok(), ok.violations
    late = ck.check(log, acquired(a=[1], b=[2]), [], {10: 4.6}, [], **BOUNDS)
    assert kinds(late) == ["overlap"]
    unended = ck.check(log, acquired(a=[1], b=[2]), [], {}, [], **BOUNDS)
    assert "unended" in kinds(unended)


def test_resumed_leader_may_run_on_briefly_but_not_long():
    pause = ck.Pause("a", [10], t_pause=3.0, t_resume=8.0)
    base = [("start", 1, "a", 10, 1.0), ("start", 2, "b", 20, 6.5), ("end", 2, "b", 20, 20.0)]
    quick = cmdlog(*base, ("end", 1, "a", 10, 8.3))
    rep = ck.check(quick, acquired(a=[1], b=[2]), [pause], {}, [], **BOUNDS)
    assert rep.ok(), rep.violations
    assert abs(rep.max_post_resume_s - 0.3) < 1e-6 and abs(rep.max_overlap_s - 0.3) < 1e-6
    slow = cmdlog(*base, ("end", 1, "a", 10, 9.5))
    assert kinds(ck.check(slow, acquired(a=[1], b=[2]), [pause], {}, [], **BOUNDS)) == \
        ["overlap", "stop"]


def test_paused_leader_overlapping_before_its_pause_is_caught():
    pause = ck.Pause("a", [10], t_pause=7.0, t_resume=12.0)
    log = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 12.1),
                 ("start", 2, "b", 20, 6.5), ("end", 2, "b", 20, 20.0))
    assert "overlap" in kinds(ck.check(log, acquired(a=[1], b=[2]), [pause], {}, [], **BOUNDS))


def test_terms_must_increase_and_be_acquired_once():
    log = cmdlog(("start", 5, "a", 10, 1.0), ("end", 5, "a", 10, 2.0),
                 ("start", 5, "b", 20, 6.0), ("end", 5, "b", 20, 7.0))
    rep = ck.check(log, acquired(a=[5], b=[5]), [], {}, [], **BOUNDS)
    assert kinds(rep) == ["acquired", "term"], rep.violations
    log2 = cmdlog(("start", 3, "a", 10, 1.0), ("end", 3, "a", 10, 2.0))
    assert kinds(ck.check(log2, acquired(b=[3]), [], {}, [], **BOUNDS)) == ["acquired"]


def test_liveness_after_fault():
    log = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 5.0),
                 ("start", 2, "b", 20, 30.0), ("end", 2, "b", 20, 40.0))
    rep = ck.check(log, acquired(a=[1], b=[2]), [], {},
                   [ck.Fault("partition_leader_reset", "a", 4.0, 10.0)], **BOUNDS)
    assert kinds(rep) == ["liveness"], rep.violations
    never = ck.check(cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 5.0)),
                     acquired(a=[1]), [], {}, [ck.Fault("kill_leader", "a", 5.0, 5.0)], **BOUNDS)
    assert kinds(never) == ["liveness"]


def test_malformed_log_is_a_violation():
    rep = ck.check("start 1 a\n", {}, [], {}, [], **BOUNDS)
    assert kinds(rep) == ["cmdlog"]


def test_no_two_leaderships_share_a_term_not_even_one_nodes():
    # a stepped down and led again: with the same term that is two command
    # runs under one fencing token (issue 38 item 4), a violation.
    again = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 3.0),
                   ("start", 1, "a", 11, 3.2), ("end", 1, "a", 11, 6.0),
                   ("start", 2, "b", 20, 9.0), ("end", 2, "b", 20, 20.0))
    rep = ck.check(again, acquired(a=[1, 1], b=[2]), [], {}, [], **BOUNDS)
    assert set(kinds(rep)) >= {"acquired", "term"}, rep.violations
    # With a new term it is fine.
    renewed = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 3.0),
                     ("start", 2, "a", 11, 3.2), ("end", 2, "a", 11, 6.0),
                     ("start", 3, "b", 20, 9.0), ("end", 3, "b", 20, 20.0))
    rep = ck.check(renewed, acquired(a=[1, 2], b=[3]), [], {}, [], **BOUNDS)
    assert rep.ok(), rep.violations
    shared = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 3.0),
                    ("start", 1, "b", 20, 9.0), ("end", 1, "b", 20, 20.0))
    rep = ck.check(shared, acquired(a=[1], b=[1]), [], {}, [], **BOUNDS)
    assert set(kinds(rep)) >= {"acquired", "term"}, rep.violations


def test_gap_counts_the_edges_of_an_observation_window():
    log = cmdlog(("start", 1, "a", 10, 5.0), ("end", 1, "a", 10, 8.0),
                 ("start", 2, "b", 20, 9.0), ("end", 2, "b", 20, 10.0))
    inner = ck.check(log, acquired(a=[1], b=[2]), [], {}, [], **BOUNDS)
    assert inner.max_gap_s == 1.0
    window = ck.check(log, acquired(a=[1], b=[2]), [], {}, [], **BOUNDS, observe=(0.0, 30.0))
    assert window.max_gap_s == 20.0 and window.gaps_s == [5.0, 1.0, 20.0]
    nobody = ck.check("", {}, [], {}, [], **BOUNDS, observe=(0.0, 30.0))
    assert nobody.max_gap_s == 30.0


def test_a_tree_runs_until_its_last_descendant_stops():
    # a's CMD ends at 5.0, but its descendant (root 10) runs until b's tree starts.
    tree = cmdlog(("start", 1, "a", 10, 1.0), ("end", 1, "a", 10, 5.0))
    tree += "start 1 a 11 1.1 10\nhb 1 a 11 6.0 10\n"
    tree += cmdlog(("start", 2, "b", 20, 7.0), ("end", 2, "b", 20, 9.0))
    tree += "start 2 b 21 7.1 20\n"
    early = ck.check(tree, acquired(a=[1], b=[2]), [], {11: 7.5, 21: 9.0}, [], **BOUNDS)
    assert kinds(early) == ["overlap"], early.violations
    assert abs(early.max_tree_tail_s - 2.5) < 1e-6
    ok = ck.check(tree, acquired(a=[1], b=[2]), [], {11: 6.9, 21: 9.0}, [], **BOUNDS)
    assert ok.ok(), ok.violations  # members of one tree may overlap each other
    unended = ck.check(tree, acquired(a=[1], b=[2]), [], {21: 9.0}, [], **BOUNDS)
    assert "unended" in kinds(unended)
    stray = ck.check("start 1 a 11 1.1 10\n", acquired(a=[1]), [], {}, [], **BOUNDS)
    assert kinds(stray) == ["cmdlog"]  # a descendant of an unknown tree


# -- the fence workload's checker (check_fence), on hand-made logs


def attempts(*rows: tuple) -> list[ck.Attempt]:
    """rows: (kind, term, seq, node, t_start, t_end); pid 100 + term."""
    text = "".join(f"{k} {term} {seq} {node} {100 + term} {t0:.6f} {t1:.6f}\n"
                   for k, term, seq, node, t0, t1 in rows)
    return ck.parse_fence_log(text)


CLEAN = [("ack", 1, 1, "a", 1.0, 1.1), ("ack", 1, 2, "a", 1.2, 1.3),
         ("fenced", 1, 3, "a", 5.0, 5.1),  # a zombie's write after b's first: refused
         ("ack", 2, 1, "b", 4.0, 4.1), ("error", 2, 2, "b", 4.2, 4.3)]


def test_fence_clean_run_passes():
    rep = ck.check_fence(attempts(*CLEAN), b"1 1 a\n1 2 a\n2 1 b\n")
    assert rep.ok(), rep.violations
    assert (rep.acked, rep.lines, rep.fenced, rep.zombie_refused, rep.terms) == (3, 3, 1, 1, 2)


def test_fence_unacknowledged_lines_may_be_there_or_not():
    # b's errored write landed (a lost answer): its line may be in the object.
    rep = ck.check_fence(attempts(*CLEAN), b"1 1 a\n1 2 a\n2 1 b\n2 2 b\n")
    assert rep.ok(), rep.violations


def fence_kinds(rep: ck.FenceReport) -> list[str]:
    return sorted({v.split(":")[0] for v in rep.violations})


def test_fence_lost_acknowledged_append_is_caught():
    rep = ck.check_fence(attempts(*CLEAN), b"1 1 a\n2 1 b\n")
    assert fence_kinds(rep) == ["lost"], rep.violations
    assert "'1 2 a'" in rep.violations[0]
    assert fence_kinds(ck.check_fence(attempts(*CLEAN), None)) == ["lost"]


def test_fence_term_going_down_is_caught():
    rep = ck.check_fence(attempts(*CLEAN), b"1 1 a\n2 1 b\n1 2 a\n")
    assert fence_kinds(rep) == ["order"], rep.violations


def test_fence_zombie_write_accepted_after_successor_is_caught():
    # a froze after its read, b wrote at 4.1, a's write began at 5.0 and was
    # accepted: b's append is gone and a's term follows b's nowhere.
    rows = [r for r in CLEAN if r[0] != "fenced"] + [("ack", 1, 3, "a", 5.0, 5.1)]
    rep = ck.check_fence(attempts(*rows), b"1 1 a\n1 2 a\n1 3 a\n")
    assert fence_kinds(rep) == ["lost", "zombie"], rep.violations
    # Even when the object kept the successor's line (the zombie appended to
    # it), an older term after a newer one is caught twice over.
    rep = ck.check_fence(attempts(*rows), b"1 1 a\n1 2 a\n2 1 b\n1 3 a\n")
    assert fence_kinds(rep) == ["order", "zombie"], rep.violations
    # A write of the older term that began before the newer term's first
    # write ended is no zombie's (they raced; the store ordered them).
    early = [r for r in CLEAN if r[0] != "fenced"] + [("ack", 1, 3, "a", 4.05, 4.2)]
    rep = ck.check_fence(attempts(*early), b"1 1 a\n1 2 a\n1 3 a\n2 1 b\n")
    assert rep.ok() and rep.zombie_attempts == 0, rep.violations


def test_fence_object_lines_must_come_from_attempts_once():
    rep = ck.check_fence(attempts(*CLEAN), b"1 1 a\n1 2 a\n2 1 b\n2 1 b\n9 9 z\nbad\n")
    assert fence_kinds(rep) == ["duplicate", "object"], rep.violations


def test_fence_malformed_log_is_refused():
    for bad in ("ack 1 1 a 101 1.0\n", "won 1 1 a 101 1.0 1.1\n", "ack x 1 a 101 1.0 1.1\n"):
        try:
            ck.parse_fence_log(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
