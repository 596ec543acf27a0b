"""The only place that calls the queue's submit: every submission gets a real fence (its
wgpu-native submission index) that a background thread waits on, GIL released.

wgpu 0.32's ``queue.on_submitted_work_done`` is broken, and a map-based fence costs an extra
copy and buffer per submission. ``wgpuQueueSubmitForIndex`` + ``wgpuDevicePoll(wait, &index)``
blocks exactly until that submission has finished on the GPU, so one daemon thread per device
walks the in-order queue and completes fences as the GPU reaches them."""

from __future__ import annotations

import logging
import threading
from collections import deque

from wgpu.backends.wgpu_native._api import libf
from wgpu.backends.wgpu_native._ffi import ffi

from .device import Device, get_device
from .errors import DeviceError

log = logging.getLogger("wgcompute")


class Fence:
    """Completion of one queue submission. ``event`` is set once the GPU finished it."""

    __slots__ = ("index", "event", "error", "_callbacks", "_lock")

    def __init__(self):
        self.index = 0
        self.event = threading.Event()
        self.error: BaseException | None = None
        self._callbacks: list = []
        self._lock = threading.Lock()

    def done(self) -> bool:
        return self.event.is_set()

    def add_callback(self, fn) -> None:
        """Call ``fn(fence)`` once done, from the fence thread (or now, if already done)."""
        with self._lock:
            if not self.event.is_set():
                self._callbacks.append(fn)
                return
        _safe_call(fn, self)

    def _finish(self, error: BaseException | None) -> None:
        with self._lock:
            if self.event.is_set():  # a waiter and the fence thread may both get here
                return
            self.error = error
            self.event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _safe_call(fn, self)

    @classmethod
    def completed(cls, error: BaseException | None = None) -> Fence:
        f = cls()
        f._finish(error)
        return f


def _safe_call(fn, arg) -> None:
    try:
        fn(arg)
    except Exception:  # a user callback must never kill the fence thread
        log.exception("wgcompute: a completion callback raised")


class Submitter:
    """Submits command buffers for one device and completes their fences in order."""

    def __init__(self, device: Device):
        self._device = device
        self._dev_id = device.gpu_device._internal
        self._queue_id = device.queue._internal
        self._lock = threading.Lock()  # orders submit against the pending deque
        self._cond = threading.Condition(threading.Lock())
        self._pending: deque[Fence] = deque()
        self._thread = threading.Thread(target=self._run, name="wgcompute-fences", daemon=True)
        self._thread.start()
        self.submissions = 0

    def submit(self, command_buffers) -> Fence:
        """Submit now; return the submission's Fence. Never waits for the GPU.

        Validation happens when the command buffer is finished (wgpu-py raises there);
        what is left for submit is a destroyed or mapped resource, which wgpu-native turns
        into a process abort (as it does for plain wgpuQueueSubmit). wgcompute never
        destroys a buffer a pending command uses (Buffer.free defers), so it cannot happen
        unless user code destroys ``Buffer.gpu_buffer`` by hand."""
        fence = Fence()
        ids = [cb._internal for cb in command_buffers]
        arr = ffi.new("WGPUCommandBuffer[]", ids)
        with self._lock:
            index = libf.wgpuQueueSubmitForIndex(self._queue_id, len(ids), arr)
            fence.index = int(index)
            self.submissions += 1
            with self._cond:
                self._pending.append(fence)
                self._cond.notify()
        return fence

    def pending_count(self) -> int:
        return len(self._pending)

    def complete_through(self, index: int, error: BaseException | None = None) -> None:
        """The GPU reached submission ``index``: finish it and every earlier fence (the
        queue runs submissions in order)."""
        done = []
        with self._cond:
            while self._pending and self._pending[0].index <= index:
                done.append(self._pending.popleft())
        for f in done:
            f._finish(error)

    def _run(self) -> None:
        idx_ptr = ffi.new("WGPUSubmissionIndex *")
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                index = self._pending[0].index
            error = None
            try:
                idx_ptr[0] = index
                libf.wgpuDevicePoll(self._dev_id, True, idx_ptr)  # cffi releases the GIL
            except Exception as e:  # device lost, validation reported late
                error = DeviceError(f"the GPU failed this submission: {e}")
                error.__cause__ = e
            self.complete_through(index, error)


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


def submit(command_buffers) -> Fence:
    return submitter().submit(command_buffers)


def wait(fence: Fence, timeout: float | None = None) -> bool:
    """Block until ``fence`` is done; True if it is. Without a timeout this polls the device
    for exactly that submission in the calling thread (GIL released), the lowest latency."""
    if fence.event.is_set():
        return True
    if timeout is not None:
        return fence.event.wait(timeout)
    s = submitter()
    idx = ffi.new("WGPUSubmissionIndex *", fence.index)
    try:
        libf.wgpuDevicePoll(s._dev_id, True, idx)
    except Exception as e:
        err = DeviceError(f"the GPU failed this submission: {e}")
        err.__cause__ = e
        s.complete_through(fence.index, err)
        return True
    s.complete_through(fence.index)
    return True
