"""Command and Status: one piece of submitted GPU work, polled, waited on or awaited on its
fence, and the lookup of a command (or the record of a finished one) by its id."""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import weakref
from collections.abc import Generator
from enum import StrEnum
from typing import Any, Generic, TypeVar

import numpy as np

from . import _queue
from ._args import check_timeout
from .buffer import Buffer
from .errors import ArgumentError, CommandFailedError, WgComputeError
from .errors import TimeoutError as WgTimeoutError
from .runtime import Device, open_devices

_ids = itertools.count(1)
_KEEP_FINISHED = 10_000  # finished commands a device remembers by id (status and error)
_R = TypeVar("_R")  # what wait() returns: the output Buffer, a numpy array (reads) or None


class Status(StrEnum):
    """A command's state; a str, so ``status == "completed"`` works."""

    PENDING = "pending"  # created, not yet handed to the GPU queue
    RUNNING = "running"  # submitted; the GPU has not reached its fence
    COMPLETED = "completed"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class Command(Generic[_R]):
    """Handle of asynchronous GPU work on one device. ``poll()``/``status``/``done()`` never
    block; ``wait()`` does; ``await cmd`` suspends only the awaiting task. The result (an
    output buffer, an array) lives as long as the Command object."""

    def __init__(self, label: str, device: Device, buffers=(), result=None):
        self.id = next(_ids)
        self.label = label
        self.device = device
        self._fence: _queue.Fence | None = None
        self._error: BaseException | None = None
        self._buffers = [b for b in buffers if b is not None]
        self._result = result
        self._callbacks: list = []
        self._lock = threading.Lock()
        self._done = False
        self._done_event: threading.Event | None = None  # made only for a blocking wait
        pinned = 0
        try:
            for b in self._buffers:  # hold first, then check (a free() racing this defers)
                b._pin(label, ": buffer")
                pinned += 1
        except BaseException:
            for b in self._buffers[:pinned]:
                b._release()
            raise
        device.commands[self.id] = self  # one dict operation: atomic, no lock

    def __repr__(self) -> str:
        return f"<wgc.Command {self.id} {self.label!r} {self.status.value}>"

    # -- state -----------------------------------------------------------------------------
    @property
    def status(self) -> Status:
        if self._error is not None:
            return Status.FAILED
        f = self._fence
        if f is None:
            return Status.COMPLETED if self._done else Status.PENDING
        if f.event.is_set():
            return Status.FAILED if f.error is not None else Status.COMPLETED
        return Status.RUNNING

    def poll(self) -> Status:
        return self.status

    def done(self) -> bool:
        return self.status in (Status.COMPLETED, Status.FAILED)

    @property
    def error(self) -> BaseException | None:
        if self._error is not None:
            return self._error
        f = self._fence
        return f.error if f is not None and f.event.is_set() else None

    @property
    def output(self):
        """The buffer the command writes (known when it is submitted; its contents are
        ready once the command completed), or None. Never waits."""
        return self._result if isinstance(self._result, Buffer) else None

    # -- its own transitions (only the submit path and its host work call these) -------------
    def _attach(self, fence: _queue.Fence) -> None:
        self._fence = fence
        fence.add_callback(self._finish)

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._finish()

    def _complete(self, result) -> None:
        """Host work after the GPU (a readback) delivered ``result``."""
        self._result = result
        self._finish()

    def _finish(self, _fence=None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            if self._done_event is not None:
                self._done_event.set()
            callbacks, self._callbacks = self._callbacks, []
            buffers, self._buffers = self._buffers, []
        for b in buffers:
            b._release()
        # remembered by id, weakly: a finished command keeps its result only while the user
        # keeps the Command (a table of results kept every output=None buffer alive)
        dev = self.device
        # a completed command: a weak reference alone (its record is made only if looked up
        # after the object is gone); a failed one keeps its error
        dev.finished[self.id] = weakref.ref(self) if self.error is None else _Record(self)
        dev.commands.pop(self.id, None)
        if len(dev.finished) > _KEEP_FINISHED:
            with dev._lock:
                while len(dev.finished) > _KEEP_FINISHED:
                    dev.finished.popitem(last=False)
        for fn in callbacks:
            _queue.safe_call(fn, self)

    def add_done_callback(self, fn) -> None:
        """Call ``fn(command)`` once the command completes or fails. It runs on the thread
        that saw the GPU finish (or at once if already done): keep it short."""
        if not callable(fn):
            raise ArgumentError(f"fn: expected a callable, got {type(fn).__name__}")
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        _queue.safe_call(fn, self)

    def future(self) -> concurrent.futures.Future:
        """This command as a concurrent.futures.Future, for ``concurrent.futures.wait`` and
        ``as_completed``: done when the command is, its result the command's, its exception
        the CommandFailedError ``wait()`` raises. The same Future on every call; it cannot be
        cancelled (the work is the GPU's). Never waits."""
        with self._lock:
            fut = getattr(self, "_future", None)
            if fut is not None:
                return fut
            fut = self._future = concurrent.futures.Future()
            fut.set_running_or_notify_cancel()  # running: cancel() is refused
        self.add_done_callback(lambda cmd: _settle(fut, cmd))
        flush = getattr(self.device, "flush", None)
        if self._fence is None and flush is not None:
            flush()  # operators the device still queues go to the GPU: then this one can end
        return fut

    def _wait_done(self, timeout: float | None) -> bool:
        """Block until ``_finish`` ran (a command not yet handed to the queue has no fence to
        poll); threading.Event costs 2.6 us to create, so it is made only here."""
        with self._lock:
            if self._done:
                return True
            if self._done_event is None:
                self._done_event = threading.Event()
            event = self._done_event
        return event.wait(timeout)

    # -- blocking ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> _R:
        """Block until done and return the command's result (its output buffer, if any).
        Raises CommandFailedError (with ``cause``) if it failed, TimeoutError on timeout."""
        if timeout is not None:
            timeout = check_timeout(timeout)
        if self._done and self._error is None:
            f = self._fence
            if f is None or f.error is None:
                return self._result
        if self._error is None:
            f = self._fence
            if f is None:
                if not self._wait_done(timeout):
                    raise WgTimeoutError(f"{self!r} did not start within {timeout} s")
                f = self._fence
            if f is not None:
                try:
                    finished = _queue.wait(f, timeout)
                except WgComputeError as e:  # the device died while waiting
                    self._fail(e)
                    finished = True
                if not finished:
                    raise WgTimeoutError(f"{self!r} did not finish within {timeout} s")
                self._finish()
                self.device.after_wait()
        err = self.error
        if err is not None:
            raise CommandFailedError(f"command {self.id} ({self.label}) failed: {err}", err)
        return self._result

    def result(self, timeout: float | None = None) -> _R:
        return self.wait(timeout)

    def __await__(self) -> Generator[Any, None, _R]:
        if not self.done():
            import asyncio  # here: `import wgcompute` does not load asyncio

            loop = asyncio.get_running_loop()
            fut = loop.create_future()

            def wake(_cmd):
                loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

            self.add_done_callback(wake)
            yield from fut.__await__()
        return self.wait()


def _settle(fut: concurrent.futures.Future, cmd: Command) -> None:
    err = cmd.error
    if err is None:
        fut.set_result(cmd._result)
    else:
        fut.set_exception(CommandFailedError(f"command {cmd.id} ({cmd.label}) failed: {err}",
                                             err))


class HostCommand(Command[np.ndarray]):
    """A Command completed by host work after the GPU (copying a readback out of mapped
    staging), not at a queue fence. Its result is set by that work."""

    def __init__(self, label: str, device: Device, buffers=()):
        super().__init__(label, device, buffers)
        self._started = False

    @property
    def status(self) -> Status:
        if self._error is not None:
            return Status.FAILED
        if self._done:
            return Status.COMPLETED
        return Status.RUNNING if self._started else Status.PENDING

    @property
    def error(self) -> BaseException | None:
        return self._error

    def wait(self, timeout: float | None = None) -> np.ndarray:
        timeout = check_timeout(timeout)
        if not self._wait_done(timeout):
            raise WgTimeoutError(f"{self!r} did not finish within {timeout} s")
        if self._error is not None:
            raise CommandFailedError(f"command {self.id} ({self.label}) failed: {self._error}",
                                     self._error)
        return self._result


class _Record:
    """What a device remembers of a failed command (its error, and the Command itself only
    while something else keeps it), or of a completed one whose object is gone."""

    __slots__ = ("id", "label", "status", "error", "_ref")

    def __init__(self, cmd: Command | None, cmd_id: int = 0):
        if cmd is None:  # completed, and nothing keeps its Command
            self.id, self.label, self.status, self.error = cmd_id, "", Status.COMPLETED, None
            self._ref = lambda: None
            return
        self.id = cmd.id
        self.label = cmd.label
        self.status = cmd.status
        self.error = cmd.error
        self._ref = weakref.ref(cmd)

    def command(self):
        return self._ref()

    def wait(self, timeout=None):
        check_timeout(timeout)
        if self.error is not None:
            raise CommandFailedError(f"command {self.id} ({self.label}) failed: {self.error}",
                                     self.error)
        return None  # its result went with the Command object


def lookup(cmd):
    """A Command, or the record of a finished one whose object is gone, by object or id."""
    if isinstance(cmd, Command):
        return cmd
    if isinstance(cmd, int) and not isinstance(cmd, bool):
        for dev in open_devices():
            c = dev.commands.get(cmd)
            if c is not None:
                return c
            rec = dev.finished.get(cmd)
            if rec is not None:
                if isinstance(rec, weakref.ref):  # completed
                    c = rec()
                    return c if c is not None else _Record(None, cmd)
                c = rec.command()
                return c if c is not None else rec
        raise ArgumentError(f"cmd: no command with id {cmd} (unknown, finished long ago, or "
                            f"its device was closed)")
    raise ArgumentError(f"cmd: expected a Command or its integer id, got {type(cmd).__name__}")


def poll(cmd) -> Status:
    """The command's status, without blocking: pending, running, completed or failed."""
    return lookup(cmd).status


def wait(cmd, timeout: float | None = None):
    """Block until the command is done; returns its result (see Command.wait; by id, a
    finished command whose object is gone returns None, or raises its failure)."""
    return lookup(cmd).wait(timeout)
