# SPDX-License-Identifier: Apache-2.0
"""The Elector: the Pythonic face of an s3lect_elector."""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextvars
import inspect
import logging
import os
import re
import socket
import threading
import time
import weakref
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Set,
    Tuple,
    Union,
)

from . import _config, _core
from ._config import Duration
from ._errors import (
    BusyError,
    ConfigError,
    Error,
    NotLeaderError,
    StateError,
    StoppedError,
    error_from_code,
)
from ._fence import Fence
from ._store import StoreAdapter, _current, in_store_call
from ._types import Event, EventType, LostReason, Status

__all__ = ["Elector", "EventStream"]

log = logging.getLogger("s3lect")

# Electors started and not yet stopped; stopped at interpreter exit.
_live: "weakref.WeakSet[Elector]" = weakref.WeakSet()
# Threads freeing electors that were dropped inside a callback or store call.
_reapers: Set[threading.Thread] = set()
_reapers_lock = threading.Lock()

# How long one C-level wait may block: the Python waits loop over such slices
# so that Ctrl-C (KeyboardInterrupt) and misconfiguration are noticed.
_SLICE_S = 0.25

_END = object()  # end-of-stream marker for event subscribers

#: libs3lect's default peer_health_path (the library holds it, not a copy here).
_DEFAULT_PEER_PATH = _config.default_str(_core.S3LECT_OPT_PEER_HEALTH_PATH)


def _free_handle(handle: Any) -> None:
    rc = _core.s3lect_free_elector(handle)
    if rc not in (_core.S3LECT_OK,):
        log.error("freeing an elector failed: %s", _core.s3lect_strerror(rc))


def _free_later(handle: Any) -> None:
    """Frees on a fresh thread: the current one is one of libs3lect's runtime
    threads, busy with a callback or a store call."""

    def run() -> None:
        try:
            _free_handle(handle)
        finally:
            with _reapers_lock:
                _reapers.discard(threading.current_thread())

    t = threading.Thread(target=run, name="s3lect-free", daemon=True)
    with _reapers_lock:
        _reapers.add(t)
    t.start()


@atexit.register
def _stop_all_at_exit() -> None:
    """Stops (and releases) every elector still running at interpreter exit,
    so that followers take over at once and no C thread calls into a
    finalizing interpreter."""
    for el in list(_live):
        try:
            el.stop()
        except Exception:  # noqa: BLE001 - keep stopping the others
            log.exception("stopping %r at exit failed", el)
    with _reapers_lock:
        pending = list(_reapers)
    for t in pending:
        t.join(timeout=30)


# Set (to the _Dispatch) inside the coroutine of an async callback, and so in
# the tasks and asyncio.to_thread() calls it starts: stop() there would wait
# for that very coroutine.
_async_callback: "contextvars.ContextVar[Optional[_Dispatch]]" = contextvars.ContextVar(
    "s3lect_async_callback", default=None)


def _is_async_callable(fn: Any) -> bool:
    """True for an ``async def`` function (also behind functools.partial) or
    an object whose ``__call__`` is one."""
    if fn is None:
        return False
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _in_callback(d: Optional["_Dispatch"] = None) -> bool:
    """True inside a callback of d's elector (of any elector if d is None)."""
    active = getattr(_current, "callbacks", None)
    if not active:
        return False
    return d is None or any(a is d for a in active)


def lock_display(lock: str) -> str:
    """The lock URL as logged and shown by repr(): without a user-info part,
    should one hold a secret, and with a password= parameter (postgres://)
    hidden."""
    shown = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", lock)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", shown)

class _InCallback:
    """Marks the current thread as inside one of d's callbacks."""

    def __init__(self, d: "_Dispatch") -> None:
        self.d = d

    def __enter__(self) -> None:
        active = getattr(_current, "callbacks", None)
        if active is None:
            active = _current.callbacks = []
        active.append(self.d)

    def __exit__(self, *exc: Any) -> None:
        _current.callbacks.pop()


class _Dispatch:
    """Receives every event and acquire-hook call from the C trampolines and
    calls the user's callables. They run on one of the callback threads of
    libs3lect's shared runtime, which serve every elector of the process: one
    callback at a time per elector, in order. Holds no reference to the
    Elector, so that an Elector nobody uses any more can be garbage collected
    (and stopped)."""

    def __init__(
        self,
        logger: logging.Logger,
        on_acquire: Optional[Callable[[int], Any]],
        on_lose: Optional[Callable[[int, LostReason], Any]],
        on_leader_change: Optional[Callable[[str, str, int], Any]],
        on_error: Optional[Callable[[Error], Any]],
        on_event: Optional[Callable[[Event], Any]],
        server_id: str = "",
        lock: str = "",
        on_transfer: Optional[Callable[[str, int], Any]] = None,
    ) -> None:
        self.logger = logger
        self.server_id = server_id
        self.lock_shown = lock_display(lock)
        self.on_acquire = on_acquire
        self.on_lose = on_lose
        self.on_leader_change = on_leader_change
        self.on_error = on_error
        self.on_event = on_event
        self.on_transfer = on_transfer
        # The C elector, set once it exists. Events stop before the elector
        # is freed, so it is valid whenever an event runs.
        self.handle: Any = None
        self.lock = threading.Lock()
        self.subscribers: List[Callable[[Any], None]] = []
        self.callback_errors: Deque[BaseException] = collections.deque(maxlen=16)
        self.closed = False
        self._last_logged_error: Optional[Tuple[int, str]] = None
        # asyncio: the loop that runs the awaitables callbacks return, the
        # future of the last one scheduled (the next one starts after it
        # ends: events stay in order on the loop), and a flag set once
        # stop() begins (from then on nobody waits for them on the callback
        # threads: the loop may be blocked in that stop, or awaiting it).
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.tail: Optional["concurrent.futures.Future[Any]"] = None
        self.stopping = False

    def _failed(self, name: str, exc: BaseException, extra: str = "") -> None:
        self.callback_errors.append(exc)
        self.logger.error("%s callback raised%s", name, extra, exc_info=exc)

    def _call(self, name: str, fn: Optional[Callable[..., Any]], *args: Any) -> None:
        if fn is None:
            return
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                self._await(name, result)
        except BaseException as exc:  # noqa: BLE001 - a callback must not kill the callback thread
            self._failed(name, exc)

    def _await(self, name: str, aw: Any, veto: bool = False) -> Any:
        """Runs the awaitable a callback returned on the elector's event loop
        (after the one scheduled before it) and waits for it on this callback
        thread, so that the next event is delivered only once it is done.
        Raises what it raised; for the acquire hook (veto), also when it
        could not run to its end."""
        loop = self.loop
        if loop is None or loop.is_closed():
            if inspect.iscoroutine(aw):
                aw.close()  # never "coroutine ... was never awaited"
            why = "no asyncio event loop" if loop is None else "its asyncio event loop is closed"
            raise RuntimeError(
                f"{name} returned an awaitable but the elector has {why} to run it on; "
                "start the elector from a coroutine (async with el: ...) or pass loop="
            )
        prev = self.tail
        dispatch = self

        async def run() -> Any:
            _async_callback.set(dispatch)
            try:
                if prev is not None and not prev.done():
                    # asyncio.wait raises nothing for prev's outcome, but our
                    # own cancellation still goes through.
                    await asyncio.wait([asyncio.wrap_future(prev)])
            except BaseException:
                if inspect.iscoroutine(aw):
                    aw.close()
                raise
            return await aw

        try:
            fut = asyncio.run_coroutine_threadsafe(run(), loop)
        except RuntimeError:  # the loop closed just now
            if inspect.iscoroutine(aw):
                aw.close()
            raise RuntimeError(f"{name} returned an awaitable but the elector's asyncio "
                               "event loop is closed") from None
        self.tail = fut
        if inspect.iscoroutine(aw):
            def close_unstarted(f: Any) -> None:  # cancelled before it began
                if f.cancelled() and inspect.getcoroutinestate(aw) == inspect.CORO_CREATED:
                    aw.close()
            fut.add_done_callback(close_unstarted)
        while True:
            try:
                return fut.result(timeout=_SLICE_S)
            except concurrent.futures.TimeoutError:
                pass
            except (concurrent.futures.CancelledError, asyncio.CancelledError):
                raise RuntimeError(f"the coroutine of {name} was cancelled") from None
            if self.stopping or loop.is_closed() or not loop.is_running():
                # The elector is stopping (the loop may be blocked in that
                # stop() or awaiting it) or the loop stopped: waiting could
                # deadlock. It stays scheduled, in order.
                if veto:
                    fut.cancel()
                    raise RuntimeError(
                        f"the coroutine of {name} was cancelled: "
                        + ("the elector is stopping" if self.stopping
                           else "the event loop is not running"))
                self.logger.debug("not waiting for the coroutine of %s: the event "
                                  "loop is not free to run it now", name)
                return None

    # Called by the C acquire trampoline: False vetoes.
    def hook(self, t: Tuple[Any, ...]) -> bool:
        with _InCallback(self):
            return self._hook(t)

    def _hook(self, t: Tuple[Any, ...]) -> bool:
        if self.on_acquire is None:
            return True
        ev = Event._from_core(t)
        term = ev.term if ev is not None else int(t[1])
        try:
            result = self.on_acquire(term)
            if inspect.isawaitable(result):
                self._await("on_acquire", result, veto=True)
        except BaseException as exc:  # noqa: BLE001
            self._failed("on_acquire", exc, f"; leadership of term {term} is released (veto)")
            return False
        return True

    # Called by the C event trampoline for every event type.
    def event(self, t: Tuple[Any, ...]) -> None:
        with _InCallback(self):
            self._event(t)

    def _log_change(self, ev: Event) -> None:
        """Leadership changes at INFO on the elector's logger (server id,
        lock, term, reason; never settings or credentials)."""
        extra = {"s3lect_server_id": self.server_id, "s3lect_lock": self.lock_shown,
                 "s3lect_event": ev.type.value, "s3lect_term": ev.term}
        if ev.type is EventType.ACQUIRED:
            self.logger.info("%s acquired leadership of %s (term %d)",
                             self.server_id, self.lock_shown, ev.term, extra=extra)
        elif ev.type is EventType.LOST:
            reason = ev.reason.value if ev.reason is not None else "unknown"
            extra["s3lect_reason"] = reason
            self.logger.info("%s lost leadership of %s (term %d): %s",
                             self.server_id, self.lock_shown, ev.term, reason, extra=extra)
        elif ev.type is EventType.LEADER_CHANGED:
            extra["s3lect_leader_id"] = ev.leader_id
            if ev.leader_id:
                self.logger.info("leader of %s is now %s%s (term %d)", self.lock_shown,
                                 ev.leader_id, f" at {ev.leader_addr}" if ev.leader_addr else "",
                                 ev.term, extra=extra)
            else:
                self.logger.info("%s has no leader (term %d)", self.lock_shown,
                                 ev.term, extra=extra)
        elif ev.type is EventType.TRANSFER:
            extra["s3lect_leader_id"] = ev.leader_id
            self.logger.info("%s hands leadership of %s over to %s (term %d)", self.server_id,
                             self.lock_shown, ev.leader_id, ev.term, extra=extra)

    def _no_transfer(self, target: str) -> None:
        """Without on_transfer nothing stops this node's leader work first, so
        it never hands over by itself: the transfer is abandoned (an error
        event says so) and this node keeps leading."""
        self.logger.warning("%s: asked to hand %s over to %s, but no on_transfer callback "
                            "stops this application's leader work first: not handed over "
                            "(give on_transfer and call transfer_commit() in it)",
                            self.server_id, self.lock_shown, target)

    def _event(self, t: Tuple[Any, ...]) -> None:
        ev = Event._from_core(t)
        if ev is None:
            return
        self._log_change(ev)
        if ev.type is EventType.LOST:
            self._call("on_lose", self.on_lose, ev.term, ev.reason)
        elif ev.type is EventType.LEADER_CHANGED:
            self._call("on_leader_change", self.on_leader_change, ev.leader_id, ev.leader_addr,
                       ev.term)
        elif ev.type is EventType.TRANSFER:
            if self.on_transfer is None:
                self._no_transfer(ev.leader_id)
            else:
                self._call("on_transfer", self.on_transfer, ev.leader_id, ev.term)
        elif ev.type is EventType.ERROR:
            key = (ev.code, ev.message)
            # Misconfiguration (credentials, bucket) at ERROR, the rest
            # (the elector retries) at WARNING; a repeat of the same error
            # at DEBUG (libs3lect already reports repeats at most every 30 s).
            if key == self._last_logged_error:
                level = logging.DEBUG
            elif ev.code in (_core.S3LECT_EAUTH, _core.S3LECT_EFATAL):
                level = logging.ERROR
            else:
                level = logging.WARNING
            self._last_logged_error = key
            self.logger.log(level, "%s: %s (%s)", self.server_id, ev.message,
                            _core.s3lect_strerror(ev.code),
                            extra={"s3lect_server_id": self.server_id,
                                   "s3lect_lock": self.lock_shown, "s3lect_event": "error",
                                   "s3lect_error_code": ev.code})
            self._call("on_error", self.on_error, ev.error)
        self._call("on_event", self.on_event, ev)
        self.publish(ev)

    def publish(self, item: Any) -> None:
        with self.lock:
            subs = list(self.subscribers)
        for push in subs:
            push(item)

    def subscribe(self, push: Callable[[Any], None]) -> None:
        with self.lock:
            closed = self.closed
            if not closed:
                self.subscribers.append(push)
        if closed:
            push(_END)

    def unsubscribe(self, push: Callable[[Any], None]) -> None:
        with self.lock:
            if push in self.subscribers:
                self.subscribers.remove(push)

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            subs, self.subscribers = self.subscribers, []
        for push in subs:
            push(_END)


class EventStream:
    """An async iterator over an elector's events (see :meth:`Elector.events`).

    It ends when the elector stops. Events that arrive while nobody awaits are
    queued. Close it (``await stream.aclose()`` or ``async with``) to stop
    receiving events early.
    """

    def __init__(self, dispatch: _Dispatch, loop: asyncio.AbstractEventLoop) -> None:
        self._dispatch = dispatch
        self._loop = loop
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self._done = False
        dispatch.subscribe(self._push)

    def _push(self, item: Any) -> None:  # any thread
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody will read
            self._dispatch.unsubscribe(self._push)

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is _END:
            self._done = True
            raise StopAsyncIteration
        assert isinstance(item, Event)
        return item

    async def aclose(self) -> None:
        """Stops receiving events; iteration ends."""
        self._done = True
        self._dispatch.unsubscribe(self._push)

    async def __aenter__(self) -> "EventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _default_server_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Elector:
    """Takes part in the leader election for one lock.

    Example::

        import s3lect

        def on_acquire(term):
            print("leading with fencing token", term)

        with s3lect.Elector("s3://my-bucket/leader.json", server_id="node-a",
                            on_acquire=on_acquire) as el:
            if el.wait_for_leadership(timeout=30):
                do_leader_work(el.term)

    Args:
        lock: where the lock lives: ``"s3://bucket/key"``, ``"file:///dir/key"``
            or a plain path (file store, for one host), or a key name when
            ``store`` is given.
        server_id: this node's id, recorded as ``leaderID`` (1..255 bytes).
            Default: ``"<hostname>-<pid>"``.
        server_addr: this node's advertised peer address ``"host:port"``
            (recorded as ``leaderAddr``). Optional, also in peer mode: by
            default the leadership endpoint listens on the address of the
            interface that routes to the store (``127.0.0.1`` for a file lock
            or a loopback endpoint), on ``peer_listen``'s port or a free one,
            and advertises that.
        endpoint, region, path_style, ca_file, access_key_id,
        secret_access_key, session_token, profile: S3 settings. Unset ones
            come from the environment (``AWS_ENDPOINT_URL_S3``,
            ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ...) and the AWS shared
            config files, as the AWS SDKs do.
        endpoint_url, region_name, aws_access_key_id, aws_secret_access_key,
        aws_session_token, profile_name: boto3's names of ``endpoint``,
            ``region``, ``access_key_id``, ``secret_access_key``,
            ``session_token`` and ``profile``; giving both names of one
            setting with different values raises :class:`ConfigError`.
        lease_timeout: how long a record must stay unchanged before a follower
            may take over [15 s]. When given without ``renew_deadline`` /
            ``renew_interval``, libs3lect derives them: 2/3 of it and
            min(1/3 of it, renew_deadline/2) (s3lect_config_is_set).
        renew_interval: how often the leader renews [5 s].
        renew_deadline: the leader steps down when it could not renew for this
            long [10 s]. Requires renew_interval < renew_deadline < lease_timeout.
        frequent_interval: follower poll period during transitions [5 s].
        infrequent_interval: follower poll period while leadership is stable [30 s].
        max_clock_skew: opt-in wall-clock takeover rule [0 = off]. A value
            > 0 lets a follower also take over a record whose ``lastUpdated``
            is older than lease + this, and assumes every node's wall clock
            stays within this bound of every other's, steps included: a
            larger clock step can give two leaders.
        max_lease_timeout: a record's ``leaseMs`` is read as at most this, so
            a hostile or broken record cannot block the lock for ever
            [0 = 4 x lease_timeout]. Must not be less than ``lease_timeout``;
            every node's ``lease_timeout`` must be at most every other node's
            bound. Fixed when the elector is created.
        request_timeout: timeout of one store request [10 s].
        leader_hold: how long after the send of its last successful renewal
            this node's leadership may still act -- what you run under it is
            stopped by then [0 = renew_deadline; raised to it when below].
            Written in the records as ``holdMs``: a follower never backdates
            a record by the store's clock so far that it leads before this.
        new_lock_wait: how long a node that has never seen the lock waits,
            after reading it missing, before it creates it -- a lock deleted
            (by hand, a lifecycle or TTL rule, a store that lost its data)
            while a leader this node cannot see still runs must not get a
            second leader. A brand-new lock pays it once, on its first start
            [None = lease_timeout, at least leader_hold]. 0 creates a missing
            lock at once: only where no leader of it can be running (a lock
            name never used before, a test).
        priority: this node's priority, a whole number [0, 0..1000000]. A
            follower of higher priority than its leader's that has followed
            for a lease without a break asks for the lock, and the leader
            hands it over as with :meth:`transfer` (at most once a lease).
            Equal priorities (the default) keep the plain election.
        max_hold: the longest this node leads before it hands the lock to a
            live follower, as ``transfer()`` would [0 = never]: rotation,
            to exercise failover. Without a live follower it keeps leading
            and tries again a lease later.
        max_connections, worker_threads, callback_threads: sizes of
            libs3lect's shared runtime, one per process (docs/threading.md):
            the most connections to one S3 endpoint [64, 1..1024], the
            threads that run file locks and custom stores [4, 1..64] and the
            threads that run callbacks [2, 1..64; more are added while all
            are held by slow callbacks]. Counts (``int``), not durations.
            Process-wide: the runtime grows to the largest value any started
            elector asked for. Fixed when the elector is created.
        peer_mode: serve this node's leadership over HTTPS while it leads, and
            let stable followers long-poll the leader instead of reading the
            lock from S3 (see docs/peer.md) [False]. ``peer_mode=True`` alone
            is enough (zero-config): at :meth:`start` the node makes a key
            and a self-signed certificate in memory, writes the key's SHA-256
            into the lock records it writes (``peerKeySha256``), and
            followers pin that key; no CA, certificate or ``server_addr`` is
            needed. A cluster with a CA of its own gives ``peer_ca``,
            ``peer_cert`` and ``peer_key`` instead (and ``peer_client_cert``
            for mutual TLS).
        peer_listen: the address the leadership endpoint listens on
            ``"host:port"`` [``server_addr``, else the address of the
            interface that routes to the store on a free port]; port 0 picks
            a free port (see :attr:`peer_port`).
        peer_cert, peer_key: the endpoint's certificate chain and private key
            (both or neither; neither is zero-config).
        peer_ca: the CA bundle followers verify a leader's certificate with
            (needed with ``peer_cert`` and ``peer_key``).
        peer_client_cert: this node's client certificate and key (one PEM);
            setting it turns on mutual TLS (needs ``peer_cert``, ``peer_key``
            and ``peer_ca``: zero-config does not verify clients). Every
            certificate and key setting takes PEM ``bytes``, PEM text
            (``str``) or a file path (``str``/``PathLike``).
        peer_health_path: path of the endpoint [``"/health/leadership"``].
        peer_timeout: bound of one peer check and of the release write on
            stop [3 s].
        release_on_stop: write a released record when a leader stops [True].
        store: a custom store object instead of S3/file (see :class:`s3lect.Store`).
        clock: a virtual :class:`s3lect.testing.Clock` (tests: a ``mem://``
            lock, no peer mode): the elector runs in the clock's virtual time,
            driven by ``clock.advance()`` in the calling thread, callbacks
            included (docs/testing-your-code.md).
        on_acquire: ``on_acquire(term)``, called when this node became leader,
            while the lease keeps being renewed. Raise to veto: the exception is
            logged with its traceback, the lock is released and the node backs
            off for one ``frequent_interval``.
        on_lose: ``on_lose(term, reason)`` with a :class:`s3lect.LostReason`;
            also called after a veto (reason ``hook_failed``).
        on_leader_change: ``on_leader_change(leader_id, leader_addr, term)``.
        on_error: ``on_error(error)`` with a typed :class:`s3lect.Error` for
            store or record problems (the elector keeps retrying). A problem
            that repeats is reported at once, then at most every 30 s, the
            next report saying how many similar ones were not.
        on_event: ``on_event(event)`` for every :class:`s3lect.Event`.
        on_transfer: ``on_transfer(target_id, term)``, called when this
            leader is asked to hand the lock over (:meth:`transfer`,
            ``s3lect transfer``, a follower of higher ``priority``,
            ``max_hold``) and the target confirmed it is live: stop the
            leader work, then call :meth:`transfer_commit` (in the callback
            or later, from any thread); ``on_lose(term, "transferred")``
            follows. A transfer not committed within twice the lease is
            abandoned (an error event) and this node keeps leading. Without
            ``on_transfer`` this node never hands over (nothing would stop
            its leader work before the target starts): a warning is logged
            and the transfer is abandoned.
        logger: where to log (default: the ``"s3lect"`` logger).
        loop: the asyncio event loop that runs ``async def`` callbacks
            [the loop running when :meth:`start` is called, else the one
            running when the elector was created].

    Durations are seconds (int or float) or :class:`datetime.timedelta`.
    Callbacks run on one of the callback threads of libs3lect's shared
    runtime, in order and one at a time per elector, never on the thread that
    renews the lease: a slow callback cannot cost leadership, and holds up
    only this elector's later callbacks.
    An exception in a callback is logged with its traceback and kept in
    :attr:`callback_errors`; the elector carries on.

    Any callback may be an ``async def`` function (or return an awaitable):
    its coroutine runs on the elector's event loop (``loop``; start the
    elector from a coroutine, e.g. ``async with el:``, else :meth:`start`
    raises :class:`ConfigError`), one at a time and in event order: the
    callback thread waits for it to finish before it delivers the next
    event. An async ``on_acquire`` is awaited likewise, without a time limit,
    while the lease keeps being renewed; raising vetoes, as in a plain
    ``on_acquire``, and so does its cancellation. Once :meth:`stop` begins,
    coroutines are still scheduled in order but nobody waits for them on the
    callback threads (a pending async ``on_acquire`` is cancelled):
    :meth:`stop_async` (and ``async with``) awaits them after the stop, a
    plain :meth:`stop` may return before they ran.

    Raises:
        ConfigError: for invalid settings, with a message that names the setting.
    """

    def __init__(
        self,
        lock: str,
        *,
        server_id: Optional[str] = None,
        server_addr: Optional[str] = None,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        path_style: Optional[bool] = None,
        ca_file: Optional[str] = None,
        access_key_id: Optional[str] = None,
        secret_access_key: Optional[str] = None,
        session_token: Optional[str] = None,
        profile: Optional[str] = None,
        lease_timeout: Optional[Duration] = None,
        renew_interval: Optional[Duration] = None,
        renew_deadline: Optional[Duration] = None,
        frequent_interval: Optional[Duration] = None,
        infrequent_interval: Optional[Duration] = None,
        max_clock_skew: Optional[Duration] = None,
        max_lease_timeout: Optional[Duration] = None,
        request_timeout: Optional[Duration] = None,
        leader_hold: Optional[Duration] = None,
        new_lock_wait: Optional[Duration] = None,
        priority: Optional[int] = None,
        max_hold: Optional[Duration] = None,
        max_connections: Optional[int] = None,
        worker_threads: Optional[int] = None,
        callback_threads: Optional[int] = None,
        peer_mode: Optional[bool] = None,
        peer_health_path: Optional[str] = None,
        peer_timeout: Optional[Duration] = None,
        peer_listen: Optional[str] = None,
        peer_cert: Optional[Any] = None,
        peer_key: Optional[Any] = None,
        peer_ca: Optional[Any] = None,
        peer_client_cert: Optional[Any] = None,
        release_on_stop: Optional[bool] = None,
        store: Optional[Any] = None,
        clock: Optional[Any] = None,
        on_acquire: Optional[Callable[[int], Any]] = None,
        on_lose: Optional[Callable[[int, LostReason], Any]] = None,
        on_leader_change: Optional[Callable[[str, str, int], Any]] = None,
        on_error: Optional[Callable[[Error], Any]] = None,
        on_event: Optional[Callable[[Event], Any]] = None,
        on_transfer: Optional[Callable[[str, int], Any]] = None,
        logger: Optional[logging.Logger] = None,
        loop: Optional[asyncio.AbstractEventLoop] = None,
        endpoint_url: Optional[str] = None,
        region_name: Optional[str] = None,
        aws_access_key_id: Optional[str] = None,
        aws_secret_access_key: Optional[str] = None,
        aws_session_token: Optional[str] = None,
        profile_name: Optional[str] = None,
    ) -> None:
        self._handle: Any = None
        self._started = False
        self._stopped = False
        if not isinstance(lock, (str, os.PathLike)):
            raise ConfigError(
                f"lock must be a str like 's3://bucket/key' or 'file:///dir/key', not {lock!r}"
            )
        self._lock_url = os.fspath(lock)
        s3 = _config.resolve_aliases(dict(
            endpoint=endpoint, region=region, access_key_id=access_key_id,
            secret_access_key=secret_access_key, session_token=session_token, profile=profile,
            endpoint_url=endpoint_url, region_name=region_name,
            aws_access_key_id=aws_access_key_id, aws_secret_access_key=aws_secret_access_key,
            aws_session_token=aws_session_token, profile_name=profile_name))
        endpoint, region, profile = s3["endpoint"], s3["region"], s3["profile"]
        access_key_id, secret_access_key = s3["access_key_id"], s3["secret_access_key"]
        session_token = s3["session_token"]
        if server_id is None:
            server_id = _default_server_id()
        if not isinstance(server_id, str):
            raise ConfigError(f"server_id must be a str, not {type(server_id).__name__}")
        self._server_id = server_id
        for name, fn in (
            ("on_acquire", on_acquire),
            ("on_lose", on_lose),
            ("on_leader_change", on_leader_change),
            ("on_error", on_error),
            ("on_event", on_event),
            ("on_transfer", on_transfer),
        ):
            if fn is not None and not callable(fn):
                raise ConfigError(f"{name} must be callable, not {fn!r}")
        if loop is not None and not isinstance(loop, asyncio.AbstractEventLoop):
            raise ConfigError(f"loop must be an asyncio event loop, not {loop!r}")
        self._loop = loop
        self._async_callbacks = [
            name for name, fn in (
                ("on_acquire", on_acquire),
                ("on_lose", on_lose),
                ("on_leader_change", on_leader_change),
                ("on_error", on_error),
                ("on_event", on_event),
                ("on_transfer", on_transfer),
            ) if _is_async_callable(fn)
        ]
        if store is not None and not (callable(getattr(store, "get", None))
                                      and callable(getattr(store, "put", None))):
            raise ConfigError(f"store must have get(key) and put(key, data, if_match) methods, "
                              f"not {store!r}")
        options = {
            k: v
            for k, v in dict(
                server_addr=server_addr,
                endpoint=endpoint,
                region=region,
                path_style=path_style,
                ca_file=ca_file,
                access_key_id=access_key_id,
                secret_access_key=secret_access_key,
                session_token=session_token,
                profile=profile,
                lease_timeout=lease_timeout,
                renew_interval=renew_interval,
                renew_deadline=renew_deadline,
                frequent_interval=frequent_interval,
                infrequent_interval=infrequent_interval,
                max_clock_skew=max_clock_skew,
                max_lease_timeout=max_lease_timeout,
                request_timeout=request_timeout,
                leader_hold=leader_hold,
                new_lock_wait=new_lock_wait,
                priority=priority,
                max_hold=max_hold,
                max_connections=max_connections,
                worker_threads=worker_threads,
                callback_threads=callback_threads,
                peer_mode=peer_mode,
                peer_health_path=peer_health_path,
                peer_timeout=peer_timeout,
                peer_listen=peer_listen,
                peer_cert=peer_cert,
                peer_key=peer_key,
                peer_ca=peer_ca,
                peer_client_cert=peer_client_cert,
                release_on_stop=release_on_stop,
            ).items()
            if v is not None
        }
        self._peer_health_path = peer_health_path or _DEFAULT_PEER_PATH
        self._logger = logger or log
        self._dispatch = _Dispatch(
            self._logger, on_acquire, on_lose, on_leader_change, on_error, on_event,
            server_id=self._server_id, lock=self._lock_url, on_transfer=on_transfer,
        )
        # An explicit loop=, else the loop running now (if any); start()
        # takes the loop running then instead, when there is one.
        self._dispatch.loop = loop or _running_loop()
        if clock is not None:
            from .testing import Clock  # not at import: it imports pytest where there is one
            if not isinstance(clock, Clock):
                raise ConfigError(f"clock must be an s3lect.testing.Clock, not {clock!r}")
        self._clock = clock  # the C elector holds the clock itself too
        self._handle = self._create(options, store)

    def _create(self, options: Dict[str, Any], store: Any) -> Any:
        cfg = _core.s3lect_config_new()
        if cfg is None:
            raise MemoryError("s3lect_config_new failed")
        try:
            _config.check(cfg, _core.s3lect_config_set_str(cfg, _core.S3LECT_OPT_LOCK,
                                                           self._lock_url),
                          f"lock={self._lock_url!r}")
            _config.check(cfg, _core.s3lect_config_set_str(cfg, _core.S3LECT_OPT_SERVER_ID,
                                                           self._server_id),
                          f"server_id={self._server_id!r}")
            for name, value in options.items():
                _config.apply(cfg, name, value)
            if store is not None:
                adapter = StoreAdapter(store, self._logger)
                _config.check(cfg, _core.s3lect_config_set_custom_store(cfg, adapter), "store")
            if self._clock is not None:
                _config.check(cfg, _core.s3lect_config_set_clock(cfg, self._clock._h()), "clock")
            _config.check(cfg, _core.s3lect_config_validate(cfg), "")
            rc, handle = _core.s3lect_new(cfg)
            _config.check(cfg, rc, "")
        finally:
            _core.s3lect_config_free(cfg)
        try:
            d = self._dispatch
            for etype in (
                _core.S3LECT_EVENT_ACQUIRED,
                _core.S3LECT_EVENT_LOST,
                _core.S3LECT_EVENT_LEADER_CHANGED,
                _core.S3LECT_EVENT_ERROR,
                _core.S3LECT_EVENT_CYCLE,
                _core.S3LECT_EVENT_TRANSFER,
            ):
                self._check(_core.s3lect_set_callback(handle, etype, d.event), handle)
            self._check(_core.s3lect_set_acquire_hook(handle, d.hook), handle)
            d.handle = handle
        except BaseException:
            _core.s3lect_free_elector(handle)
            raise
        return handle

    # ---- construction from the environment ----

    @classmethod
    def from_env(
        cls, lock: Optional[str] = None, *, environ: Optional[Mapping[str, str]] = None,
        **kwargs: Any
    ) -> "Elector":
        """Creates an Elector from environment variables; keyword arguments win.

        The variables and their syntax are libs3lect's, the same for every
        front end (``s3lect run`` too): ``S3LECT_<OPTION>`` for each option
        that has one (``S3LECT_LOCK``, ``S3LECT_SERVER_ID`` or ``S3LECT_ID``,
        ``S3LECT_LEASE_TIMEOUT=15s``, ``S3LECT_WORKER_THREADS=8``,
        ``S3LECT_PEER_LISTEN``, ...; docs/cli.md lists them), parsed
        by libs3lect with the CLI's syntax (``"500ms"``, ``"2s"``,
        ``"1m30s"``; a bare number other than 0 is refused as ambiguous). An
        empty variable is unset. The store's own variables (``AWS_REGION``,
        ``AWS_ENDPOINT_URL_S3``, ``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
        ``GOOGLE_APPLICATION_CREDENTIALS``, ...) are read by libs3lect from the
        process's environment when the store opens, as for any Elector.

        Args:
            lock: the lock URL; default ``$S3LECT_LOCK``.
            environ: a mapping to read the S3LECT_* variables from instead of
                the process's environment (the store's own variables still
                come from the process's environment).
            **kwargs: any :class:`Elector` argument (boto3's names such as
                ``endpoint_url`` and ``region_name`` too); overrides the
                environment.
        """
        settings = _config.env_settings(environ)
        if lock is not None:
            settings["lock"] = lock
        # boto3-style names in kwargs become ours first, so that they too
        # override the environment (and clash only with each other).
        settings.update(_config.resolve_aliases(dict(kwargs)))
        if not settings.get("lock"):
            raise ConfigError("no lock given: pass lock='s3://bucket/key' or set S3LECT_LOCK")
        url = settings.pop("lock")
        return cls(url, **settings)

    # ---- life cycle ----

    def _h(self) -> Any:
        h = self._handle
        if h is None:
            raise StateError("this Elector was closed")
        return h

    def _check(self, rc: int, handle: Any = None) -> None:
        if rc == _core.S3LECT_OK:
            return
        h = handle if handle is not None else self._handle
        msg = (_core.s3lect_py_errmsg(h) if h is not None else "") or _core.s3lect_strerror(rc)
        raise error_from_code(rc, msg)

    def start(self) -> "Elector":
        """Starts taking part in the election (run by libs3lect's shared runtime); returns self.

        Raises:
            StateError: if already started, or stopped (an Elector cannot be
                restarted; create a new one).
        """
        h = self._h()
        if self._stopped:
            raise StateError("this Elector was stopped and cannot be restarted; create a new one")
        if self._started:
            raise StateError("this Elector is already started")
        d = self._dispatch
        if self._loop is None:
            running = _running_loop()
            if running is not None:
                d.loop = running
        if self._async_callbacks and (d.loop is None or d.loop.is_closed()):
            names = ", ".join(self._async_callbacks)
            why = "no asyncio event loop" if d.loop is None else "a closed asyncio event loop"
            raise ConfigError(
                f"{names}: async callbacks need an asyncio event loop to run on, and this "
                f"elector has {why}: create or start it from a coroutine (e.g. "
                "'async with el:' inside asyncio.run(...)), or pass loop=<a running loop>"
            )
        self._check(_core.s3lect_start(h))
        self._started = True
        _live.add(self)
        return self

    def stop(self, release: bool = True) -> None:
        """Stops the elector; idempotent, any thread but its own callbacks and
        custom store functions.

        If this node leads, it stops leading at once, writes a released record
        so that a follower takes over without waiting for the lease to expire
        (bounded by ``peer_timeout``), and ``on_lose(term, "stopped")`` runs
        before this returns. Pending callbacks are delivered before it returns.

        Args:
            release: False skips writing the released record, as a crash would;
                followers then take over only after ``lease_timeout``.

        Raises:
            BusyError: when called from one of this elector's callbacks, or
                from a custom store's get() or put() (of any elector: the
                stop could wait for the worker thread that runs the call).
        """
        h = self._handle
        if h is None or self._stopped:
            return
        d = self._dispatch
        # From now on the callback threads schedule the coroutines of async
        # callbacks (in order) without waiting for them: the loop that runs
        # them may be this very thread, or wait for this stop (stop_async
        # awaits them after the stop instead).
        d.stopping = True
        try:
            rc = _core.s3lect_stop(h) if release else _core.s3lect_stop_no_release(h)
        except BaseException:
            d.stopping = False
            raise
        if rc != _core.S3LECT_OK:
            d.stopping = False
        if rc == _core.S3LECT_EBUSY:
            if in_store_call():
                raise BusyError(
                    "stop() was called from a custom store's get() or put(), where it could "
                    "wait for the worker thread running that call; call it from another thread"
                )
            raise BusyError(
                "stop() was called from one of this elector's own callbacks, where it would "
                "deadlock; call it from another thread"
            )
        self._check(rc)
        self._stopped = True
        _live.discard(self)
        self._dispatch.close()

    def close(self) -> None:
        """Same as :meth:`stop`; for ``contextlib.closing``."""
        self.stop()

    def __enter__(self) -> "Elector":
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        h = self.__dict__.get("_handle")
        if h is None:
            return
        self._handle = None
        try:
            _live.discard(self)
            if _in_callback() or in_store_call():
                # Dropped on a runtime thread that is running a callback or a
                # store call: freeing here could wait for that very thread.
                _free_later(h)
            elif _core.s3lect_free_elector(h) == _core.S3LECT_EBUSY:
                _free_later(h)
        except Exception:  # noqa: BLE001 - interpreter shutdown: modules may be gone
            pass

    # ---- state ----

    @property
    def lock(self) -> str:
        """The lock URL (or key, with a custom store)."""
        return self._lock_url

    @property
    def server_id(self) -> str:
        """This node's server id."""
        return self._server_id

    @property
    def started(self) -> bool:
        """True once :meth:`start` succeeded (stays True after stop)."""
        return self._started

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` completed."""
        return self._stopped

    @property
    def is_leader(self) -> bool:
        """True if this node holds a valid lease now (computed at call time)."""
        return bool(_core.s3lect_is_leader(self._h()))

    @property
    def term(self) -> int:
        """The highest term seen or written: the fencing token while leader."""
        return int(_core.s3lect_term(self._h()))

    @property
    def leader_id(self) -> str:
        """The current leader's server id; "" if none is known."""
        return _core.s3lect_py_leader_id(self._h()) or ""

    @property
    def cycle(self) -> int:
        """Number of completed election cycles."""
        return int(_core.s3lect_cycle(self._h()))

    @property
    def last_error(self) -> str:
        """The elector's last detailed error message ("" if none)."""
        return _core.s3lect_py_errmsg(self._h()) or ""

    @property
    def callback_errors(self) -> List[BaseException]:
        """Exceptions raised by callbacks (most recent last, at most 16 kept);
        each carries its ``__traceback__``."""
        return list(self._dispatch.callback_errors)

    def status(self) -> Status:
        """A consistent snapshot of the elector's state (a frozen dataclass)."""
        h = self._h()
        rc, st = _core.s3lect_get_status(h)
        self._check(rc)
        try:
            return Status._from_core(st)
        finally:
            _core.s3lect_status_free(st)

    def status_json(self) -> str:
        """The status as JSON (the body a peer leadership endpoint serves)."""
        rc, text = _core.s3lect_status_json(self._h())
        self._check(rc)
        return text or "{}"

    # ---- handing over ----

    def transfer(self, to: Optional[str] = None) -> None:
        """Asks this leader to hand the lock to the follower whose server id
        is ``to`` (None: the best live follower, one of higher ``priority``
        first). Returns at once: the request travels in the lock record, the
        target confirms it is live, then ``on_transfer(target_id, term)``
        runs here (stop the leader work and call :meth:`transfer_commit`).
        A target that does not confirm within about a lease is refused: an
        error event (``on_error``) says why and this node keeps leading.

        Raises:
            NotLeaderError: this elector does not lead.
            ConfigError: ``to`` is this node's own id or not a valid id.
            BusyError: a transfer is being committed already.
            UnsupportedError: the store's reads may be stale (Route 53).
        """
        if to is not None and not isinstance(to, str):
            raise ConfigError(f"transfer(to): to must be a server id (str) or None, not {to!r}")
        h = self._h()
        rc = _core.s3lect_transfer(h, to)
        if rc == _core.S3LECT_ENOTLEADER:
            raise NotLeaderError(f"transfer(): {self._server_id} does not lead "
                                 f"{lock_display(self._lock_url)}; only its leader can hand it over",
                                 rc)
        if rc == _core.S3LECT_EBUSY:
            raise BusyError("transfer(): a transfer is being committed already", rc)
        self._check(rc)

    def transfer_commit(self) -> None:
        """After ``on_transfer``, once the leader work has stopped: hands the
        lock over. This node stops leading at once
        (``on_lose(term, "transferred")``) and the target leads. Any thread,
        this elector's callbacks included.

        Raises:
            StateError: no confirmed transfer is pending (refused, abandoned,
                or leadership was lost meanwhile).
        """
        rc = _core.s3lect_transfer_commit(self._h())
        if rc == _core.S3LECT_EINVAL:
            raise StateError("transfer_commit(): no confirmed transfer is pending (it was "
                             "refused or abandoned, or leadership was lost meanwhile)", rc)
        self._check(rc)

    # ---- fenced writes ----

    def fence(self) -> Fence:
        """A :class:`Fence` for this elector's writes to other objects
        (docs/fencing.md): its term while it leads, its server id as the
        holder, its store settings (credentials, endpoint). Each write raises
        :class:`~s3lect.NotLeaderError`, before anything is sent, while it
        does not lead. Never blocks; close the fence (or use ``with``)."""
        h = self._h()
        rc, fh = _core.s3lect_fence_new(h)
        if rc != _core.S3LECT_OK:
            raise error_from_code(rc, "s3lect_fence_new failed")
        return Fence(fh, self)

    def fence_token(self) -> Optional[str]:
        """The fence token of this leadership
        (``"s3lect-fence.1.TERM.HOLDER.LOCK"``) for a process that writes on
        its behalf (:meth:`Fence.from_token`); None while it does not lead."""
        return _core.s3lect_py_fence_token(self._h()) or None

    # ---- peer mode ----

    def peer_response(self, target: Optional[str] = None,
                      method: str = "GET") -> Tuple[int, str]:
        """Answers one request to the leadership endpoint, as the built-in
        HTTPS server would, so that your own HTTP server can serve it.

        Example with :mod:`http.server`::

            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    status, body = el.peer_response(self.path, "GET")
                    data = body.encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        Args:
            target: the request target, path and query, e.g.
                ``"/health/leadership?wait=5000&etag=%22...%22"``. Default: the
                configured ``peer_health_path``. With ``wait`` and the current
                ``etag`` the call is a long poll: it blocks (without the GIL)
                until the leader renews, leadership ends or ``wait`` ms pass.
            method: ``"GET"`` or ``"HEAD"`` (for HEAD, send no body); any
                other method gives 405.

        Returns:
            ``(status, body)``: 200 and the lock record as JSON (``leaderID``,
            ``leaderAddr``, ``term``, ``etag``, ...) while this node leads;
            404 when it does not lead or for another path; 405 for another
            method; 400 for a malformed target. ``body`` is always JSON.

        Raises:
            BusyError: when called from one of this elector's callbacks (a
                long poll there would stall its later callbacks), or from a
                custom store's get() or put() (of any elector).
        """
        if target is None:
            target = self._peer_health_path
        if not isinstance(target, str) or not isinstance(method, str):
            raise TypeError("peer_response(target, method) takes two str")
        if _in_callback(self._dispatch) or in_store_call():
            raise BusyError(
                "peer_response() was called from one of this elector's callbacks or from a "
                "custom store function; call it from your HTTP server's threads"
            )
        rc, status, body = _core.s3lect_peer_response(self._h(), method, target)
        self._check(rc)
        return int(status), body or ""

    def enable_peer_mode(self, ca: Union[bytes, str, "os.PathLike[str]"]) -> None:
        """Turns peer mode on, started or not, with the CA bundle that
        verifies a leader's certificate: as a follower this node then asks
        the leader over HTTPS instead of reading S3 while leadership is
        stable (a leader whose record names its key, ``peerKeySha256``, is
        pinned instead). ``server_addr`` must be set. On a running elector
        with ``peer_cert`` and ``peer_key`` the leadership endpoint starts
        too; before :meth:`start` the settings must make a valid peer-mode
        configuration, as ``peer_mode=True`` with this ``peer_ca`` would:
        ``peer_cert`` and ``peer_key`` (the endpoint serves them) or neither
        (zero-config: the endpoint serves a key made at start).

        To turn peer mode on from the start, ``peer_mode=True`` alone is
        enough; this method is for clusters with a CA of their own.

        Args:
            ca: PEM ``bytes``, PEM text, or the path of a PEM file.

        Raises:
            ConfigError: no ``server_addr``, before start a certificate
                without its key (or the reverse) or a ``peer_client_cert``
                without a certificate, an unreadable file or an empty CA.
        """
        pem = _config.read_pem("ca", ca)
        if not self._started:
            # Checked now as the settings would be at construction: start()
            # takes them as they are.
            cfg = _core.s3lect_get_config(self._h())
            if cfg is None:
                raise MemoryError("s3lect_get_config failed")
            try:
                _config.check(cfg, _core.s3lect_config_set_bool(
                    cfg, _core.S3LECT_OPT_PEER_MODE, 1), "peer_mode")
                _config.check(cfg, _core.s3lect_config_set_bytes(
                    cfg, _core.S3LECT_OPT_PEER_CA, pem), "ca")
                _config.check(cfg, _core.s3lect_config_validate(cfg), "enable_peer_mode()")
            finally:
                _core.s3lect_config_free(cfg)
        self._check(_core.s3lect_enable_peer_mode(self._h(), pem))

    @property
    def peer_port(self) -> int:
        """The port the leadership endpoint listens on; 0 when not serving
        (not started, stopped, or no peer mode)."""
        return int(_core.s3lect_peer_port(self._h()))

    def get_config(self) -> Dict[str, Any]:
        """The elector's current settings (durations in seconds, counts as ints; secrets read as "")."""
        cfg = _core.s3lect_get_config(self._h())
        if cfg is None:
            raise MemoryError("s3lect_get_config failed")
        try:
            return _config.read(cfg)
        finally:
            _core.s3lect_config_free(cfg)

    # The options s3lect_update_config applies (libs3lect's facts).
    _TIMINGS = _config.RUNTIME_NAMES

    def update_config(self, **timings: Duration) -> None:
        """Changes timing settings of a running (or stopped) elector.

        Accepts ``lease_timeout``, ``renew_interval``, ``renew_deadline``,
        ``frequent_interval``, ``infrequent_interval``, ``max_clock_skew``,
        ``peer_timeout`` and ``request_timeout``; the new values are checked
        together with the current ones (a ``lease_timeout`` above the
        elector's ``max_lease_timeout`` is refused). ``max_lease_timeout``
        itself is fixed at creation.

        Raises:
            ConfigError: for unknown names or an invalid combination (nothing changes).
        """
        if "max_lease_timeout" in timings:
            raise ConfigError(
                "max_lease_timeout cannot change on an existing elector (libs3lect applies "
                "it when the elector is created); create a new elector"
            )
        fixed = sorted(set(timings) & _config.PROCESS_WIDE_NAMES)
        if fixed:
            raise ConfigError(
                f"{', '.join(fixed)} cannot change on an existing elector: the sizes of "
                "libs3lect's shared runtime are taken when an elector starts; create a new elector"
            )
        unknown = set(timings) - self._TIMINGS
        if unknown:
            raise ConfigError(
                f"update_config() changes only timing settings ({', '.join(sorted(self._TIMINGS))}); "
                f"got {', '.join(sorted(unknown))}"
            )
        h = self._h()
        cfg = _core.s3lect_get_config(h)
        if cfg is None:
            raise MemoryError("s3lect_get_config failed")
        try:
            for name, value in timings.items():
                _config.apply(cfg, name, value)
            rc = _core.s3lect_update_config(h, cfg)
            if rc == _core.S3LECT_EINVAL:
                detail = (_core.s3lect_py_config_errmsg(cfg) or _core.s3lect_py_errmsg(h)
                          or _core.s3lect_strerror(rc))
                raise ConfigError(detail, rc)
            self._check(rc)
        finally:
            _core.s3lect_config_free(cfg)

    # ---- waiting ----

    def _require_started(self) -> Any:
        h = self._h()
        if not self._started:
            raise StateError("the elector is not started: call start() or use 'with elector:'")
        return h

    def _raise_if_misconfigured(self) -> None:
        """Waiting is pointless while the store refuses us: raise instead."""
        st = self.status()
        if st.consecutive_failures > 0 and st.last_error_code in (
            _core.S3LECT_EAUTH,
            _core.S3LECT_EFATAL,
        ):
            raise error_from_code(st.last_error_code, st.last_error or self.last_error)

    @staticmethod
    def _deadline(timeout: Optional[Duration]) -> Optional[float]:
        if timeout is None:
            return None
        return time.monotonic() + _config.to_ms("timeout", timeout) / 1000.0

    @staticmethod
    def _slice_ms(deadline: Optional[float]) -> int:
        if deadline is None:
            return int(_SLICE_S * 1000)
        left = deadline - time.monotonic()
        return max(0, int(min(left, _SLICE_S) * 1000))

    def _wait_leader_slice(self, h: Any, ms: int) -> Optional[bool]:
        rc = _core.s3lect_wait_for_leadership(h, ms)
        if rc == _core.S3LECT_OK:
            return True
        if rc == _core.S3LECT_ESTOPPED:
            raise StoppedError("the elector is stopped; it will not become leader")
        if rc != _core.S3LECT_ETIMEDOUT:
            self._check(rc)
        self._raise_if_misconfigured()
        return None

    def wait_for_leadership(self, timeout: Optional[Duration] = None) -> bool:
        """Blocks until this node is leader.

        Args:
            timeout: seconds or timedelta; None waits as long as it takes.

        Returns:
            True when leader, False if ``timeout`` passed first.

        Raises:
            StoppedError: if the elector is or gets stopped.
            AuthError, FatalStoreError: when the store keeps refusing us
                (wrong credentials, missing bucket): waiting would be in vain.
            StateError: if the elector was not started.
        """
        h = self._require_started()
        deadline = self._deadline(timeout)
        while True:
            ms = self._slice_ms(deadline)
            if self._wait_leader_slice(h, ms):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def _wait_next_slice(self, h: Any, since: int, ms: int) -> bool:
        rc, _cycle = _core.s3lect_wait_for_next_election(h, since, ms)
        if rc == _core.S3LECT_OK:
            return True
        if rc == _core.S3LECT_ESTOPPED:
            raise StoppedError("the elector is stopped; no further elections")
        if rc != _core.S3LECT_ETIMEDOUT:
            self._check(rc)
        return False

    def wait_for_next_election(self, timeout: Optional[Duration] = None) -> bool:
        """Blocks until the next election cycle completes (a read or write of
        the lock by this node and the decision that followed it).

        Returns:
            True when a cycle completed, False if ``timeout`` passed first.

        Raises:
            StoppedError: if the elector is or gets stopped.
        """
        h = self._require_started()
        since = int(_core.s3lect_cycle(h))
        deadline = self._deadline(timeout)
        while True:
            if self._wait_next_slice(h, since, self._slice_ms(deadline)):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    # ---- asyncio ----

    async def wait_for_leadership_async(self, timeout: Optional[Duration] = None) -> bool:
        """``await``-able :meth:`wait_for_leadership`; the event loop keeps running.

        Cancelling the awaiting task stops the wait within a fraction of a second.
        """
        h = self._require_started()
        loop = asyncio.get_running_loop()
        deadline = self._deadline(timeout)
        while True:
            ms = self._slice_ms(deadline)
            if await loop.run_in_executor(None, self._wait_leader_slice, h, ms):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    async def wait_for_next_election_async(self, timeout: Optional[Duration] = None) -> bool:
        """``await``-able :meth:`wait_for_next_election`."""
        h = self._require_started()
        loop = asyncio.get_running_loop()
        since = int(_core.s3lect_cycle(h))
        deadline = self._deadline(timeout)
        while True:
            ms = self._slice_ms(deadline)
            if await loop.run_in_executor(None, self._wait_next_slice, h, since, ms):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def events(self) -> EventStream:
        """An async iterator of this elector's :class:`Event` s, from now on::

            async for ev in el.events():
                if ev.type is s3lect.EventType.ACQUIRED: ...

        Must be called with an event loop running (inside a coroutine). The
        iteration ends when the elector stops.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("Elector.events() must be called from a coroutine") from None
        self._h()
        return EventStream(self._dispatch, loop)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def __aenter__(self) -> "Elector":
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop_async()

    async def stop_async(self, release: bool = True) -> None:
        """``await``-able :meth:`stop`: stops on a worker thread while the
        event loop keeps running, so that the coroutines of async callbacks
        (``on_lose(term, "stopped")`` among them) run to their end before it
        returns. ``async with el:`` stops this way."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.stop, release)
        d = self._dispatch
        tail = d.tail
        if (tail is not None and d.loop is loop and _async_callback.get() is not d):
            # (Called from one of our own async callbacks, the tail would
            # include the caller itself.)
            await asyncio.wait([asyncio.wrap_future(tail)])

    def __repr__(self) -> str:
        state = "closed"
        if self._handle is not None:
            if self._stopped:
                state = "stopped"
            elif not self._started:
                state = "new"
            else:
                state = "leader" if self.is_leader else "follower"
        return (f"<s3lect.Elector lock={lock_display(self._lock_url)!r} server_id={self._server_id!r} "
                f"{state}>")
