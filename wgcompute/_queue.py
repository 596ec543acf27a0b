"""Fences and the submitter of one device: every submission that needs one gets a real fence,
completed by the queue's work-done callback as the GPU reaches it; waiters poll for it.

Why not block in ``wgpuDevicePoll(wait=True)``: in wgpu-native 29 a blocking poll holds the
device's fence lock while it waits, so every submit from any other thread stalls until the GPU
is idle (a 4 us submit took 3.6 s behind a long kernel). Progress therefore comes from
*non-blocking* polls only: wgpu-py's poll thread for the device (its poll function swapped for a
non-blocking poll plus a short sleep) keeps polling while a fence or map is pending, and
``wait_event`` polls in the caller. Synchronous runs (run_kernel, Pipeline.run) wait on a
per-thread box the work-done callback writes: no Fence, no pending-queue entry, no lock."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from .errors import DeviceError, DeviceLostError

log = logging.getLogger("wgcompute")

_POLL_SLEEP = 50e-6  # background poll period while work is pending (s)
_IDLE_SLEEP = 1e-3  # the poll thread's period while a caller polls in wait_event (s)
_SPIN = 200  # polls a waiter makes before it looks at the clock
_SPIN_TIME = 1e-3  # a waiter polls without sleeping this long (s): a 100-stage pipeline
#                    finishes within it, and a sleep costs ~60 us of latency
_NAP_FRACTION = 0.01  # then it sleeps this fraction of the time waited so far between polls
_MAX_NAP = 5e-4  # (s)
_LINGER = 2e-3  # the poll thread keeps polling this long after the last fence completed (s)
_PROBE_EVERY = 0.25  # a long wait checks this often that the device still exists (s)


class Flag:
    """``is_set()`` / ``set()`` of a threading.Event without its Condition (2.6 us to create):
    nothing blocks on a fence's flag, waiters poll."""

    __slots__ = ("_set",)

    def __init__(self):
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True


class _Loss:
    """``epoch`` counts the device losses wgpu reported; a Submitter whose ``seen_epoch``
    differs has its device probed (``probe``) before it waits on."""

    epoch = 0


LOSS = _Loss()

# Guards every fence's callbacks and completion: one lock for all of them, because a lock of
# their own would be made per submission and most fences never get a callback.
_fence_lock = threading.Lock()


class Fence:
    """Completion of one queue submission of ``submitter``'s device. ``event`` is set once the
    GPU finished it (or the device was lost: then ``error`` says so)."""

    __slots__ = ("index", "event", "error", "_callbacks", "submitter")

    def __init__(self, submitter: Submitter | None = None):
        self.index = 0
        self.event = Flag()
        self.error: BaseException | None = None
        self._callbacks: list | None = None
        self.submitter = submitter

    def done(self) -> bool:
        return self.event.is_set()

    def add_callback(self, fn) -> None:
        """Call ``fn(fence)`` once done, from the thread that polled (or now, if done)."""
        with _fence_lock:
            if not self.event.is_set():
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        safe_call(fn, self)

    def _finish(self, error: BaseException | None) -> None:
        with _fence_lock:
            if self.event.is_set():  # several pollers may get here
                return
            self.error = error
            self.event.set()
            callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for fn in callbacks:
                try:  # safe_call, inlined: this runs once per submission
                    fn(self)
                except Exception:  # a user callback must never break the poller
                    log.exception("wgcompute: a completion callback raised")

    @classmethod
    def completed(cls, error: BaseException | None = None) -> Fence:
        f = cls()
        f._finish(error)
        return f


def safe_call(fn, arg) -> None:
    try:
        fn(arg)
    except Exception:  # a user callback must never break the poller
        log.exception("wgcompute: a completion callback raised")


def _nap(start: float) -> None:
    """A waiter's pause between polls, ``start`` being when it began to wait: none for the
    first _SPIN_TIME, then 1% of the time waited so far (50 to 500 us), so a long wait costs
    little CPU and ends at most ~1% (or 0.5 ms) late."""
    waited = time.perf_counter() - start
    if waited > _SPIN_TIME:
        time.sleep(min(_MAX_NAP, max(_POLL_SLEEP, waited * _NAP_FRACTION)))


class Submitter:
    """Submits command buffers for one device (its ``link``) and tracks their fences in order.
    ``dead`` holds the error once the device is lost or closed: pending fences fail with it
    and waiters stop waiting."""

    def __init__(self, link, label: str = "device"):
        self.link = link
        self.label = label
        self.dead: BaseException | None = None
        self.probe = None  # set by the device: checks whether a reported loss was this device
        self.seen_epoch = LOSS.epoch
        # one entry per thread polling in wait_event (the poll thread then stands by);
        # list.append / list.pop are atomic, so no lock
        self.waiting: list = []
        # Reentrant: a work-done callback of an earlier fence may fire inside a wgpu call made
        # while this lock is held (submit), and completes fences under it.
        self._lock = threading.RLock()
        self._pending: deque[Fence] = deque()
        self._token = None  # keeps the poll thread polling while fences are pending
        self._idle_since = 0.0  # when the last pending fence completed
        self.submissions = 0
        self._last = 0  # the last submission's index
        self._notifier = link.notifier(self._work_done)
        self._local = threading.local()
        self._orphans: list = []  # sync boxes whose callback is still to come
        link.install_poller(self._background_poll)

    def _work_done(self, index: int, ok: bool) -> None:
        error = None if ok else DeviceError(
            "the GPU could not finish this submission (device lost?)")
        self.complete_through(index, error)

    def _background_poll(self, block: bool) -> None:
        """wgpu-py's poll thread's function: sleep first (right after a submit woke this
        thread its caller is often about to wait, and poll, itself), stand aside while a
        caller polls in wait_event (two threads polling fight over the GIL and wgpu-native's
        locks: on lavapipe that doubled the tiny-kernel round trip, 110 -> 190 us)."""
        time.sleep(_POLL_SLEEP)
        while self.waiting:
            time.sleep(_IDLE_SLEEP)
        if self.dead is None:
            self.link.poll()
        self.release_idle_token()

    def _check_alive(self) -> None:
        if self.seen_epoch == LOSS.epoch and self.dead is None and not self.link.destroyed():
            return  # the hot path of every submit: nothing changed since the last look
        destroyed = self.link.destroyed()
        if (self.seen_epoch != LOSS.epoch or destroyed) and self.probe is not None:
            self.probe()
        if self.dead is not None:
            raise self.dead
        if destroyed:  # another thread is marking the loss at this moment: submit nothing
            raise DeviceLostError(f"{self.label} was lost (its wgpu device was destroyed)")

    def submit(self, command_buffers, fence: bool = True, poll: bool = True) -> Fence | None:
        """Submit now; return the submission's Fence (None with ``fence=False``: staging
        copies whose buffer map is their completion). Never waits for the GPU. ``poll=False``:
        the poll thread is not woken for this fence; someone polls soon (a caller about to
        wait, or the lazy batch's next flush): see ``keep_polling``."""
        with self._lock:
            self._check_alive()
            index = self._last = self.link.submit(command_buffers)
            self.submissions += 1
            if not fence:
                return None
            f = Fence(self)
            f.index = index
            self._pending.append(f)
            if poll and self._token is None:
                self._token = self.link.poll_token()
        # Outside the lock: with an idle queue the callback may run inside this call.
        self._notifier.arm(index)
        return f

    def _box(self):
        """This thread's work-done box for synchronous waits (a new one after an interrupted
        wait orphaned the last)."""
        box = getattr(self._local, "sync", None)
        if box is None:
            box = self._local.sync = self.link.sync_box()
        return box

    def submit_sync(self, command_buffer):
        """Submit one finished command buffer for a synchronous run (run_kernel, Pipeline.run):
        returns what ``wait_sync`` polls for from this thread (its box, armed; the poll thread
        is neither woken nor needed). Apart from the wait so that the caller leaves its
        device's recording section (Device.begin_work) as soon as the work is submitted."""
        box = self._box()
        with self._lock:
            self._check_alive()
            self._last = self.link.submit((command_buffer,))
            self.submissions += 1
        self.link.arm_box(box)
        return box

    def submit_pass_sync(self, calls):
        """``submit_sync`` of one compute pass of native ``calls``, recorded and submitted in
        one native sequence (under the lock: the run is submitted as recorded). Raises what
        WebGPU reports about the recorded commands."""
        box = self._box()
        with self._lock:
            self._check_alive()
            self._last = self.link.submit_pass(calls)
            self.submissions += 1
        self.link.arm_box(box)
        return box

    def arm_sync(self):
        """What ``wait_sync`` polls for until the GPU has finished everything submitted so
        far, submitting nothing (a synchronize: no empty command buffer, no Fence)."""
        box = self._box()
        with self._lock:
            self._check_alive()
        self.link.arm_box(box)
        return box

    def wait_sync(self, box, timeout: float | None = None) -> BaseException | None:
        """Poll until the GPU has done the run ``submit_sync`` (or ``arm_sync``) returned
        ``box`` for. Returns the error if the GPU could not finish it, else None; raises
        TimeoutError after ``timeout`` s."""
        try:
            if not wait_event(box, self, timeout):
                raise TimeoutError
        finally:
            if box.status is None:  # interrupted (or the device died): the callback may still
                # come, so the box must outlive this call; the next call takes a new one
                self._orphans = [b for b in self._orphans if b.status is None] + [box]
                self._local.sync = None
        if not box.ok:
            return DeviceError("the GPU could not finish this submission (device lost?)")
        return None

    def fence_for_all(self) -> Fence:
        """A Fence of everything submitted so far, submitting nothing: for work submitted
        without one whose buffers are let go once it is done after all (a synchronize that
        gave up waiting). The poll thread completes it."""
        with self._lock:
            f = Fence(self)
            f.index = self._last
            dead = self.dead
            if dead is None:
                self._pending.append(f)  # (in index order: nothing was submitted after it)
                if self._token is None:
                    self._token = self.link.poll_token()
        if dead is not None:
            f._finish(dead)
        else:
            self._notifier.arm(f.index)
        return f

    def keep_polling(self) -> None:
        """Wake the poll thread for the fences pending now (a waiter gave up on one that was
        submitted with ``poll=False``: its callbacks still fire without anyone waiting)."""
        with self._lock:
            if self._pending and self._token is None and self.dead is None:
                self._token = self.link.poll_token()

    def reap(self) -> None:
        """One non-blocking poll if fences are pending: completes those the GPU has finished
        (the lazy batch's flush, whose own fences do not wake the poll thread)."""
        if self._pending and self.dead is None and not self.link.destroyed():
            self.link.poll()

    def pending_count(self) -> int:
        return len(self._pending)

    def complete_through(self, index: int, error: BaseException | None = None) -> None:
        """The GPU reached submission ``index``: finish it and every earlier fence (the queue
        runs submissions in order)."""
        done = []
        with self._lock:
            while self._pending and self._pending[0].index <= index:
                done.append(self._pending.popleft())
            if not self._pending:
                self._idle_since = time.perf_counter()
        for f in done:
            f._finish(error)

    def kill(self, error: BaseException) -> None:
        """The device is lost or closed: fail every pending fence with ``error``; later
        submits raise it; waiters stop waiting."""
        with self._lock:
            if self.dead is None:
                self.dead = error
            done, self._pending = list(self._pending), deque()
            token, self._token = self._token, None
        for f in done:
            f._finish(error)
        if token is not None:
            token.set_done()

    def release_idle_token(self) -> None:
        """Let the poll thread sleep once no fence has been pending for _LINGER: a loop of
        submit-and-wait then does not wake it (a futex wake and a GIL hand-off) at every
        submit."""
        with self._lock:
            if (self._token is not None and not self._pending
                    and time.perf_counter() - self._idle_since > _LINGER):
                self._token.set_done()
                self._token = None

    def poll(self) -> None:
        if self.dead is None:
            self.link.poll()


def wait(fence: Fence, timeout: float | None = None) -> bool:
    """Block until ``fence`` is done; True if it is, False on timeout."""
    if fence.event.is_set():
        return True
    return wait_event(fence.event, fence.submitter, timeout)


def wait_event(event, submitter: Submitter, timeout: float | None = None) -> bool:
    """Poll ``submitter``'s device from this thread until ``event`` is set (a fence's, a map's
    or a synchronous run's box: its callback fires in these polls). True once set, False on
    timeout; raises the device's error if it dies meanwhile. The GIL is released inside each
    poll, and in the pauses after the first millisecond (see ``_nap``)."""
    if event.is_set():
        return True
    if submitter.dead is not None:
        raise submitter.dead
    calls = submitter.link.poll_calls
    if calls is not None:
        poll, dev, null = calls
    else:
        poll, dev, null = (lambda *_: time.sleep(0)), None, None
    is_set = event.is_set
    start = time.perf_counter()
    deadline = None if timeout is None else start + timeout
    next_probe = start + _PROBE_EVERY
    spins = 0
    submitter.waiting.append(None)
    try:
        while True:
            if submitter.dead is not None:
                if is_set():
                    return True
                raise submitter.dead
            poll(dev, False, null)
            if is_set():
                return True
            if deadline is not None and time.perf_counter() >= deadline:
                return False
            spins += 1
            if spins > _SPIN:
                if submitter.probe is not None:
                    if submitter.seen_epoch != LOSS.epoch:
                        submitter.probe()  # wgpu reported a device lost: is it this one?
                    elif time.perf_counter() > next_probe:
                        submitter.probe()  # a lost device's callbacks may never come
                        next_probe = time.perf_counter() + _PROBE_EVERY
                _nap(start)
    finally:
        submitter.waiting.pop()
        if not is_set():  # gave up (timeout, interrupt): fences left must complete anyway
            submitter.keep_polling()
