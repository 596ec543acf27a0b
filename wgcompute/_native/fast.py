"""wgpu-native's C API, called directly: the hot paths of wgcompute for the wgpu-py version this
was written for. Every use of wgpu-py's private attributes and of ``_ffi``/``lib`` is here.

Why the bypass is worth a module of its own (each measured on an H200 host): wgpu-py's encoder,
pass and command-buffer wrappers cost ~25 us per submit; its ``map_async`` builds a callback and
a promise per call and wakes its poll thread (a 4 KB read 247 -> ~60 us); its
``queue.on_submitted_work_done`` wraps the callback with the wrong C signature (TypeError), so
fences need the raw call; ``wgpuDeviceCreateShaderModuleTrusted`` compiles without naga's
runtime checks (+8% on matmul)."""

from __future__ import annotations

import threading

import numpy as np
from wgpu.backends.wgpu_native._ffi import ffi, lib

from . import _ctypes
from ._errors import NativeError

_ctypes.prime(ffi)  # the C types of a first GPU use, parsed in one go (before wgpu-py's _api)

from wgpu.backends.wgpu_native._api import GPUBindGroup, GPUShaderModule, libf  # noqa: E402

MODE = "fast"

_ENCODER_DESC = ffi.new("WGPUCommandEncoderDescriptor *")
_PASS_DESC = ffi.new("WGPUComputePassDescriptor *")
_BUFFER_DESC = ffi.new("WGPUCommandBufferDescriptor *")
_set_pipeline = lib.wgpuComputePassEncoderSetPipeline
_set_bind_group = lib.wgpuComputePassEncoderSetBindGroup
_dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
_SUCCESS = lib.WGPUQueueWorkDoneStatus_Success
_LABELS: dict = {}  # a bind group's label -> (its C string, length): kernel names, kept


def record_calls(pid, calls) -> None:
    """Record dispatches given as (pipeline, bind group, x, y, z) handles and counts into the
    compute pass ``pid``, setting the pipeline only when it changes (a pass keeps it)."""
    last = None
    null = ffi.NULL
    for pipeline, bg, x, y, z in calls:
        if pipeline is not last:
            _set_pipeline(pid, pipeline)
            last = pipeline
        _set_bind_group(pid, 0, bg, 0, null)
        _dispatch(pid, x, y, z)


def _finish_pass(dev, calls):
    """The raw handle of a finished command buffer holding one compute pass of ``calls``;
    raises what WebGPU reports about them (through wgpu-py's error-capturing entry point)."""
    enc = lib.wgpuDeviceCreateCommandEncoder(dev, _ENCODER_DESC)
    try:
        pid = lib.wgpuCommandEncoderBeginComputePass(enc, _PASS_DESC)
        try:
            record_calls(pid, calls)
            lib.wgpuComputePassEncoderEnd(pid)
        finally:
            lib.wgpuComputePassEncoderRelease(pid)
        return libf.wgpuCommandEncoderFinish(enc, _BUFFER_DESC)
    finally:
        lib.wgpuCommandEncoderRelease(enc)


class CommandBuffer:
    """A finished command buffer; ``Link.submit`` releases it once submitted."""

    __slots__ = ("_internal",)

    def __init__(self, handle):
        self._internal = handle

    def release(self) -> None:
        if self._internal is not None:
            lib.wgpuCommandBufferRelease(self._internal)
            self._internal = None

    def __del__(self):  # never submitted (an error between finish and submit)
        self.release()


class Pass:
    """A compute pass of an Encoder: ``record(calls)``, then ``end()``."""

    __slots__ = ("_internal",)

    def __init__(self, handle):
        self._internal = handle

    def record(self, calls) -> None:
        record_calls(self._internal, calls)

    def end(self) -> None:
        handle, self._internal = self._internal, None
        lib.wgpuComputePassEncoderEnd(handle)
        lib.wgpuComputePassEncoderRelease(handle)

    def __del__(self):  # never ended (an error while recording)
        if self._internal is not None:
            lib.wgpuComputePassEncoderRelease(self._internal)
            self._internal = None


class Encoder:
    """A command encoder of compute passes and buffer copies (no labels: wgpu-native names
    the Vulkan objects of labelled ones, 4-7 us each on lavapipe)."""

    __slots__ = ("_internal",)

    def __init__(self, dev):
        self._internal = lib.wgpuDeviceCreateCommandEncoder(dev, _ENCODER_DESC)

    def begin_pass(self) -> Pass:
        return Pass(lib.wgpuCommandEncoderBeginComputePass(self._internal, _PASS_DESC))

    def record_calls(self, calls) -> None:
        """One compute pass holding ``calls`` (see ``record_calls``)."""
        handle = lib.wgpuCommandEncoderBeginComputePass(self._internal, _PASS_DESC)
        try:
            record_calls(handle, calls)
            lib.wgpuComputePassEncoderEnd(handle)
        finally:
            lib.wgpuComputePassEncoderRelease(handle)

    def copy(self, source, source_offset: int, destination, destination_offset: int,
             size: int) -> None:
        """Copy bytes between two wgpu-py GPUBuffers."""
        lib.wgpuCommandEncoderCopyBufferToBuffer(self._internal, source._internal,
                                                 source_offset, destination._internal,
                                                 destination_offset, size)

    def finish(self) -> CommandBuffer:
        """The command buffer; raises what WebGPU reports about the recorded commands (through
        wgpu-py's error-capturing entry point: an encoding error must fail the command)."""
        handle, self._internal = self._internal, None
        try:
            return CommandBuffer(libf.wgpuCommandEncoderFinish(handle, _BUFFER_DESC))
        finally:
            lib.wgpuCommandEncoderRelease(handle)

    def __del__(self):  # dropped unfinished (an error while recording)
        if self._internal is not None:
            lib.wgpuCommandEncoderRelease(self._internal)
            self._internal = None


# -- buffer maps: one permanent C callback for every map of the process ------------------------

class MapRequest:
    """A pending map of a buffer: ``done()`` once resolved, ``error`` set if it failed."""

    __slots__ = ("_done", "error")

    def __init__(self):
        self._done = False
        self.error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    is_set = done  # the flag protocol waiters poll

    def fail(self, error: BaseException) -> None:
        """End the request with ``error`` (device lost: the callback will never come)."""
        if not self._done:
            self.error = error
            self._done = True


_maps: dict[int, MapRequest] = {}
_maps_lock = threading.Lock()
_map_ids = iter(range(1, 1 << 62))


@ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
def _on_mapped(status, message, userdata1, _userdata2):
    with _maps_lock:
        req = _maps.pop(int(ffi.cast("uintptr_t", userdata1)), None)
    if req is None:
        return
    if status != lib.WGPUMapAsyncStatus_Success:
        text = ffi.string(message.data, message.length).decode("utf-8", "replace") \
            if message.data else ""
        req.error = NativeError(f"could not map a staging buffer (status {status}): {text}")
    req._done = True


# cffi's own from_handle, without FFI.from_handle's Python wrapper: the callback below runs
# between the GPU finishing a synchronous run and its caller returning
_from_handle = getattr(getattr(ffi, "_backend", None), "from_handle", ffi.from_handle)


@ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
def _on_sync_done(status, _message, userdata1, _u2):
    _from_handle(userdata1).status = int(status)


class SyncBox:
    """One thread's completion slot for a synchronous run: the work-done callback writes the
    status into it. ``is_set()`` for waiters, ``ok`` once set."""

    __slots__ = ("status", "_handle", "_info")

    def __init__(self):
        self.status: int | None = None
        self._handle = ffi.new_handle(self)
        self._info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
        self._info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        self._info.callback = _on_sync_done
        self._info.userdata1 = self._handle

    def is_set(self) -> bool:
        return self.status is not None

    @property
    def ok(self) -> bool:
        return self.status == _SUCCESS


class Notifier:
    """Work-done notifications into ``sink(token, ok)``: one C callback for the notifier's
    life (a callback freed while wgpu-native could still call it segfaulted), the token
    travelling in userdata1, so nothing is allocated per submission."""

    def __init__(self, queue, sink):
        self._queue = queue

        @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
        def work_done(status, _message, userdata1, _u2):
            sink(int(ffi.cast("uintptr_t", userdata1)), status == _SUCCESS)

        self._callback = work_done
        self._local = threading.local()

    def arm(self, token: int) -> None:
        """Call sink(token, ok) once the GPU finished everything submitted so far (maybe
        inside this call, when the queue is idle). The callback info is passed by value and
        reused per thread."""
        info = getattr(self._local, "info", None)
        if info is None:
            info = self._local.info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
            info.mode = lib.WGPUCallbackMode_AllowProcessEvents
            info.callback = self._callback
        info.userdata1 = ffi.cast("void *", token)
        lib.wgpuQueueOnSubmittedWorkDone(self._queue, info[0])


class Link:
    """wgpu-native's calls for one wgpu-py GPUDevice."""

    mode = MODE

    def __init__(self, gpu_device):
        self.gpu_device = gpu_device
        self.dev = gpu_device._internal
        self.queue = gpu_device.queue._internal
        self._poller = gpu_device._poller
        self._had_poller = self._poller is not None
        self._arrays: dict[int, object] = {}  # reusable WGPUCommandBuffer[n]
        self.poll_calls = (lib.wgpuDevicePoll, self.dev, ffi.NULL)

    # -- encoding ----------------------------------------------------------------------------
    def encoder(self) -> Encoder:
        return Encoder(self.dev)

    def one_pass(self, calls) -> CommandBuffer:
        """A finished command buffer holding one compute pass of ``calls``, made without
        Python objects for the encoder and pass."""
        return CommandBuffer(_finish_pass(self.dev, calls))

    @staticmethod
    def discard(command_buffer) -> None:
        """Let go of a finished command buffer that is not to be submitted."""
        command_buffer.release()

    def submit_pass(self, calls) -> int:
        """``submit((one_pass(calls),))`` in one go, without the Python objects (the synchronous
        run_kernel's path: ~6 Python calls fewer). Returns the submission index; raises what
        WebGPU reports about the recorded commands (nothing is submitted then)."""
        cb = _finish_pass(self.dev, calls)
        arr = self._arrays.get(1)
        if arr is None:
            arr = self._arrays[1] = ffi.new("WGPUCommandBuffer[]", 1)
        arr[0] = cb
        try:
            return int(lib.wgpuQueueSubmitForIndex(self.queue, 1, arr))
        finally:
            lib.wgpuCommandBufferRelease(cb)

    @staticmethod
    def record_wgpu_pass(cpass, calls) -> None:
        """Record ``calls`` into a compute pass of wgpu-py's own encoder (render work,
        timestamps): through its handle, not its wrappers."""
        record_calls(cpass._internal, calls)

    @staticmethod
    def call(pipeline, bind_group, x: int, y: int, z: int) -> tuple:
        """One dispatch as ``record_calls`` takes it (the caller keeps the objects alive)."""
        return (pipeline._internal, bind_group._internal, x, y, z)

    # -- queue -------------------------------------------------------------------------------
    def submit(self, command_buffers) -> int:
        """wgpuQueueSubmitForIndex; our raw command buffers are released once submitted.
        Returns the submission index. (A destroyed or mapped resource in the submission
        makes wgpu-native abort the process: callers never submit one.)"""
        n = len(command_buffers)
        arr = self._arrays.get(n)
        if arr is None:
            arr = self._arrays[n] = ffi.new("WGPUCommandBuffer[]", max(n, 1))
        for i, cb in enumerate(command_buffers):
            arr[i] = cb._internal
        index = lib.wgpuQueueSubmitForIndex(self.queue, n, arr)
        for cb in command_buffers:
            if type(cb) is CommandBuffer:
                cb.release()
        return int(index)

    def destroyed(self) -> bool:
        """Whether ``GPUDevice.destroy()`` was called (wgpu-py drops the device's poll thread
        first): a submit after it would abort the process inside wgpu-native."""
        return self._had_poller and self.gpu_device._poller is None

    def notifier(self, sink) -> Notifier:
        return Notifier(self.queue, sink)

    def sync_box(self) -> SyncBox:
        return SyncBox()

    def arm_box(self, box: SyncBox) -> None:
        """box.status is written once the GPU finished everything submitted so far."""
        box.status = None
        lib.wgpuQueueOnSubmittedWorkDone(self.queue, box._info[0])

    def poll(self) -> None:
        """One non-blocking device poll: fires the callbacks of what has finished. (Its return
        value is unusable: wgpu-native 29 returns a Rust bool where the header declares a
        32-bit WGPUBool.)"""
        lib.wgpuDevicePoll(self.dev, False, ffi.NULL)

    # -- the poll thread ---------------------------------------------------------------------
    def install_poller(self, poll) -> None:
        """Make wgpu-py's poll thread for this device call ``poll(block)`` instead of its
        blocking wgpuDevicePoll: in wgpu-native 29 a blocking poll holds the device's fence
        lock while it waits, so every submit from any other thread stalls until the GPU is
        idle (measured: a 4 us submit took 3.6 s behind a long kernel)."""
        if self._poller is not None:
            self._poller._poll_func = poll

    def poll_token(self):
        """Keeps the poll thread polling until ``token.set_done()``."""
        return self._poller.get_token()

    # -- maps --------------------------------------------------------------------------------
    def map_async(self, buf, write: bool, size: int) -> MapRequest:
        """Map ``buf``'s first ``size`` bytes for writing or reading; resolves once the GPU is
        done with every submitted use of the buffer. (wgpu-py's own map state of these
        buffers is never used.)"""
        req = MapRequest()
        with _maps_lock:
            key = next(_map_ids)
            _maps[key] = req
        info = ffi.new("WGPUBufferMapCallbackInfo *")
        info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        info.callback = _on_mapped
        info.userdata1 = ffi.cast("void *", key)
        lib.wgpuBufferMapAsync(buf._internal, lib.WGPUMapMode_Write if write else
                               lib.WGPUMapMode_Read, 0, size, info[0])
        return req

    @staticmethod
    def mapped(buf, size: int, write: bool) -> np.ndarray:
        """A uint8 view of a mapped buffer's first ``size`` bytes (valid until unmap)."""
        if write:
            ptr = libf.wgpuBufferGetMappedRange(buf._internal, 0, size)
        else:
            ptr = lib.wgpuBufferGetConstMappedRange(buf._internal, 0, size)
        if ptr == ffi.NULL:
            raise NativeError("a mapped staging buffer has no mapped range")
        return np.frombuffer(ffi.buffer(ptr, size), dtype=np.uint8)

    @staticmethod
    def unmap(buf) -> None:
        lib.wgpuBufferUnmap(buf._internal)

    @staticmethod
    def lease(buf, nbytes: int, release) -> np.ndarray | None:
        """A writable uint8 array over the first ``nbytes`` of ``buf``, mapped for reading,
        that owns the mapping: once it and all its views are gone, ``release(buf)`` runs (it
        unmaps and pools the buffer). None if the range cannot be had."""
        ptr = lib.wgpuBufferGetConstMappedRange(buf._internal, 0, (nbytes + 3) & ~3)
        if ptr == ffi.NULL:
            return None
        owner = ffi.gc(ffi.cast("char *", ptr), lambda _p, b=buf: release(b))
        return np.frombuffer(ffi.buffer(owner, nbytes), dtype=np.uint8)

    @staticmethod
    def alive(buf) -> bool:
        """False once wgpu-py released the buffer (the garbage collector finalized it)."""
        return buf._internal is not None

    # -- bindings ----------------------------------------------------------------------------
    def bind_group(self, label: str, layout, entries):
        """A bind group of buffer ``entries`` ((binding, GPUBuffer, offset, size) tuples), its
        descriptor filled in one C array: wgpu-py's create_bind_group builds and checks a
        struct per entry in Python (~40 us a bind group on lavapipe's host, four times this).
        Raises wgpu's error on an invalid binding."""
        n = len(entries)
        arr = ffi.new("WGPUBindGroupEntry[]", n)  # (zeroed: no sampler, no texture view)
        for e, (binding, buf, offset, size) in zip(arr, entries):
            e.binding = binding
            e.buffer = buf._internal
            e.offset = offset
            e.size = size
        name = _LABELS.get(label)
        if name is None:
            text = label.encode("utf-8")
            name = _LABELS[label] = (ffi.new("char[]", text), len(text))
        desc = ffi.new("WGPUBindGroupDescriptor *")
        desc.label.data, desc.label.length = name
        desc.layout = layout._internal
        desc.entryCount = n
        desc.entries = arr
        return GPUBindGroup(label, libf.wgpuDeviceCreateBindGroup(self.dev, desc),
                            self.gpu_device)

    # -- shaders -----------------------------------------------------------------------------
    def shader_module(self, label: str, code: str, checked: bool):
        """A compute shader module from WGSL; ``checked=False`` compiles it without naga's
        runtime checks (no index clamping of workgroup and local arrays, no bounding counter
        in every loop). Raises wgpu's error on invalid WGSL."""
        if checked:
            return self.gpu_device.create_shader_module(label=label, code=code)
        src = ffi.new("WGPUShaderSourceWGSL *")
        text = code.encode("utf-8")
        keep = ffi.new("char[]", text)
        src.chain.next = ffi.NULL
        src.chain.sType = lib.WGPUSType_ShaderSourceWGSL
        src.code.data = keep
        src.code.length = len(text)
        name = label.encode("utf-8")
        keep_label = ffi.new("char[]", name)
        desc = ffi.new("WGPUShaderModuleDescriptor *")
        desc.nextInChain = ffi.cast("WGPUChainedStruct *", src)
        desc.label.data = keep_label
        desc.label.length = len(name)
        handle = libf.wgpuDeviceCreateShaderModuleTrusted(self.dev, desc,
                                                          lib.WGPUShaderRuntimeChecks_None)
        if handle == ffi.NULL:
            raise NativeError(f"shader module {label!r} could not be created")
        return GPUShaderModule(label, handle, self.gpu_device)

    # -- surfaces ----------------------------------------------------------------------------
    def surface_formats(self, wgpu_context) -> int | None:
        """How many texture formats this device's adapter can present to the surface of a
        wgpu-py canvas context (None when it has no native surface). wgpu-py fills what the
        native call leaves empty with defaults, and configuring a surface the adapter cannot
        present to aborts the process inside wgpu-native; so ask wgpu-native itself."""
        surface = getattr(wgpu_context, "_surface_id", None)
        if surface is None or surface == ffi.NULL:
            return None
        caps = ffi.new("WGPUSurfaceCapabilities *")
        status = libf.wgpuSurfaceGetCapabilities(surface, self.gpu_device.adapter._internal,
                                                 caps)
        if status != lib.WGPUStatus_Success:
            return 0
        count = int(caps.formatCount) if caps.formats != ffi.NULL else 0
        libf.wgpuSurfaceCapabilitiesFreeMembers(caps[0])
        return count
