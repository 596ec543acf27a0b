"""Commands: submit -> poll -> wait (and await) on real GPU fences, the one submit path every
kind of work goes through (kernels, copies, pipelines, presents, transfers), and the synchronous
run_kernel. Nothing here blocks except wait(), run_kernel() and friends."""

from __future__ import annotations

import sys

import numpy as np

from . import _queue, transfers
from ._args import check_buffer_list
from ._command import (  # noqa: F401 - Command and friends are imported from here
    Command,
    HostCommand,
    Status,
    lookup,
    poll,
    wait,
)
from .buffer import (
    Buffer,
    _to_array,
    check_buffer,
    empty,
    install_async_transfers,
    result_buffer,
)
from .dtypes import DTYPES
from .errors import (
    ArgumentError,
    CommandFailedError,
    DeviceError,
    DtypeError,
    ShapeError,
    WgComputeError,
)
from .kernels import Dispatch, Kernel, bind, registry
from .kernels.core.base import MultiDispatch
from .kernels.core.bind import freeze as _freeze
from .kernels.core.bind import same_device
from .runtime import Device, current_device

# -- the one submit path -----------------------------------------------------------------------

def submit_work(label: str, device: Device, record, buffers=(), result=None,
                full: bool = False) -> Command:
    """Hold ``buffers``, record with ``record(encoder)``, submit once and return the Command
    whose fence the GPU completes. Errors the GPU reports (validation, out of memory, a lost
    device) fail the command instead of raising; wgcompute's own errors raise. ``full``:
    wgpu-py's encoder (render passes, textures, timestamps) instead of the compute-and-copy one
    of the hot paths."""
    return submit_command(Command(label, device, buffers, result), record, full)


def submit_command(cmd: Command, record, full: bool = False) -> Command:
    """Record and submit the work of ``cmd`` (made earlier, e.g. when a stream was given the
    work): the one submit path of every kind of work."""
    device = cmd.device
    label = cmd.label
    recording = device._recording  # Device.begin_work, inlined: close() waits for us
    recording.append(None)
    try:
        device.check()
        enc = device.gpu_device.create_command_encoder() if full else device.link.encoder()
        record(enc)
        fence = device.submit([enc.finish()])
    except WgComputeError as e:
        cmd._fail(e)
        raise
    except Exception as e:  # validation error, out of memory, device lost
        cmd._fail(device.wrap(e, label) if not device.alive or "lost" in str(e).lower()
                  else e)
        return cmd
    finally:
        recording.pop()
    cmd._attach(fence)
    return cmd


def run_blocking(label: str, device: Device, buffers, record=None, calls=None) -> None:
    """Record with ``record(encoder)``, or one compute pass of native ``calls``, submit and
    wait: the synchronous path of run_kernel and Pipeline.run, with no Command and no
    poll-thread wake-up. The buffers are held meanwhile (a free() from another thread is
    deferred). A failure raises CommandFailedError carrying the cause; a lost device raises
    DeviceLostError, a closed one DeviceError."""
    held = []
    try:
        for b in buffers:  # hold first, then check (a free() racing this defers)
            b._pin(label, ": buffer")
            held.append(b)
        recording = device._recording  # Device.begin_work, inlined: close() waits for us
        recording.append(None)
        try:
            if not device.alive:  # closed (or lost) since the buffers were checked
                device.check(label)
            try:
                if calls:  # recorded and submitted in one go (the open batch first)
                    box = device.submit_pass_sync(calls)
                else:
                    enc = device.link.encoder()
                    if record is not None:
                        record(enc)
                    box = device.submit((enc.finish(),), sync=True)
            except WgComputeError:
                raise
            except Exception as e:  # validation error, out of memory
                if not device.alive or "lost" in str(e).lower():
                    raise device.wrap(e, label) from e
                raise CommandFailedError(f"{label} failed: {e}", e) from e
        finally:
            recording.pop()
        error = device.submitter.wait_sync(box)
        if error is not None:
            if not device.alive:
                raise device.wrap(error, label) from error
            raise CommandFailedError(f"{label} failed: {error}", error)
        if device._clocks.watch:  # (Device.after_wait, inlined)
            device.after_wait()
    finally:
        for b in held:
            b._release()


# -- binding cache: a second identical call creates no GPU object ------------------------------

_BIND_CACHE_SIZE = 256


def bound(kernel: Kernel, inputs, output: Buffer, params) -> Dispatch:
    """bind(), cached per device by kernel, buffer identities and params; its params are
    fixed (bind's ``fixed``: the device may share its params buffer with other bindings)."""
    try:
        device = output._dev
        # _key is the buffer's id, or for pooled memory (memory serial, shape, dtype): a
        # result reusing pooled memory finds the run bound to it
        key = (kernel.name, kernel, tuple([b._key for b in inputs]), output._key,
               _freeze(params, key=True) if params else ())
        cache = device.binds
        # Reads take no lock (OrderedDict's get and move_to_end are atomic); a writer may
        # evict the key in between, which only makes it less recently used.
        d = cache.get(key)  # hashes the key: unhashable params raise here
        if d is not None:
            try:
                cache.move_to_end(key)
            except KeyError:
                pass
    except (AttributeError, TypeError):
        return bind(kernel, inputs, output, params, fixed=True)
    if d is not None:
        freed = output._freed or not device.alive
        for b in inputs:
            freed = freed or b._freed
        if freed:  # the messages are formatted only when needed
            for name, b in zip(kernel.inputs, inputs):
                b._check(f"{kernel.name}: input {name!r}")
            output._check(f"{kernel.name}: output")
        return d
    d = bind(kernel, inputs, output, params, fixed=True)
    if isinstance(d, MultiDispatch) and not d.reusable and (type(output._key) is tuple or any(
            type(b._key) is tuple for b in inputs)):
        return d  # its temporaries go with these Buffer objects, which others' keys outlive
    with device.binds_lock:
        cache[key] = d
        while len(cache) > _BIND_CACHE_SIZE:
            cache.popitem(last=False)
    return d


def prepare_output(kernel: Kernel, inputs, output, params=None, pooled: bool = False):
    """The output buffer: the given one, or a new one shaped by the kernel from the inputs and
    params (e.g. resize's size, a reduction's axis), on the inputs' device. ``pooled``: the
    kernel writes every element, so a new output may be memory from the device's pool (not
    zeroed), as the operators' results are."""
    if output is not None:
        return output
    check_buffer_list(inputs, f"{kernel.name}: ")
    for name, b in zip(kernel.inputs, inputs):
        check_buffer(b, f"{kernel.name}: input {name!r}")
    if len(inputs) != len(kernel.inputs):
        raise ArgumentError(f"{kernel.name}: takes {len(kernel.inputs)} input(s), got "
                            f"{len(inputs)}")
    device = same_device(kernel.name, [(f"input {n!r}", b)
                                       for n, b in zip(kernel.inputs, inputs)])
    resolved = kernel.resolve_params(params, DTYPES[inputs[0].dtype]) if inputs else \
        dict(params or {})
    shape, dtype = kernel.output_spec(list(inputs), resolved)
    if pooled:
        return result_buffer(shape, DTYPES[dtype], device, label=f"{kernel.name}-out")
    return empty(shape, dtype, label=f"{kernel.name}-out", device=device)


def _bound_run(kernel, inputs, output, params):
    """Check and bind one kernel run: (kernel, the output buffer, its Dispatch)."""
    k = registry.get(kernel)
    check_buffer_list(inputs, f"{k.name}: ")
    output = prepare_output(k, inputs, output, params)
    return k, output, bound(k, list(inputs), output, params)


def kernel_work(kernel, inputs, output=None, params=None):
    """Check and bind one kernel run: (kernel name, device, buffers, output, record(encoder))
    for ``submit_work`` now or later (streams)."""
    k, output, d = _bound_run(kernel, inputs, output, params)
    calls = d.raw_calls()

    def record(enc, _dispatch=d):
        # the raw calls name d's bind groups by handle: d is held until they are recorded (a
        # stream records later; the bind cache may have let go of d by then)
        if calls:
            enc.record_calls(calls)

    return k.name, d.device, list(inputs) + [output], output, record


def run_kernel_async(kernel, inputs, output=None, params=None) -> Command[Buffer]:
    """Submit one kernel and return its Command at once (result: the output buffer)."""
    name, device, buffers, output, record = kernel_work(kernel, inputs, output, params)
    return submit_command(Command(name, device, buffers, output), record)


def run_kernel(kernel, inputs, output=None, params=None) -> Buffer:
    """Run a named kernel and return when its output is ready (returns the output).

    The same as ``run_kernel_async(...).wait()`` without the Command: no handle outlives the
    call, so none is built (a few us of a tiny kernel's round trip)."""
    k, output, d = _bound_run(kernel, inputs, output, params)
    run_blocking(f"run_kernel {k.name}", d.device, [*inputs, output], calls=d.raw_calls())
    return output


# -- copies and barriers -----------------------------------------------------------------------

# From this size on a GPU a copy runs as the "copy" kernel (16-byte words): on an H200 the
# encoder's copy_buffer_to_buffer reached 844 GB/s where a shader copy reaches ~4,000. On CPU
# adapters (lavapipe) the encoder's copy is a memcpy and 6x faster than the shader.
SHADER_COPY_MIN = 1 << 20
SHADER_COPY_GPU_ONLY = True


def copy_dispatch(src: Buffer, dst: Buffer) -> Dispatch | None:
    """The bound copy kernel for a large copy on a GPU, None otherwise (encoder copy)."""
    if src.nbytes < SHADER_COPY_MIN or (SHADER_COPY_GPU_ONLY and not src.device.is_gpu):
        return None
    return bound(registry.get("copy"), [src], dst, None)


def copy_calls(src: Buffer, dst: Buffer, d: Dispatch | None):
    """A copy as recording steps: native dispatch calls (shader copy), or (src, dst, bytes)."""
    if d is not None:
        return d.raw_calls()
    n = (src.nbytes + 3) // 4 * 4
    return (src, dst, n) if n else None


def record_copy(enc, step) -> None:
    if step is None:
        return
    if type(step) is list:
        enc.record_calls(step)
    else:
        src, dst, n = step
        enc.copy(src.gpu_buffer, 0, dst.gpu_buffer, 0, n)


def copy_buffer_async(src: Buffer, dst: Buffer) -> Command[Buffer]:
    """Copy ``src`` into ``dst`` (same dtype and element count); returns a Command."""
    check_copy(src, dst)
    step = copy_calls(src, dst, copy_dispatch(src, dst))
    return submit_work("copy_buffer", src.device, lambda enc: record_copy(enc, step),
                       [src, dst], dst)


def check_copy(src, dst, where: str = "copy_buffer") -> None:
    check_buffer(src, f"{where}: source")
    check_buffer(dst, f"{where}: destination")
    if src is dst:
        raise ArgumentError(f"{where}: source and destination are the same buffer")
    for name, b in (("source", src), ("destination", dst)):
        if b._base is not None:
            raise ArgumentError(f"{where}: {name} {b!r} is a view; copies move whole "
                                f"buffers (view.copy() makes a buffer of a view)")
    if src.dtype != dst.dtype:
        raise DtypeError(f"{where}: source is {src.dtype}, destination is {dst.dtype}")
    if src.size != dst.size:
        raise ShapeError(f"{where}: source {src.shape} has {src.size} elements, destination "
                         f"{dst.shape} has {dst.size}")
    same_device(where, [("source", src), ("destination", dst)])


def barrier_async(device: Device | None = None) -> Command[None]:
    """A command that completes once everything submitted before it (on the device) has."""
    dev = device if device is not None else current_device()
    return submit_work("barrier", dev, lambda enc: None)


_SPEC_KEYS = {"op", "kernel", "inputs", "output", "params"}


def submit(spec: dict) -> Command[Buffer | None]:
    """Submit a command map: ``{"op": "run_kernel", "kernel": ..., "inputs": [...],
    "output": buf, "params": {...}}``; op may also be "copy_buffer" (inputs=[src],
    output=dst) or "barrier". Returns a Command at once."""
    if not isinstance(spec, dict):
        raise ArgumentError(f"spec: expected a dict like {{'op': 'run_kernel', ...}}, got "
                            f"{type(spec).__name__}")
    extra = set(spec) - _SPEC_KEYS
    if extra:
        raise ArgumentError(f"spec: unknown key(s) {', '.join(sorted(map(str, extra)))}; "
                            f"expected {', '.join(sorted(_SPEC_KEYS))}")
    op = spec.get("op", "run_kernel")
    if op == "run_kernel":
        if "kernel" not in spec:
            raise ArgumentError("spec: op 'run_kernel' needs a 'kernel'")
        return run_kernel_async(spec["kernel"], spec.get("inputs", []), spec.get("output"),
                                spec.get("params"))
    if op == "copy_buffer":
        inputs = spec.get("inputs")  # not `or []`: bool() of a Buffer would read the GPU
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 1:
            got = "" if isinstance(inputs, (list, tuple)) else f", got {type(inputs).__name__}"
            raise ArgumentError(f"spec: op 'copy_buffer' needs inputs=[source] (a list of one "
                                f"buffer){got}")
        return copy_buffer_async(inputs[0], spec.get("output"))
    if op == "barrier":
        return barrier_async()
    raise ArgumentError(f"spec: op {op!r} is not one of run_kernel, copy_buffer, barrier")


# -- asynchronous transfers --------------------------------------------------------------------

def start_read(buf: Buffer, cmd: HostCommand) -> None:
    """Queue the GPU copies of ``buf`` into staging now (so the read sees exactly what was
    submitted before it) and finish ``cmd`` with the array on the device's readback thread."""
    dev = buf.device
    nbytes = buf.nbytes
    try:
        out = np.empty(buf.shape, dtype=buf._dt.numpy)
    except MemoryError as e:
        raise DeviceError(f"buf: no host memory for the {nbytes} bytes of {buf!r}") from e
    if nbytes == 0:
        cmd._started = True
        cmd._complete(out)
        return
    # cmd holds buf (a view: its base's memory): freed since cmd was made (a stream's queued
    # read), the memory is still there for this read
    gpu, offset = buf._held_binding("buf")
    read = transfers.Readback(dev, gpu, offset, nbytes)
    cmd._started = True

    def finish():
        try:
            read.finish(out.reshape(-1).view(np.uint8))
        except BaseException as e:
            cmd._fail(e if isinstance(e, WgComputeError) else
                      DeviceError(f"reading {buf!r} back failed: {e}"))
            return
        cmd._complete(out)

    dev.workers.readback().submit(finish)


def read_async(buf: Buffer) -> HostCommand:
    """Start reading ``buf`` back; returns a Command whose result is the numpy array.

    The read sees every command submitted before this call and none submitted after it."""
    check_buffer(buf, "buf")
    _whole_words(buf, "read")
    cmd = HostCommand("read_async", buf.device, [buf])
    try:
        start_read(buf, cmd)
    except BaseException as e:
        cmd._fail(e)
        raise
    return cmd


def write_async(buf: Buffer, data) -> Command[Buffer]:
    """Replace ``buf``'s contents with ``data``; returns a Command done once the GPU copy is.

    The host copy into staging happens in this call (so ``data`` may be reused as soon as it
    returns and later commands see the new contents); only the GPU copy is asynchronous. For
    a copy off the calling thread, use a Stream."""
    check_buffer(buf, "buf")
    _whole_words(buf, "write", end=True)
    arr = _to_array(data, buf._dt, "data")
    if arr.size != buf.size:
        raise ShapeError(f"data: has {arr.size} elements, buffer {buf.shape} holds {buf.size}")
    return write_command(buf, arr, "write_async")


def _whole_words(buf: Buffer, what: str, end: bool = False) -> None:
    """GPU copies move whole 4-byte words: a view must start on one (and, written, end on
    one, or its neighbours in the base would be overwritten)."""
    if buf._base is not None and (buf._offset % 4 or (end and buf.nbytes % 4)):
        raise ArgumentError(f"buf: {buf!r} starts or ends inside a 4-byte word, which GPU "
                            f"copies cannot {what} alone; {what} a copy (buf.copy()) or the "
                            f"base")


def write_command(buf: Buffer, arr: np.ndarray, label: str) -> Command[Buffer]:
    """Upload ``arr`` (already converted, same element count) into ``buf``: the Command
    completes at the last chunk's fence."""
    cmd = Command(label, buf.device, [buf], buf)
    upload_into(cmd, buf, arr)
    return cmd


def upload_into(cmd: Command, buf: Buffer, arr: np.ndarray) -> None:
    """Copy ``arr`` into ``buf`` now (host copy in this thread, GPU copy queued) as the work of
    ``cmd``, which completes at the last chunk's fence (or fails with the error, raised)."""
    try:
        gpu, offset = buf._held_binding("buf")  # cmd holds buf, even if freed since
        fence = transfers.upload(buf.device, gpu, offset, arr) if arr.size else None
    except BaseException as e:
        cmd._fail(e)
        raise
    cmd._attach(fence if fence is not None else _queue.Fence.completed())


def abandon(cmd: Command, error: BaseException) -> None:
    """``cmd`` cannot be submitted (its stream failed before the GPU): it fails with
    ``error`` and lets go of its buffers."""
    if not cmd.done():
        cmd._fail(error)


def follow(cmd: Command, inner: Command) -> None:
    """``cmd`` completes (or fails) when ``inner`` does, with ``inner``'s result."""
    cmd._result = inner._result
    if inner._fence is not None:
        cmd._attach(inner._fence)
    else:
        inner.add_done_callback(lambda c: cmd._fail(c.error) if c.error is not None
                                else cmd._complete(c._result))


# Buffer.read_async/write_async call this module (buffer.py sits below it, so it cannot
# import it)
install_async_transfers(sys.modules[__name__])
