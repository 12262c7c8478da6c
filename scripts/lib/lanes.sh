#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The lane machinery of scripts/test, sourced by it: what runs beside what,
# the logs and the summary. scripts/test keeps the suite table (suite_NAME,
# ALL_SUITES, WAIT_SUITES, PAIRS) and run_suite; this file runs them.
#
#   background jobs  bg_start/bg_wait/bg_stop_all: the simulation shards of
#                    suite c, the dist suite's builds, kube-apiserver's build
#                    and the side-by-side lane
#   pytest_pair      one suite as two pytest sessions side by side
#   the lane         the suites that mostly wait, a child run of scripts/test
#                    beside the ones that mostly compute
#   run_suites       the run: every suite of SUITES in order, then the summary
#
# Reads scripts/test's globals root, jobs, SUITES, WAIT_SUITES, PAIRS and
# lane_child; sets log_dir, summary and failed.
# shellcheck disable=SC2154 # those globals are scripts/test's

log_dir=$root/build-logs
mkdir -p "$log_dir"
declare -a summary=()
failed=0

# summarize NAME EXIT-STATUS TIMING LINE LOG: the summary line of one suite
# (LINE: its runner's summary line; LOG: where to look when there is none).
summarize() {
    if [ "$2" -eq 0 ]; then
        summary+=("PASS $1 ($3): ${4:-ok}")
    else
        failed=1
        summary+=("FAIL $1 ($3, exit $2): ${4:-see $5}")
    fi
}

# Background jobs. bg_start NAME CMD...: CMD in the background, in a session
# of its own (its process group is then out of reach of a terminal's Ctrl-C,
# and bg_stop_all stops all of it when the run ends early); its output in
# build-logs/NAME.log, and "EXIT-STATUS SECONDS" in build-logs/NAME.rc when
# it ends. bg_wait NAME waits for that and sets bg_rc and bg_secs. A job may
# be started in a subshell of the run (suite c's, in run_suite's pipeline):
# build-logs/NAME.pid holds the run's $$ and the job's process group, so
# that the run itself can wait for it and stop it.
bg_start() {
    local name=$1
    shift
    rm -f "$log_dir/$name.rc"
    # setsid execs (a child of this shell leads no group yet): $! leads the
    # new session's process group, whose every process is the job's
    # shellcheck disable=SC2016 # expanded by that bash
    setsid bash -c '"${@:3}" </dev/null >"$1" 2>&1; echo "$? $SECONDS" >"$2"' "bg-$name" \
        "$log_dir/$name.log" "$log_dir/$name.rc" "$@" </dev/null >/dev/null 2>&1 &
    echo "$$ $!" >"$log_dir/$name.pid"
}
bg_pid() { # NAME: the job's process group if this run started it
    local run pid
    read -r run pid 2>/dev/null <"$log_dir/$1.pid" && [ "$run" = $$ ] && echo "$pid"
}
bg_started() { [ -n "$(bg_pid "$1")" ]; }
bg_wait() {
    while [ ! -s "$log_dir/$1.rc" ]; do sleep 2; done
    read -r bg_rc bg_secs <"$log_dir/$1.rc"
    rm -f "$log_dir/$1.pid"
}
# SIGTERM to the group of every job still running; pytest ends a session on
# it as on Ctrl-C (tests/conftest.py): its fixtures' teardown stops the
# servers and nodes it started (in sessions of their own, out of reach of a
# signal to this group). Whatever is left in the groups after 30 s: SIGKILL.
bg_stop_all() {
    local f name p i
    local -a groups=()
    for f in "$log_dir"/*.pid; do
        name=$(basename "$f" .pid)
        p=$(bg_pid "$name") || continue
        rm -f "$f"
        [ -s "$log_dir/$name.rc" ] && continue
        kill -TERM -- "-$p" 2>/dev/null && groups+=("$p")
    done
    for ((i = 0; i < 60 && ${#groups[@]} > 0; i++)); do
        for p in "${!groups[@]}"; do
            kill -0 -- "-${groups[$p]}" 2>/dev/null || unset "groups[$p]"
        done
        [ ${#groups[@]} -gt 0 ] && sleep 0.5
    done
    for p in "${groups[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
    return 0
}

# The simulation shards of suite c (ctest -L sim: about 40 CPU-minutes, all
# CPU and no waiting), clang-tidy and the ABI guard's self-test (ctest -L
# background: 6 and 3 minutes, CPU too) run in the background at nice 10
# beside the suites that follow: those mostly wait on leases and servers, so
# these use idle CPU instead of holding up suite c, and a waking test process
# preempts them. Their result is the line "c-sim" of the summary; the run
# waits for them at the end. S3LECT_SIM_BACKGROUND=0 runs them inside suite c.
sim_background() { [ "${S3LECT_SIM_BACKGROUND:-1}" = 1 ]; }
start_sim() { # BUILD-DIR
    echo "suite c: the simulation shards, clang-tidy and abi_selftest run in the background (log $log_dir/c-sim.log)"
    bg_start c-sim nice -n 10 bash -c "$(declare -f ctest_in); jobs=$jobs; ctest_in '$1' -L '^(sim|background)\$'"
}
finish_sim() {
    bg_started c-sim || return 0
    echo
    echo "==== suite c-sim: waiting for the background simulation shards"
    bg_wait c-sim
    cat "$log_dir/c-sim.log"
    summarize c-sim "$bg_rc" "${bg_secs}s in the background" \
        "$(grep -E "tests passed|tests failed" "$log_dir/c-sim.log" | tail -n 1)" "$log_dir/c-sim.log"
}

# The dist suite's slow part, the release artifacts of both architectures
# (scripts/dist: cross toolchains and dependencies, about 17 minutes cold,
# under a minute warm) and the clean roots (tests/dist/prepare.py: about 8
# minutes cold), is built in the background at nice 19 (and idle I/O
# priority) from the start of the run, beside the suites that mostly wait (as
# the simulation shards are); suite dist, the last, waits for it
# (wait_dist_build). S3LECT_DIST_BACKGROUND=0 builds them inside suite dist;
# S3LECT_DIST_DIR=DIR tests DIR's artifacts instead.
start_dist_build() {
    [[ " ${SUITES[*]} " == *" dist "* ]] && [ -z "${S3LECT_DIST_DIR:-}" ] &&
        [ "${S3LECT_DIST_BACKGROUND:-1}" = 1 ] || return 0
    echo "test: the dist suite's artifacts and roots are built in the background (log $log_dir/dist-build.log)"
    bg_start dist-build nice -n 19 ionice -c 3 python3 "$root/tests/dist/prepare.py" --dist "$root/dist"
}
wait_dist_build() { # fails if the build failed
    echo "suite dist: waiting for the background build of the artifacts and roots"
    bg_wait dist-build
    echo "suite dist: the background build took ${bg_secs}s (exit $bg_rc); its log:"
    cat "$log_dir/dist-build.log"
    [ "$bg_rc" -eq 0 ]
}

# kube-apiserver, the k8s:// store's test server (tests/harness/
# kube_apiserver.py), is built once from the Go module proxy
# (scripts/kube-apiserver-install: about 13 minutes on 2 cores, then cached
# in ${S3LECT_CACHE:-~/.cache/s3lect}/bin): in the background at nice 19 (and
# idle I/O priority) from the start of a run with a suite that starts it
# (KUBE_SUITES), as the dist suite's build. Nothing waits for the job here:
# the harness waits (bounded, S3LECT_KUBE_BUILD_WAIT) when a test first needs
# the binary, in this run or in the side-by-side lane, and fails naming
# S3LECT_KUBE_BUILD_LOG when the build failed; the script holds a lock while
# it builds, so a second one waits instead of building again. Its result is
# the summary's "kube-build" line. S3LECT_KUBE_BACKGROUND=0: no background
# build (the tests then fail, saying how to build it, without the binary).
KUBE_SUITES="stores chaos interop python go lua"
start_kube_build() {
    local s need=0
    [ "$lane_child" != 1 ] && [ "${S3LECT_KUBE_BACKGROUND:-1}" = 1 ] || return 0
    for s in "${SUITES[@]}"; do
        [[ " $KUBE_SUITES " == *" $s "* ]] && need=1
    done
    [ $need = 1 ] || return 0
    export S3LECT_KUBE_BUILD_LOG=$log_dir/kube-build.log
    echo "test: kube-apiserver (the k8s store's test server) is built in the background if it is not cached (log $S3LECT_KUBE_BUILD_LOG)"
    bg_start kube-build nice -n 19 ionice -c 3 "$root/scripts/kube-apiserver-install"
}
finish_kube_build() {
    bg_started kube-build || return 0
    bg_wait kube-build
    summarize kube-build "$bg_rc" "${bg_secs}s in the background" \
        "$(grep -E "^kube-apiserver-install: " "$log_dir/kube-build.log" | tail -n 1)" \
        "$log_dir/kube-build.log"
}

# pytest_pair NAME: suite NAME as two pytest sessions side by side over the
# paths PAIRS[NAME] names, each with its own base directory (and so its own
# servers on their own ports): for suites whose tests mostly wait on leases
# and servers. The tests marked second_session (tests/conftest.py) run in the
# second, the others in the first (tests/cli/test_runner_splits.py checks
# that both have tests). Shows the first's output as it comes, then the
# second's; fails if either failed.
pytest_pair() {
    local name=$1
    local -a paths
    read -ra paths <<<"${PAIRS[$name]}"
    local alog=$log_dir/$name-a.log blog=$log_dir/$name-b.log arc=0 brc=0
    local tmp=${TMPDIR:-/tmp}/s3lect-pytest-$name
    python3 -m pytest -q --basetemp="$tmp-b" -m second_session "${paths[@]}" >"$blog" 2>&1 &
    local bpid=$!
    python3 -m pytest -q --basetemp="$tmp-a" -m "not second_session" "${paths[@]}" 2>&1 | tee "$alog"
    arc=${PIPESTATUS[0]}
    wait "$bpid" || brc=$?
    echo "---- the other session (-m second_session ${paths[*]}):"
    cat "$blog"
    local la lb
    la=$(grep -E "[0-9]+ (passed|failed)" "$alog" | tail -n 1)
    lb=$(grep -E "[0-9]+ (passed|failed)" "$blog" | tail -n 1)
    echo "$name suite: ${la:-?} + ${lb:-?}: $([ "$arc" -eq 0 ] && [ "$brc" -eq 0 ] && echo PASS || echo FAILED)"
    [ "$arc" -eq 0 ] && [ "$brc" -eq 0 ]
}

# Side by side. The suites that mostly wait (WAIT_SUITES: on leases,
# failovers, servers: real processes with 3 s leases) run in a second lane, a
# child run of scripts/test, beside the ones that mostly compute (the
# sanitizer and self-contained builds, the bindings' builds and tests): one
# after the other they took 47 minutes, side by side about 30
# (docs/testing.md, Time). The lane starts once suite c has built build/,
# which both use; the computing lane then runs at nice 10, so that a waking
# node of a waiting test preempts a compiler at once (the waiting tests'
# bounds are about leases, not CPU). Its result is a summary line per suite,
# as if it ran here; its output is printed at the end. Suite c starts it
# as soon as build/ is built (before the C tests, which mostly wait too).
# S3LECT_SIDE_BY_SIDE=0 runs every suite here, in order.
lane=()
start_lane() {
    [ ${#lane[@]} -gt 0 ] && ! bg_started lane || return 0
    echo
    echo "==== suites ${lane[*]}: side by side with the others (log $log_dir/lane.log, printed at the end)"
    bg_start lane env S3LECT_LANE_CHILD=1 "$root/scripts/test" "${lane[@]}"
    renice 10 -p $$ "$BASHPID" >/dev/null 2>&1 || true
}
finish_lane() {
    bg_started lane || return 0
    echo
    echo "==== suites ${lane[*]} (side by side): waiting for them"
    bg_wait lane
    local line in_summary=0
    sed '/^==== summary$/,$d' "$log_dir/lane.log"
    while IFS= read -r line; do
        if [ "$line" = "==== summary" ]; then in_summary=1; continue; fi
        [ $in_summary = 1 ] && [[ "$line" == PASS* || "$line" == FAIL* ]] &&
            summary+=("$line (side by side)")
    done <"$log_dir/lane.log"
    echo "---- the side-by-side lane took ${bg_secs}s (exit $bg_rc)"
    [ "$bg_rc" -eq 0 ] || failed=1
}

# run_suites: every suite of SUITES (run_suite NAME suite_NAME), those of the
# lane beside the others; then the summary. Exits 1 if any failed.
run_suites() {
    local s l
    if [ "$lane_child" != 1 ] && [ "${S3LECT_SIDE_BY_SIDE:-1}" = 1 ]; then
        for s in "${SUITES[@]}"; do
            [[ " $WAIT_SUITES " == *" $s "* ]] && lane+=("$s")
        done
    fi
    trap bg_stop_all EXIT
    start_dist_build
    start_kube_build
    [[ " ${SUITES[*]} " == *" c "* ]] || start_lane
    for s in "${SUITES[@]}"; do
        [[ " ${lane[*]} " == *" $s "* ]] && continue
        run_suite "$s" "suite_$s"
        [ "$s" = c ] && start_lane
    done
    finish_lane
    finish_sim
    finish_kube_build

    echo
    echo "==== summary"
    for l in "${summary[@]}"; do echo "$l"; done
    if [ "$failed" -ne 0 ]; then
        echo "test: some suites FAILED (logs in $log_dir)"
        exit 1
    fi
    echo "test: all ${#SUITES[@]} suites passed"
}
