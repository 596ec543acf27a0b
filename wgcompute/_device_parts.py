"""Parts of runtime's Device: the current device (``with d:``, a context variable per thread and
asyncio task), the recording section, ``synchronize()`` and the count of its buffers' memory."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque

from ._args import check_timeout
from .errors import ArgumentError, DeviceError
from .errors import TimeoutError as WgTimeoutError

log = logging.getLogger("wgcompute")

# the device of the innermost `with d:` block, and the tokens that restore the one before
current: contextvars.ContextVar = contextvars.ContextVar("wgcompute_device", default=None)
_entered: contextvars.ContextVar[tuple] = contextvars.ContextVar("wgcompute_entered",
                                                                 default=())


def held_as(dev, hold_clocks):
    """``dev`` (an adapter's open device) if its clocks are held as ``hold_clocks`` asks (None:
    as they are), else the ArgumentError that says so."""
    if hold_clocks is None or dev.clocks_held == hold_clocks:
        return dev
    making = dev._clocks._thread  # the default's hold, made on a thread of its own
    if hold_clocks and making is not None:
        making.join()
        if dev.clocks_held:
            return dev
    state = "held" if dev.clocks_held else "not held"
    raise ArgumentError(f"hold_clocks={hold_clocks}: {dev.label} is open with its clocks "
                        f"{state}, and wgc.device() hands out an adapter's open device; close "
                        f"it first, or open another device with new=True")


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class DeviceParts:
    """What runtime.Device inherits from here (it sets ``_init_memory()`` going)."""

    __slots__ = ()

    # -- the current device --------------------------------------------------------------------
    def __enter__(self):
        """``with d:`` makes d the current device for the block (per thread and asyncio task,
        as ``use_device`` does); leaving it restores the previous one. d stays open."""
        self.check("dev")
        _entered.set((*_entered.get(), current.set(self)))
        return self

    def __exit__(self, *exc) -> None:
        tokens = _entered.get()
        if tokens:  # (an __exit__ without its __enter__ in this context restores nothing)
            _entered.set(tokens[:-1])
            current.reset(tokens[-1])

    # -- recording -------------------------------------------------------------------------------
    def begin_work(self, argument: str = "device") -> None:
        """Enter the section between the check of this device and the submit of what a thread
        records (command buffers naming bind groups, pipelines and buffers by handle), and
        check the device: close() waits for every thread inside to leave (``end_work()``, in a
        ``finally``) before it releases or destroys anything, and refuses new entries.
        Raises DeviceError / DeviceLostError (without entering) if the device is closed or
        lost. The hot paths (run_kernel, submit) inline these two list operations."""
        self._recording.append(None)  # first enter, then look: close() does the reverse
        if not self.alive:
            self._recording.pop()
            self.check(argument)

    def end_work(self) -> None:
        self._recording.pop()

    def _wait_recorders(self, limit: float) -> None:
        """Wait (at most ``limit`` s) until no thread is between its check and its submit."""
        if not self._recording:
            return
        deadline = time.monotonic() + limit
        while self._recording:
            if time.monotonic() >= deadline:
                log.warning("wgcompute: closing %s while %d thread(s) have been recording work "
                            "on it for %.0f s; closing anyway", self.label,
                            len(self._recording), limit)
                return
            time.sleep(2e-4)

    # -- waiting for the device's work ---------------------------------------------------------
    def synchronize(self, timeout: float | None = None) -> None:
        """Block until the work given to this device so far has completed: the operators it
        queued, what its streams were given and everything submitted to its queue (a failed
        command's error stays with its Command). Raises TimeoutError after ``timeout`` s,
        DeviceError if the device is closed or lost."""
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        # a stream's threads submit the operators recorded before their own work, so only the
        # device's check comes first
        self.check()
        # streams: what their threads were given (the WeakSet iterated only when not empty)
        for obj in list(self._closables) if self._closables else ():
            drain = getattr(obj, "_wait", None)
            if getattr(obj, "finish_on_close", False) and drain is not None:
                drain(_left(deadline))
        running = [c for c in list(self.commands.values()) if c.status == "running"] \
            if self.commands else ()
        lazy, ops, box, done = self.lazy, [], None, False
        try:
            self.begin_work()
            try:
                # queued operators go first, without a fence of their own (the wait below
                # covers them); a kept error of theirs raises
                if lazy is not None:
                    if lazy.capture is not None:
                        lazy.capture.saw_submit()
                    if lazy.due():
                        ops, box = lazy.flush_waited()
                        error, lazy.error = lazy.error, None
                        if error is not None:
                            raise error
                if box is None:  # the work-done callback of everything submitted so far
                    box = self.submitter.arm_sync()
            finally:
                self.end_work()
            try:
                error = self.submitter.wait_sync(box, _left(deadline))
            except TimeoutError:
                raise WgTimeoutError(f"synchronize: {self.label} did not finish within "
                                     f"{timeout} s") from None
            done = True
        finally:
            if ops:
                lazy.let_go(ops, done)
        if error is not None:
            raise self.wrap(error, "synchronize")
        for c in running:  # host work after the GPU (readbacks) ends these
            if not c._wait_done(_left(deadline)):
                raise WgTimeoutError(f"synchronize: {c!r} did not finish within {timeout} s")
        self.after_wait()

    def flush(self) -> None:
        """Submit the operators queued on this device (the GPU starts on them; nothing
        waits); an error of queued work raises here."""
        lazy = self.lazy
        if lazy is not None and lazy.due():
            lazy.before_submit()

    def _end_batch(self, run: bool) -> None:
        """Closing or lost: the queued operators are submitted (``run``; an error of theirs
        has no one left to read it) or dropped, letting go of their buffers."""
        lazy = self.lazy
        if lazy is None:
            return
        if run:
            try:
                lazy.flush()
            except DeviceError:  # refused on the way (closing): what is left is dropped
                lazy.drop()
            lazy.error = None
        else:
            lazy.drop()

    # -- memory --------------------------------------------------------------------------------
    def _init_memory(self) -> None:
        # Bytes of live buffers' memory and their peak. A free appends its bytes to _unused
        # (atomic: a Buffer's __del__ may run inside _mem_lock's section on this thread), which
        # the next allocation or memory_stats() subtracts.
        self._used = self._peak = self._count = 0
        self._unused: deque = deque()
        self._mem_lock = threading.Lock()

    def track(self, buf) -> None:
        """A new Buffer owns ``buf._gpu``'s memory on this device (counted until untrack)."""
        self._buffers.add(buf)
        unused = self._unused
        with self._mem_lock:
            while unused:  # (_settle, inline: this runs for every new buffer)
                self._used -= unused.popleft()
                self._count -= 1
            self._used += buf._gpu.size
            self._count += 1
            if self._used > self._peak:
                self._peak = self._used

    def untrack(self, nbytes: int) -> None:
        """A tracked buffer's ``nbytes`` of memory were freed. Never waits (see _unused)."""
        self._unused.append(nbytes)

    def _settle(self) -> None:  # with _mem_lock held
        unused = self._unused
        while unused:
            self._used -= unused.popleft()
            self._count -= 1

    def memory_stats(self) -> dict:
        """GPU memory wgcompute holds on this device, in bytes: ``used`` by live buffers,
        ``peak_used`` (the most at once since the device opened), ``pooled`` (freed operator
        results kept for reuse, at most ``pool_limit``; ``release_memory_pool()`` gives them
        back), ``staging_free`` (idle transfer staging); and the counts ``buffers``,
        ``pooled_buffers``, ``pool_hits``, ``pool_misses``. Never waits on the GPU (one
        non-blocking poll first: what finished work held is counted where it went)."""
        self.submitter.reap()
        with self._mem_lock:
            self._settle()
            used, peak, count = self._used, self._peak, self._count
        pool = self.memory_pool.stats()
        return {"used": used, "peak_used": peak, "pooled": pool["held_bytes"],
                "pool_limit": pool["limit_bytes"], "staging_free": self.staging.free_bytes(),
                "buffers": count, "pooled_buffers": pool["buffers"], "pool_hits": pool["hits"],
                "pool_misses": pool["misses"]}
