"""The only place that calls the queue's submit: every submission gets a real fence, a
queue work-done callback registered right after it, completed as the GPU reaches it.

Why not block in ``wgpuDevicePoll(wait=True)``: in wgpu-native 29 a blocking poll holds the
device's fence lock while it waits, so every submit from any other thread stalls until the
GPU is idle (measured: a 4 µs submit took 3.6 s behind a long kernel). Progress therefore
comes from *non-blocking* polls only: wgpu-py's per-device poll thread (whose poll function
``install_poller`` swaps for a non-blocking poll plus a short sleep) keeps polling while any
fence or buffer map is pending, and ``wait()`` spins on non-blocking polls in the caller.
wgpu 0.32's ``queue.on_submitted_work_done`` wraps the callback with the wrong C signature
(TypeError); the callback here uses the right one.

Synchronous runs (run_kernel, Pipeline.run) use ``Submitter.submit_and_wait``: the work-done
callback writes into a box of the waiting thread, so no Fence, no pending-queue entry and
no lock stand between the GPU finishing and the caller returning."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from wgpu.backends.wgpu_native._ffi import ffi, lib

from ._encode import CommandBuffer
from .device import Device, get_device
from .errors import DeviceError

log = logging.getLogger("wgcompute")

_POLL_SLEEP = 50e-6  # background poll period while work is pending (s)
_IDLE_SLEEP = 1e-3  # the poll thread's period while a caller polls in wait_event (s)
_SPIN = 200  # polls a waiter makes before it looks at the clock
_SPIN_TIME = 1e-3  # a waiter polls without sleeping this long (s): a 100-stage pipeline
#                    finishes within it, and a sleep costs ~60 µs of latency
_NAP_FRACTION = 0.01  # then it sleeps this fraction of the time waited so far between polls
_MAX_NAP = 5e-4  # (s)
_LINGER = 2e-3  # the poll thread keeps polling this long after the last fence completed (s)


class Flag:
    """``is_set()`` / ``set()`` of a threading.Event without its Condition, which costs
    2.6 µs to create: nothing blocks on a fence's or a map's flag (``wait_event`` spins on
    polls and sleeps), so a plain attribute is all it needs."""

    __slots__ = ("_set",)

    def __init__(self):
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True


# Guards every fence's callbacks and completion: one lock for all of them, because a lock of
# their own would be made per submission and most fences never get a callback.
_fence_lock = threading.Lock()


class Fence:
    """Completion of one queue submission. ``event`` is set once the GPU finished it."""

    __slots__ = ("index", "event", "error", "_callbacks")

    def __init__(self):
        self.index = 0
        self.event = Flag()
        self.error: BaseException | None = None
        self._callbacks: list | None = None

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
        _safe_call(fn, self)

    def _finish(self, error: BaseException | None) -> None:
        with _fence_lock:
            if self.event.is_set():  # several pollers may get here
                return
            self.error = error
            self.event.set()
            callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for fn in callbacks:
                _safe_call(fn, self)

    @classmethod
    def completed(cls, error: BaseException | None = None) -> Fence:
        f = cls()
        f._finish(error)
        return f


class _SyncBox:
    """One thread's completion slot for ``Submitter.submit_and_wait``: the work-done callback
    writes the status into it (``userdata1`` is a handle to the box)."""

    __slots__ = ("status", "handle", "info")

    def is_set(self) -> bool:  # wait_event's flag protocol
        return self.status is not None

    def __init__(self, callback):
        self.status: int | None = None
        self.handle = ffi.new_handle(self)
        self.info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
        self.info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        self.info.callback = callback
        self.info.userdata1 = self.handle


def _safe_call(fn, arg) -> None:
    try:
        fn(arg)
    except Exception:  # a user callback must never break the poller
        log.exception("wgcompute: a completion callback raised")


def _nap(start: float) -> None:
    """A waiter's pause between polls, ``start`` being when it began to wait: none for the
    first _SPIN_TIME, then 1% of the time waited so far (50 to 500 µs), so a long wait
    costs little CPU and ends at most ~1% (or 0.5 ms) late."""
    waited = time.perf_counter() - start
    if waited > _SPIN_TIME:
        time.sleep(min(_MAX_NAP, max(_POLL_SLEEP, waited * _NAP_FRACTION)))


def install_poller(submitter: Submitter) -> None:
    """Make wgpu-py's poll thread for this device poll without blocking (see module doc),
    and stay out of the way while a caller spins in ``wait_event``: two threads polling at
    once fight over the GIL and wgpu-native's locks (on lavapipe that doubled the tiny-kernel
    round trip, 110 -> 190 µs)."""
    poller = getattr(submitter._device.gpu_device, "_poller", None)
    if poller is None:
        return

    def poll(block: bool) -> None:
        # Sleep first: right after a submit woke this thread, its caller is often about to
        # wait (and poll) itself.
        time.sleep(_POLL_SLEEP)
        while submitter.waiting:
            time.sleep(_IDLE_SLEEP)
        submitter.poll()
        submitter.release_idle_token()

    poller._poll_func = poll


class Submitter:
    """Submits command buffers for one device and tracks their fences in order."""

    def __init__(self, device: Device):
        self._device = device
        self._dev_id = device.gpu_device._internal
        self._queue_id = device.queue._internal
        self._poller = device.gpu_device._poller
        # one entry per thread polling in wait_event (the poll thread then stands by);
        # list.append / list.pop are atomic, so no lock
        self.waiting: list = []
        install_poller(self)
        # Reentrant: a work-done callback of an earlier fence may fire inside a wgpu call
        # made while this lock is held (submit), and completes fences under it.
        self._lock = threading.RLock()
        self._pending: deque[Fence] = deque()
        self._token = None  # keeps wgpu-py's poll thread polling while fences are pending
        self._idle_since = 0.0  # when the last pending fence completed
        self.submissions = 0

        # One C callback for the life of the process: the submission index travels in
        # userdata1, so nothing is allocated per submit and nothing can be freed early.
        @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
        def work_done(status, _message, userdata1, _u2):
            error = None
            if status != lib.WGPUQueueWorkDoneStatus_Success:
                error = DeviceError(f"the GPU could not finish this submission (status "
                                    f"{status})")
            self.complete_through(int(ffi.cast("uintptr_t", userdata1)), error)

        # Synchronous runs wait on a box of their own thread instead of a Fence: no fence
        # object, no pending-queue entry, no lock when the GPU is done.
        @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
        def sync_done(status, _message, userdata1, _u2):
            ffi.from_handle(userdata1).status = int(status)

        self._work_done = work_done
        self._sync_done = sync_done
        self._orphans: list[_SyncBox] = []  # boxes whose callback is still to come
        self._arrays = {}  # reusable WGPUCommandBuffer[n]
        self._local = threading.local()

    def submit(self, command_buffers, fence: bool = True) -> Fence | None:
        """Submit now; return the submission's Fence (None with ``fence=False``: staging
        copies whose buffer map is their completion). Never waits for the GPU.

        Validation happens when the command buffer is finished (wgpu-py raises there);
        what is left for submit is a destroyed or mapped resource, which wgpu-native turns
        into a process abort (as it does for plain wgpuQueueSubmit). wgcompute never
        destroys a buffer a pending command uses (Buffer.free defers), so it cannot happen
        unless user code destroys ``Buffer.gpu_buffer`` by hand. The raw ``lib`` entry
        points are used on this hot path: their errors could not be turned into Python
        exceptions anyway."""
        with self._lock:
            index = self._submit_locked(command_buffers)
            if not fence:
                return None
            fence = Fence()
            fence.index = int(index)
            self._pending.append(fence)
            if self._token is None:
                self._token = self._poller.get_token()
            info = self._info_for_thread()
            info.userdata1 = ffi.cast("void *", fence.index)
        # Outside the lock: with an idle queue the callback may run inside this call.
        lib.wgpuQueueOnSubmittedWorkDone(self._queue_id, info[0])
        return fence

    def _submit_locked(self, command_buffers) -> int:
        """wgpuQueueSubmitForIndex (under self._lock); our raw command buffers are released
        once submitted. Returns the submission index."""
        n = len(command_buffers)
        arr = self._arrays.get(n)
        if arr is None:
            arr = self._arrays[n] = ffi.new("WGPUCommandBuffer[]", max(n, 1))
        for i, cb in enumerate(command_buffers):
            arr[i] = cb._internal
        index = lib.wgpuQueueSubmitForIndex(self._queue_id, n, arr)
        self.submissions += 1
        for cb in command_buffers:
            if type(cb) is CommandBuffer:  # raw handle: submitted, so released now
                cb.release()
        return index

    def submit_and_wait(self, command_buffer) -> BaseException | None:
        """Submit one finished command buffer and poll from this thread until the GPU has
        done it: the synchronous runs (run_kernel, Pipeline.run). Returns the error if the
        GPU could not finish it (device lost), else None. The poll thread is neither woken
        nor needed: the work-done callback fires in this thread's polls."""
        box = getattr(self._local, "sync", None)
        if box is None:
            box = self._local.sync = _SyncBox(self._sync_done)
        with self._lock:
            self._submit_locked((command_buffer,))
        box.status = None
        lib.wgpuQueueOnSubmittedWorkDone(self._queue_id, box.info[0])
        try:
            wait_event(box)
        finally:
            if box.status is None:  # interrupted (KeyboardInterrupt): the callback is still
                # to come, so the box must outlive this thread; the next call takes a new one
                self._orphans = [b for b in self._orphans if b.status is None] + [box]
                self._local.sync = None
        if box.status != lib.WGPUQueueWorkDoneStatus_Success:
            return DeviceError(f"the GPU could not finish this submission (status "
                               f"{box.status})")
        return None

    def _info_for_thread(self):
        """This thread's work-done callback info (passed by value, so reusable; one per
        thread because the call that takes it is made outside the lock)."""
        info = getattr(self._local, "info", None)
        if info is None:
            info = self._local.info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
            info.mode = lib.WGPUCallbackMode_AllowProcessEvents
            info.callback = self._work_done
        return info

    def pending_count(self) -> int:
        return len(self._pending)

    def complete_through(self, index: int, error: BaseException | None = None) -> None:
        """The GPU reached submission ``index``: finish it and every earlier fence (the
        queue runs submissions in order)."""
        done = []
        with self._lock:
            while self._pending and self._pending[0].index <= index:
                done.append(self._pending.popleft())
            if not self._pending:
                self._idle_since = time.perf_counter()
        for f in done:
            f._finish(error)

    def release_idle_token(self) -> None:
        """Let the poll thread sleep once no fence has been pending for _LINGER. Keeping it
        polling a little longer than needed means a loop of submit-and-wait does not wake
        it (a futex wake and a GIL hand-off) at every submit."""
        with self._lock:
            if (self._token is not None and not self._pending
                    and time.perf_counter() - self._idle_since > _LINGER):
                self._token.set_done()
                self._token = None

    def poll(self) -> None:
        """One non-blocking device poll: fires the callbacks of whatever has finished. (Its
        return value, "queue empty", is not usable: wgpu-native 29 returns a Rust bool where
        the header declares a 32-bit WGPUBool, so the upper bytes are garbage.)"""
        lib.wgpuDevicePoll(self._dev_id, False, ffi.NULL)


_submitter: Submitter | None = None
_sub_lock = threading.Lock()


def submitter() -> Submitter:
    global _submitter
    s = _submitter
    if s is not None:
        return s
    with _sub_lock:
        if _submitter is None:
            _submitter = Submitter(get_device())
        return _submitter


def submit(command_buffers, fence: bool = True) -> Fence | None:
    return submitter().submit(command_buffers, fence)


def wait(fence: Fence, timeout: float | None = None) -> bool:
    """Block until ``fence`` is done; True if it is, False on timeout. Spins on
    non-blocking polls in the calling thread (lowest latency; the GIL is released inside
    each poll, and in the pauses that follow the first millisecond: see ``_nap``)."""
    return wait_event(fence.event, timeout)


def wait_event(event, timeout: float | None = None) -> bool:
    """Poll the device from this thread until ``event`` is set (a fence's, a staging
    buffer map's or a synchronous run's box: its callback fires in these polls)."""
    if event.is_set():
        return True
    s = submitter()
    poll, dev, null = lib.wgpuDevicePoll, s._dev_id, ffi.NULL  # Submitter.poll, inlined
    is_set = event.is_set
    start = time.perf_counter()
    deadline = None if timeout is None else start + timeout
    spins = 0
    s.waiting.append(None)
    try:
        while True:
            poll(dev, False, null)
            if is_set():
                return True
            if deadline is not None and time.perf_counter() >= deadline:
                return False
            spins += 1
            if spins > _SPIN:
                _nap(start)
    finally:
        s.waiting.pop()
