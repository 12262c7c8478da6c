# SPDX-License-Identifier: Apache-2.0
"""Life cycle: context manager, garbage collection, interpreter exit."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading
import time
import weakref

import s3lect
from pyutil import FAST, wait_until


def test_context_manager_starts_and_stops(s3_lock, s3_settings):
    lost = []
    el = s3lect.Elector(s3_lock, server_id="a", on_lose=lambda t, r: lost.append(r),
                        **FAST, **s3_settings)
    assert not el.started
    with el as same:
        assert same is el and el.started
        assert el.wait_for_leadership(timeout=15)
    assert el.stopped and not el.is_leader
    assert lost == [s3lect.LostReason.STOPPED]
    assert "stopped" in repr(el)


def test_garbage_collected_elector_is_stopped_and_released(electors, s3_lock, s3_settings):
    lease = 20.0
    kw = dict(FAST, lease_timeout=lease, renew_deadline=3.0, **s3_settings)
    a = s3lect.Elector(s3_lock, server_id="a", **kw).start()
    assert a.wait_for_leadership(timeout=15)
    b = electors(s3_lock, server_id="b", **kw).start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a")
    ref = weakref.ref(a)
    t0 = time.monotonic()
    del a
    gc.collect()
    assert ref() is None, "the Elector is kept alive by its own callbacks"
    assert b.wait_for_leadership(timeout=10)
    assert time.monotonic() - t0 < 10, "the collected elector did not release the lock"


def test_elector_in_a_reference_cycle_dropped_on_another_thread(electors, s3_lock, s3_settings):
    kw = dict(FAST, lease_timeout=20.0, renew_deadline=3.0, **s3_settings)
    holder = {}
    a = s3lect.Elector(s3_lock, server_id="a", on_acquire=lambda t, h=holder: h.get("el"), **kw)
    a.start()
    holder["el"] = a
    holder["self"] = holder  # a cycle only the cyclic GC can free
    assert a.wait_for_leadership(timeout=15)
    b = electors(s3_lock, server_id="b", **kw).start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a")
    ref = weakref.ref(a)
    del a, holder

    t = threading.Thread(target=gc.collect)
    t.start()
    t.join(20)
    assert not t.is_alive(), "garbage collection hung"
    # The Elector is referenced by its own on_acquire closure, which the C side
    # holds: a cycle through C that the GC cannot see. Documented: such an
    # Elector lives (and leads) until stop() or interpreter exit.
    el = ref()
    assert el is not None and el.is_leader
    el.stop()
    assert b.wait_for_leadership(timeout=10)


def test_dropping_the_last_reference_inside_its_own_callback(electors, s3_lock, s3_settings):
    box = {}
    done = threading.Event()

    def on_acquire(term):
        box.clear()  # drops the last strong reference on the dispatcher thread
        gc.collect()
        done.set()

    a = s3lect.Elector(s3_lock, server_id="a", on_acquire=on_acquire, **FAST, **s3_settings)
    ref = weakref.ref(a)
    box["el"] = a
    a.start()
    del a
    assert done.wait(15), "on_acquire never ran"
    wait_until(lambda: ref() is None, 10, "the Elector to be collected")
    b = electors(s3_lock, server_id="b", **s3_settings).start()
    # Freed on a helper thread (it cannot join its own dispatcher): released, so b leads fast.
    assert b.wait_for_leadership(timeout=10)


def test_interpreter_exit_with_running_electors_does_not_hang(minio, s3_lock, tmp_path):
    script = textwrap.dedent(f"""
        import threading, s3lect
        kw = dict(endpoint={minio.endpoint!r}, access_key_id={minio.access_key!r},
                  secret_access_key={minio.secret_key!r}, region="us-east-1",
                  lease_timeout=3, frequent_interval=0.5, infrequent_interval=1)
        els = [s3lect.Elector({s3_lock!r}, server_id=f"n{{i}}",
                              on_lose=lambda t, r: print("lost", r, flush=True), **kw)
               for i in range(3)]
        for e in els:
            e.start()
        import time
        deadline = time.monotonic() + 20
        while not any(e.is_leader for e in els):
            assert time.monotonic() < deadline, "no leader"
            time.sleep(0.05)
        # an elector dropped on a thread, one never started, one in a cycle
        t = threading.Thread(target=lambda: els.pop())
        t.start(); t.join()
        s3lect.Elector("file://{tmp_path}/x", server_id="idle")
        cyc = [s3lect.Elector("file://{tmp_path}/y", server_id="cyc").start()]
        cyc.append(cyc)
        print("exiting", flush=True)
    """)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "exiting" in p.stdout and "lost stopped" in p.stdout, p.stdout + p.stderr
    assert time.monotonic() - t0 < 30
    assert "Exception ignored" not in p.stderr and "Fatal" not in p.stderr, p.stderr
