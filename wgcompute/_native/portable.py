"""The same calls as ``fast``, through wgpu-py's public API only: what wgcompute uses when the
installed wgpu is not the version ``fast`` was written for. Slower (wgpu-py's wrappers, a map
per fence, a copy per upload), correct, and tested (WGCOMPUTE_NATIVE=portable)."""

from __future__ import annotations

import itertools
import queue
import threading

import numpy as np
import wgpu

from ._errors import NativeError

MODE = "portable"
_OK = 1  # WGPUQueueWorkDoneStatus_Success's value, so SyncBox.ok reads the same in both


class Pass:
    __slots__ = ("_pass",)

    def __init__(self, cpass):
        self._pass = cpass

    def record(self, calls) -> None:
        record_calls(self._pass, calls)

    def end(self) -> None:
        self._pass.end()


def record_calls(cpass, calls) -> None:
    last = None
    for pipeline, bg, x, y, z in calls:
        if pipeline is not last:
            cpass.set_pipeline(pipeline)
            last = pipeline
        cpass.set_bind_group(0, bg)
        cpass.dispatch_workgroups(x, y, z)


class Encoder:
    __slots__ = ("_enc",)

    def __init__(self, gpu_device):
        self._enc = gpu_device.create_command_encoder()

    def begin_pass(self) -> Pass:
        return Pass(self._enc.begin_compute_pass())

    def record_calls(self, calls) -> None:
        cpass = self._enc.begin_compute_pass()
        record_calls(cpass, calls)
        cpass.end()

    def copy(self, source, source_offset, destination, destination_offset, size) -> None:
        self._enc.copy_buffer_to_buffer(source, source_offset, destination,
                                        destination_offset, size)

    def finish(self):
        return self._enc.finish()


class MapRequest:
    __slots__ = ("_done", "error")

    def __init__(self):
        self._done = False
        self.error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    is_set = done

    def fail(self, error: BaseException) -> None:
        if not self._done:
            self.error = error
            self._done = True


class SyncBox:
    __slots__ = ("status",)

    def __init__(self):
        self.status: int | None = None

    def is_set(self) -> bool:
        return self.status is not None

    @property
    def ok(self) -> bool:
        return self.status == _OK


def _map_async(buf, mode, size: int):
    """``buf.map_async``; a destroyed device as the loss it is: wgpu-py stops the device's poll
    thread before it destroys the device, and a map in between raises a RuntimeError about
    that thread while the device still looks alive."""
    try:
        return buf.map_async(mode, 0, size)
    except RuntimeError as e:
        if "PollThread" in str(e):
            raise NativeError(f"the device is lost (wgpu-py stopped its poll thread: {e})") from e
        raise


class _Token:
    def set_done(self) -> None:
        pass


class Link:
    """wgpu-py's public calls for one GPUDevice. Completion comes from a thread of its own
    that waits on map promises in order (``GPUPromise.sync_wait``); fences are 4-byte copies
    into a small buffer whose read map resolves after everything submitted before it."""

    mode = MODE

    def __init__(self, gpu_device):
        self.gpu_device = gpu_device
        self._queue = gpu_device.queue
        self._had_poller = getattr(gpu_device, "_poller", None) is not None
        self._index = itertools.count(1)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._scratch: dict[int, tuple] = {}  # write views handed out, flushed by unmap
        self._lock = threading.Lock()
        self._fence_src = gpu_device.create_buffer(
            label="wgcompute-fence-src", size=4,
            usage=wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST)
        self._fences: list = []
        self._thread = threading.Thread(target=self._complete, daemon=True,
                                        name="wgcompute-completion")
        self._thread.start()

    def destroyed(self) -> bool:
        """Whether ``GPUDevice.destroy()`` was called (wgpu-py drops the device's poll thread
        first; False where it has none)."""
        return self._had_poller and getattr(self.gpu_device, "_poller", None) is None

    # -- encoding ----------------------------------------------------------------------------
    def encoder(self) -> Encoder:
        return Encoder(self.gpu_device)

    def one_pass(self, calls):
        enc = self.encoder()
        enc.record_calls(calls)
        return enc.finish()

    @staticmethod
    def discard(command_buffer) -> None:
        """Let go of a finished command buffer that is not to be submitted (wgpu-py's object
        releases it when collected)."""

    def submit_pass(self, calls) -> int:
        """``submit((one_pass(calls),))``."""
        return self.submit((self.one_pass(calls),))

    @staticmethod
    def record_wgpu_pass(cpass, calls) -> None:
        record_calls(cpass, calls)

    @staticmethod
    def call(pipeline, bind_group, x, y, z) -> tuple:
        return (pipeline, bind_group, x, y, z)

    # -- bindings ----------------------------------------------------------------------------
    def bind_group(self, label: str, layout, entries):
        """A bind group of buffer ``entries`` ((binding, GPUBuffer, offset, size) tuples)."""
        return self.gpu_device.create_bind_group(label=label, layout=layout, entries=[
            {"binding": binding, "resource": {"buffer": buf, "offset": offset, "size": size}}
            for binding, buf, offset, size in entries])

    # -- queue -------------------------------------------------------------------------------
    def submit(self, command_buffers) -> int:
        self._queue.submit(list(command_buffers))
        return next(self._index)

    def _fence(self, done) -> None:
        """Call done(ok) once the GPU finished everything submitted so far."""
        try:
            with self._lock:
                src = self._fence_src
                if src is None:  # closed
                    raise NativeError("the device's calls are closed")
                buf = self._fences.pop() if self._fences else self.gpu_device.create_buffer(
                    label="wgcompute-fence", size=4,
                    usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
            enc = self.gpu_device.create_command_encoder()
            enc.copy_buffer_to_buffer(src, 0, buf, 0, 4)
            self._queue.submit([enc.finish()])
            promise = _map_async(buf, wgpu.MapMode.READ, 4)
        except Exception:  # the device is gone (wgpu-py stops its poll thread with it): the
            done(False)    # GPU will not finish this work, which is what the fence reports
            return
        self._jobs.put((promise, buf, done))

    def notifier(self, sink):
        link = self

        class Notifier:
            @staticmethod
            def arm(token: int) -> None:
                link._fence(lambda ok: sink(token, ok))

        return Notifier()

    @staticmethod
    def sync_box() -> SyncBox:
        return SyncBox()

    def arm_box(self, box: SyncBox) -> None:
        box.status = None

        def done(ok):
            box.status = _OK if ok else 0

        self._fence(done)

    def poll(self) -> None:
        """Progress comes from wgpu-py's poll thread and the completion thread: nothing to do
        here but let them run."""

    poll_calls = None

    def install_poller(self, poll) -> None:
        pass

    @staticmethod
    def poll_token():
        return _Token()

    def _complete(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            promise, buf, done = job
            ok = True
            try:
                promise.sync_wait()
            except Exception as e:  # the map failed (device lost, buffer destroyed)
                ok = e
            if isinstance(buf, MapRequest):  # a user map: done is its owner's bookkeeping
                done(ok)
                continue
            try:
                if ok is True:
                    buf.unmap()
                    with self._lock:
                        self._fences.append(buf)
            except Exception:
                pass
            done(ok is True)

    def close(self) -> None:
        """Stop the completion thread and let go of the fence buffers (a racing fence then
        reports failure; nothing is destroyed under a submission that might use it)."""
        self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=1.0)
        with self._lock:
            self._fence_src = None
            self._fences.clear()

    # -- maps --------------------------------------------------------------------------------
    def map_async(self, buf, write: bool, size: int) -> MapRequest:
        req = MapRequest()
        try:
            promise = _map_async(buf, wgpu.MapMode.WRITE if write else wgpu.MapMode.READ, size)
        except Exception as e:
            req.fail(e if isinstance(e, NativeError) else
                     NativeError(f"could not map a staging buffer: {e}"))
            return req

        def done(ok):
            if ok is not True:
                req.error = NativeError(f"could not map a staging buffer: {ok}")
            req._done = True

        self._jobs.put((promise, req, done))
        return req

    def mapped(self, buf, size: int, write: bool) -> np.ndarray:
        if write:  # no public writable view: a scratch array, written into the map at unmap
            scratch = np.empty(size, np.uint8)
            self._scratch[id(buf)] = (buf, scratch)
            return scratch
        return np.frombuffer(buf.read_mapped(0, size, copy=False), dtype=np.uint8)

    def unmap(self, buf) -> None:
        pending = self._scratch.pop(id(buf), None)
        if pending is not None:
            buf.write_mapped(pending[1], 0)
        buf.unmap()

    @staticmethod
    def lease(buf, nbytes: int, release):
        return None  # results are copied out of the staging instead

    @staticmethod
    def alive(buf) -> bool:
        return True

    # -- shaders -----------------------------------------------------------------------------
    def shader_module(self, label: str, code: str, checked: bool):
        return self.gpu_device.create_shader_module(label=label, code=code)

    # -- surfaces ----------------------------------------------------------------------------
    def surface_formats(self, wgpu_context) -> int | None:
        """How many formats this device's adapter can present to a window's surface.
        wgpu-py's public API cannot tell (it reports default formats instead), and configuring
        a surface the adapter cannot present to aborts the process: so 0 on an OpenGL adapter
        (those measured list no format for a window), else None (unknown)."""
        return 0 if self.gpu_device.adapter.info["backend_type"] == "OpenGL" else None
