"""Commands: submit -> poll -> wait (and await) on real GPU fences, the one submit path every
kind of work goes through (kernels, copies, pipelines, presents, transfers), and the synchronous
run_kernel. Nothing here blocks except wait(), run_kernel() and friends."""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
import weakref
from collections.abc import Generator
from enum import StrEnum
from typing import Any, Generic, TypeVar

import numpy as np

from . import _queue, transfers
from ._args import check_buffer_list, check_timeout
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
from .errors import TimeoutError as WgTimeoutError
from .kernels import Dispatch, Kernel, bind, registry
from .kernels.core.base import MultiDispatch
from .kernels.core.bind import same_device
from .runtime import Device, current_device, open_devices

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
            loop = asyncio.get_running_loop()
            fut = loop.create_future()

            def wake(_cmd):
                loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

            self.add_done_callback(wake)
            yield from fut.__await__()
        return self.wait()


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
        fence = device.submitter.submit([enc.finish()])
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
                if calls:
                    cb = device.link.one_pass(calls)
                else:
                    enc = device.link.encoder()
                    if record is not None:
                        record(enc)
                    cb = enc.finish()
            except WgComputeError:
                raise
            except Exception as e:  # validation error, out of memory
                if not device.alive or "lost" in str(e).lower():
                    raise device.wrap(e, label) from e
                raise CommandFailedError(f"{label} failed: {e}", e) from e
            box = device.submitter.submit_sync(cb)
        finally:
            recording.pop()
        error = device.submitter.wait_sync(box)
        if error is not None:
            if not device.alive:
                raise device.wrap(error, label) from error
            raise CommandFailedError(f"{label} failed: {error}", error)
        device.after_wait()
    finally:
        for b in held:
            b._release()


# -- binding cache: a second identical call creates no GPU object ------------------------------

_BIND_CACHE_SIZE = 256


def _freeze(v):
    if isinstance(v, dict):
        items = [(k, _freeze(x)) for k, x in v.items()]
        try:
            return tuple(sorted(items))
        except TypeError:  # mixed key types (a user's {1: ...}): the kernel refuses them later
            return tuple(sorted(items, key=lambda kv: (type(kv[0]).__name__, repr(kv[0]))))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def bound(kernel: Kernel, inputs, output: Buffer, params) -> Dispatch:
    """bind(), cached per device by kernel, buffer identities and params."""
    try:
        device = output._dev
        # _key is the buffer's id, or for pooled memory (memory serial, shape, dtype): a
        # result reusing pooled memory finds the run bound to it
        key = (kernel.name, id(kernel), tuple([b._key for b in inputs]), output._key,
               _freeze(params) if params else ())
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
        return bind(kernel, inputs, output, params)
    if d is not None:
        freed = output._freed or not device.alive
        for b in inputs:
            freed = freed or b._freed
        if freed:  # the messages are formatted only when needed
            for name, b in zip(kernel.inputs, inputs):
                b._check(f"{kernel.name}: input {name!r}")
            output._check(f"{kernel.name}: output")
        return d
    d = bind(kernel, inputs, output, params)
    if isinstance(d, MultiDispatch) and (type(output._key) is tuple or any(
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
