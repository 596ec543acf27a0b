"""Command encoders for the hot paths, made through wgpu-native directly.

wgpu-py's encoder, pass and command-buffer wrappers cost about 25 µs per submit on the H200
host (struct building, error capture per call, three Python objects released by the garbage
collector), a quarter of a tiny kernel's round trip. These thin handles make the same C
calls and release their handles themselves. ``finish()`` still goes through wgpu-py's
error-capturing entry point: WebGPU reports encoding errors there, and they must reach the
caller as exceptions (a failed command), not as a log line.

Only what the hot paths need is here: compute passes (without timestamps: a profiled
pipeline run uses wgpu-py's encoder), dispatches given as raw handles, and buffer-to-buffer
copies."""

from __future__ import annotations

from wgpu.backends.wgpu_native._api import libf
from wgpu.backends.wgpu_native._ffi import ffi, lib

from .device import get_device

_ENCODER_DESC = ffi.new("WGPUCommandEncoderDescriptor *")
_PASS_DESC = ffi.new("WGPUComputePassDescriptor *")
_BUFFER_DESC = ffi.new("WGPUCommandBufferDescriptor *")


_set_pipeline = lib.wgpuComputePassEncoderSetPipeline
_set_bind_group = lib.wgpuComputePassEncoderSetBindGroup
_dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups


def record_calls(pid, calls) -> None:
    """Record dispatches given as (pipeline, bind group, x, y, z) wgpu-native handles and
    counts into the compute pass ``pid``, setting the pipeline only when it changes (a pass
    keeps it between dispatches)."""
    last = None
    null = ffi.NULL
    for pipeline, bg, x, y, z in calls:
        if pipeline is not last:
            _set_pipeline(pid, pipeline)
            last = pipeline
        _set_bind_group(pid, 0, bg, 0, null)
        _dispatch(pid, x, y, z)


def encode_one_pass(calls) -> CommandBuffer:
    """A finished command buffer holding one compute pass of ``calls`` (see ``record_calls``):
    what ``Encoder(); record_calls(calls); finish()`` makes, without their Python objects
    (the synchronous run_kernel's path). Raises what WebGPU reports, as ``finish`` does."""
    enc = lib.wgpuDeviceCreateCommandEncoder(get_device().gpu_device._internal, _ENCODER_DESC)
    try:
        pid = lib.wgpuCommandEncoderBeginComputePass(enc, _PASS_DESC)
        try:
            record_calls(pid, calls)
            lib.wgpuComputePassEncoderEnd(pid)
        finally:
            lib.wgpuComputePassEncoderRelease(pid)
        return CommandBuffer(libf.wgpuCommandEncoderFinish(enc, _BUFFER_DESC))
    finally:
        lib.wgpuCommandEncoderRelease(enc)


class Pass:
    """A compute pass: ``_internal`` is what Dispatch.encode records into."""

    __slots__ = ("_internal",)

    def __init__(self, handle):
        self._internal = handle

    def end(self) -> None:
        handle, self._internal = self._internal, None
        lib.wgpuComputePassEncoderEnd(handle)
        lib.wgpuComputePassEncoderRelease(handle)

    def __del__(self):  # never ended (an error while recording)
        if self._internal is not None:
            lib.wgpuComputePassEncoderRelease(self._internal)
            self._internal = None


class CommandBuffer:
    """A finished command buffer; ``_queue.submit`` releases it after submitting."""

    __slots__ = ("_internal",)

    def __init__(self, handle):
        self._internal = handle

    def release(self) -> None:
        if self._internal is not None:
            lib.wgpuCommandBufferRelease(self._internal)
            self._internal = None

    def __del__(self):  # never submitted (an error between finish and submit)
        self.release()


class Encoder:
    """``create_command_encoder()`` of the hot paths: begin_compute_pass,
    copy_buffer_to_buffer (wgpu-py buffers) and finish, like wgpu-py's, minus labels."""

    __slots__ = ("_internal",)

    def __init__(self):
        self._internal = lib.wgpuDeviceCreateCommandEncoder(
            get_device().gpu_device._internal, _ENCODER_DESC)

    def begin_compute_pass(self) -> Pass:
        return Pass(lib.wgpuCommandEncoderBeginComputePass(self._internal, _PASS_DESC))

    def record(self, dispatch) -> None:
        """One compute pass holding ``dispatch`` (a Dispatch: ``encode_raw(pass handle)``)."""
        handle = lib.wgpuCommandEncoderBeginComputePass(self._internal, _PASS_DESC)
        try:
            dispatch.encode_raw(handle)
            lib.wgpuComputePassEncoderEnd(handle)
        finally:
            lib.wgpuComputePassEncoderRelease(handle)

    def record_calls(self, calls) -> None:
        """One compute pass holding ``calls`` (see ``record_calls``)."""
        handle = lib.wgpuCommandEncoderBeginComputePass(self._internal, _PASS_DESC)
        try:
            record_calls(handle, calls)
            lib.wgpuComputePassEncoderEnd(handle)
        finally:
            lib.wgpuComputePassEncoderRelease(handle)

    def copy_buffer_to_buffer(self, source, source_offset: int, destination,
                              destination_offset: int, size: int) -> None:
        lib.wgpuCommandEncoderCopyBufferToBuffer(self._internal, source._internal,
                                                 source_offset, destination._internal,
                                                 destination_offset, size)

    def finish(self) -> CommandBuffer:
        """The command buffer; raises what WebGPU reports about the recorded commands."""
        handle, self._internal = self._internal, None
        try:
            return CommandBuffer(libf.wgpuCommandEncoderFinish(handle, _BUFFER_DESC))
        finally:
            lib.wgpuCommandEncoderRelease(handle)

    def __del__(self):  # dropped unfinished (an error while recording)
        if self._internal is not None:
            lib.wgpuCommandEncoderRelease(self._internal)
            self._internal = None
