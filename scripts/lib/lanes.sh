#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The lane machinery of scripts/test, sourced by it: what runs beside what
# (the background simulation shards, the background dist build, two pytest
# sessions of one suite, the side-by-side lane) and the logs and summary
# lines of each. Uses scripts/test's globals: root, jobs, log_dir, SUITES,
# lane_child, summary, failed (and ctest_in).

# The simulation shards of suite c (ctest -L sim: about 10 CPU-minutes, all
# CPU and no waiting) run in the background at nice 10 beside the suites that
# follow: those mostly wait on leases and servers, so the shards use idle CPU
# instead of adding their own 5 minutes, and a waking test process preempts
# them. Their result is the line "c-sim" of the summary; the run waits for
# them at the end. S3LECT_SIM_BACKGROUND=0 runs them inside suite c.
sim_bg=${S3LECT_SIM_BACKGROUND:-1}
sim_rc=$log_dir/c-sim.rc
sim_log=$log_dir/c-sim.log

# Waits for the background simulation shards and records their summary line.
finish_sim() {
    [ "$sim_bg" = 1 ] && [[ " ${SUITES[*]} " == *" c "* ]] || return 0
    echo
    echo "==== suite c-sim: waiting for the background simulation shards"
    while [ ! -s "$sim_rc" ]; do sleep 2; done
    local rc secs line
    read -r rc secs <"$sim_rc"
    cat "$sim_log"
    line=$(grep -E "tests passed|tests failed" "$sim_log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        summary+=("PASS c-sim (${secs}s in the background): ${line:-ok}")
    else
        failed=1
        summary+=("FAIL c-sim (${secs}s in the background, exit $rc): ${line:-see $sim_log}")
    fi
}

# pytest_pair NAME A-ARGS... -- B-ARGS...: two pytest sessions side by side,
# each with its own base directory (and so its own servers on their own
# ports): for suites whose tests mostly wait on leases and servers. Shows A's
# output as it comes, then B's; fails if either failed.
pytest_pair() {
    local name=$1 x in_b=0
    shift
    local -a a=() b=()
    for x in "$@"; do
        if [ "$x" = "--" ] && [ $in_b = 0 ]; then in_b=1; continue; fi
        if [ $in_b = 1 ]; then b+=("$x"); else a+=("$x"); fi
    done
    local alog=$log_dir/$name-a.log blog=$log_dir/$name-b.log arc=0 brc=0
    local tmp=${TMPDIR:-/tmp}/s3lect-pytest-$name
    python3 -m pytest -q --basetemp="$tmp-b" "${b[@]}" >"$blog" 2>&1 &
    local bpid=$!
    python3 -m pytest -q --basetemp="$tmp-a" "${a[@]}" 2>&1 | tee "$alog"
    arc=${PIPESTATUS[0]}
    wait "$bpid" || brc=$?
    echo "---- the other session (${b[*]}):"
    cat "$blog"
    local la lb
    la=$(grep -E "[0-9]+ (passed|failed)" "$alog" | tail -n 1)
    lb=$(grep -E "[0-9]+ (passed|failed)" "$blog" | tail -n 1)
    echo "$name suite: ${la:-?} + ${lb:-?}: $([ "$arc" -eq 0 ] && [ "$brc" -eq 0 ] && echo PASS || echo FAILED)"
    [ "$arc" -eq 0 ] && [ "$brc" -eq 0 ]
}

# The dist suite's slow part, the release artifacts of both architectures
# (scripts/dist: cross toolchains and dependencies, about 17 minutes cold,
# under a minute warm) and the clean roots (tests/dist/prepare.py: about 8
# minutes cold), is built in the background at nice 19 (and idle I/O priority) from the start of the
# run, beside the suites that mostly wait (as the simulation shards are);
# suite dist, the last, waits for it. S3LECT_DIST_BACKGROUND=0 builds them
# inside suite dist; S3LECT_DIST_DIR=DIR tests DIR's artifacts instead.
dist_bg_rc=$log_dir/dist-build.rc
dist_bg_log=$log_dir/dist-build.log
dist_bg_pid=""
start_dist_build() {
    [[ " ${SUITES[*]} " == *" dist "* ]] && [ -z "${S3LECT_DIST_DIR:-}" ] &&
        [ "${S3LECT_DIST_BACKGROUND:-1}" = 1 ] || return 0
    rm -f "$dist_bg_rc"
    echo "test: the dist suite's artifacts and roots are built in the background (log $dist_bg_log)"
    # its own session, so that an interrupted run stops all of it
    (
        start=$SECONDS
        setsid nice -n 19 ionice -c 3 python3 "$root/tests/dist/prepare.py" --dist "$root/dist" \
            </dev/null >"$dist_bg_log" 2>&1
        echo "$? $((SECONDS - start))" >"$dist_bg_rc"
    ) &
    dist_bg_pid=$!
}
stop_dist_build() {
    [ -n "$dist_bg_pid" ] && [ ! -s "$dist_bg_rc" ] || return 0
    local p # setsid's process (then nice's, then python's) leads the group
    p=$(pgrep -P "$dist_bg_pid" | head -n 1)
    [ -n "$p" ] && kill -TERM -- "-$p" 2>/dev/null
    return 0
}

# Side by side. The suites that mostly wait (on leases, failovers, servers:
# real processes with 3 s leases) run in a second lane, a child run of this
# script, beside the ones that mostly compute (the sanitizer and self-contained
# builds, the bindings' builds and tests): one after the other they took 47
# minutes, side by side about 30 (docs/testing.md, Time). The lane starts once
# suite c has built build/, which both use; the computing lane then runs at
# nice 10, so that a waking node of a waiting test preempts a compiler at
# once (the waiting tests' bounds are about leases, not CPU). Its result is a
# summary line per suite, as if it ran here; its output is printed at the end.
# S3LECT_SIDE_BY_SIDE=0 runs every suite here, in order.
WAIT_SUITES=" cli s3 stores peer chaos interop "
lane=()
if [ "$lane_child" != 1 ] && [ "${S3LECT_SIDE_BY_SIDE:-1}" = 1 ]; then
    for s in "${SUITES[@]}"; do
        [[ "$WAIT_SUITES" == *" $s "* ]] && lane+=("$s")
    done
fi
lane_log=$log_dir/lane.log
lane_rc=$log_dir/lane.rc
lane_pid=""
start_lane() {
    [ ${#lane[@]} -gt 0 ] && [ -z "$lane_pid" ] || return 0
    rm -f "$lane_rc"
    echo
    echo "==== suites ${lane[*]}: side by side with the others (log $lane_log, printed at the end)"
    # its own session, so that an interrupted run stops all of it
    (
        start=$SECONDS
        S3LECT_LANE_CHILD=1 setsid "$root/scripts/test" "${lane[@]}" </dev/null >"$lane_log" 2>&1
        echo "$? $((SECONDS - start))" >"$lane_rc"
    ) &
    lane_pid=$!
    renice 10 -p $$ >/dev/null 2>&1 || true
}
stop_lane() {
    [ -n "$lane_pid" ] && [ ! -s "$lane_rc" ] || return 0
    local p i
    p=$(pgrep -P "$lane_pid" | head -n 1)
    [ -n "$p" ] || return 0
    # pytest ends a session on SIGTERM as on Ctrl-C (tests/conftest.py): its
    # fixtures' teardown stops the servers and nodes it started (in sessions
    # of their own, out of reach of a signal to this group). Whatever is
    # left in the group after 30 s: SIGKILL.
    kill -TERM -- "-$p" 2>/dev/null
    for i in $(seq 60); do
        kill -0 -- "-$p" 2>/dev/null || return 0
        sleep 0.5
    done
    kill -KILL -- "-$p" 2>/dev/null
    return 0
}
finish_lane() {
    [ -n "$lane_pid" ] || return 0
    echo
    echo "==== suites ${lane[*]} (side by side): waiting for them"
    while [ ! -s "$lane_rc" ]; do sleep 2; done
    local rc secs line in_summary=0
    read -r rc secs <"$lane_rc"
    sed '/^==== summary$/,$d' "$lane_log"
    while IFS= read -r line; do
        if [ "$line" = "==== summary" ]; then in_summary=1; continue; fi
        [ $in_summary = 1 ] && [[ "$line" == PASS* || "$line" == FAIL* ]] &&
            summary+=("$line (side by side)")
    done <"$lane_log"
    echo "---- the side-by-side lane took ${secs}s (exit $rc)"
    [ "$rc" -eq 0 ] || failed=1
}
