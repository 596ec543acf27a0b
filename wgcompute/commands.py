"""Commands: submit → poll → wait (and await) on real GPU fences, and the synchronous
run_kernel built on them. Nothing here blocks except wait(), run_kernel() and friends."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import OrderedDict
from enum import StrEnum

from . import _queue
from ._encode import Encoder, encode_one_pass
from .buffer import Buffer, check_buffer, empty
from .device import get_device
from .dtypes import DTYPES
from .errors import ArgumentError, CommandFailedError, DtypeError, ShapeError, WgComputeError
from .errors import TimeoutError as WgTimeoutError
from .kernels import Dispatch, Kernel, bind, registry

_ids = itertools.count(1)
_registry_lock = threading.Lock()
_pending: dict[int, Command] = {}
_finished: OrderedDict[int, Command] = OrderedDict()
_KEEP_FINISHED = 10_000


class Status(StrEnum):
    """A command's state; a str, so ``status == "completed"`` works."""

    PENDING = "pending"  # created, not yet handed to the GPU queue
    RUNNING = "running"  # submitted; the GPU has not reached its fence
    COMPLETED = "completed"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class Command:
    """Handle of asynchronous GPU work. ``poll()``/``status``/``done()`` never block;
    ``wait()`` does; ``await cmd`` suspends only the awaiting task."""

    def __init__(self, label: str, buffers=(), result=None):
        self.id = next(_ids)
        self.label = label
        self._fence: _queue.Fence | None = None
        self._error: BaseException | None = None
        self._buffers = [b for b in buffers if b is not None]
        self._result = result
        self._callbacks: list = []
        self._lock = threading.Lock()
        self._done = False
        self._done_event: threading.Event | None = None  # made only for a blocking wait
        for b in self._buffers:
            b._retain()
        _pending[self.id] = self  # one dict operation: atomic, no lock

    def __repr__(self) -> str:
        return f"<wgc.Command {self.id} {self.label!r} {self.status.value}>"

    # -- state -----------------------------------------------------------------------------
    @property
    def status(self) -> Status:
        if self._error is not None:
            return Status.FAILED
        f = self._fence
        if f is None:
            return Status.PENDING
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

    # -- wiring ------------------------------------------------------------------------------
    def _attach(self, fence: _queue.Fence) -> None:
        self._fence = fence
        fence.add_callback(self._on_fence)

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._finish()

    def _on_fence(self, fence) -> None:
        self._finish()

    def _finish(self) -> None:
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
        # finished before it leaves pending, so lookup() always finds it in one of the two
        _finished[self.id] = self
        _pending.pop(self.id, None)
        if len(_finished) > _KEEP_FINISHED:
            with _registry_lock:
                while len(_finished) > _KEEP_FINISHED:
                    _finished.popitem(last=False)
        for fn in callbacks:
            _queue._safe_call(fn, self)

    def add_done_callback(self, fn) -> None:
        """Call ``fn(command)`` once the command completes or fails. It runs on
        wgcompute's fence thread (or at once if already done): keep it short."""
        if not callable(fn):
            raise ArgumentError(f"fn: expected a callable, got {type(fn).__name__}")
        with self._lock:
            if not self._done:
                self._callbacks.append(fn)
                return
        _queue._safe_call(fn, self)

    def _wait_done(self, timeout: float | None) -> bool:
        """Block until ``_finish`` ran (a command not yet handed to the queue has no fence
        to poll); threading.Event costs 2.6 µs to create, so it is made only here."""
        with self._lock:
            if self._done:
                return True
            if self._done_event is None:
                self._done_event = threading.Event()
            event = self._done_event
        return event.wait(timeout)

    # -- blocking ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None):
        """Block until done and return the command's result (its output buffer, if any).
        Raises CommandFailedError (with ``cause``) if it failed, TimeoutError on timeout."""
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise ArgumentError(f"timeout: expected a non-negative number of seconds or None, "
                                f"got {timeout!r}")
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
            if f is not None and not _queue.wait(f, timeout):
                raise WgTimeoutError(f"{self!r} did not finish within {timeout} s")
            self._finish()
        err = self.error
        if err is not None:
            raise CommandFailedError(f"command {self.id} ({self.label}) failed: {err}", err)
        return self._result

    def result(self, timeout: float | None = None):
        return self.wait(timeout)

    def __await__(self):
        if not self.done():
            loop = asyncio.get_running_loop()
            fut = loop.create_future()

            def wake(_cmd):
                loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

            self.add_done_callback(wake)
            yield from fut.__await__()
        return self.wait()


def lookup(cmd) -> Command:
    if isinstance(cmd, Command):
        return cmd
    if isinstance(cmd, int) and not isinstance(cmd, bool):
        c = _pending.get(cmd) or _finished.get(cmd)
        if c is None:
            raise ArgumentError(f"cmd: no command with id {cmd} (unknown, or finished long ago)")
        return c
    raise ArgumentError(f"cmd: expected a Command or its integer id, got {type(cmd).__name__}")


def poll(cmd) -> Status:
    """The command's status, without blocking: pending, running, completed or failed."""
    return lookup(cmd).status


def wait(cmd, timeout: float | None = None):
    """Block until the command is done; returns its result (see Command.wait)."""
    return lookup(cmd).wait(timeout)


# -- binding cache: a second identical call creates no GPU object --------------------------

_BIND_CACHE_SIZE = 256
_bind_cache: OrderedDict = OrderedDict()
_bind_lock = threading.Lock()


def _freeze(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v


def bound(kernel: Kernel, inputs, output: Buffer, params) -> Dispatch:
    """bind(), cached by kernel, buffer identities and params."""
    try:
        key = (kernel.name, id(kernel), tuple([b._id for b in inputs]), output._id,
               _freeze(params) if params else ())
        # Reads take no lock (OrderedDict's get and move_to_end are atomic); a writer may
        # evict the key in between, which only makes it less recently used.
        d = _bind_cache.get(key)  # hashes the key: unhashable params raise here
        if d is not None:
            try:
                _bind_cache.move_to_end(key)
            except KeyError:
                pass
    except (AttributeError, TypeError):
        return bind(kernel, inputs, output, params)
    if d is not None:
        freed = output._freed
        for b in inputs:
            freed = freed or b._freed
        if freed:  # the messages are formatted only when needed
            for name, b in zip(kernel.inputs, inputs):
                b._check(f"{kernel.name}: input {name!r}")
            output._check(f"{kernel.name}: output")
        return d
    d = bind(kernel, inputs, output, params)
    with _bind_lock:
        _bind_cache[key] = d
        while len(_bind_cache) > _BIND_CACHE_SIZE:
            _bind_cache.popitem(last=False)
    return d


def prepare_output(kernel: Kernel, inputs, output, params=None):
    """The output buffer: the given one, or a new one shaped by the kernel from the
    inputs and params (e.g. resize's size, a reduction's axis)."""
    if output is not None:
        return output
    if not isinstance(inputs, (list, tuple)):
        raise ArgumentError(f"{kernel.name}: inputs must be a list of buffers, got "
                            f"{type(inputs).__name__}")
    for name, b in zip(kernel.inputs, inputs):
        check_buffer(b, f"{kernel.name}: input {name!r}")
    if len(inputs) != len(kernel.inputs):
        raise ArgumentError(f"{kernel.name}: takes {len(kernel.inputs)} input(s), got "
                            f"{len(inputs)}")
    resolved = kernel.resolve_params(params, DTYPES[inputs[0].dtype]) if inputs else \
        dict(params or {})
    shape, dtype = kernel.output_spec(list(inputs), resolved)
    return empty(shape, dtype, label=f"{kernel.name}-out")


def _encode_and_submit(label: str, record, cmd: Command, full: bool = False) -> Command:
    """Record with ``record(encoder)``, submit once, attach the fence; GPU errors fail the
    command instead of raising. ``full``: wgpu-py's encoder (render passes, textures), not
    the compute-and-copy one of the hot paths."""
    try:
        enc = get_device().gpu_device.create_command_encoder() if full else Encoder()
        record(enc)
        fence = _queue.submit([enc.finish()])
    except WgComputeError as e:
        cmd._fail(e)
        raise
    except Exception as e:  # validation error, out of memory, device lost
        cmd._fail(e)
        return cmd
    cmd._attach(fence)
    return cmd


def _bound_run(kernel, inputs, output, params):
    """Check and bind one kernel run: (kernel, the output buffer, its Dispatch)."""
    k = registry.get(kernel)
    if not isinstance(inputs, (list, tuple)):
        raise ArgumentError(f"{k.name}: inputs must be a list of buffers, got "
                            f"{type(inputs).__name__}")
    output = prepare_output(k, inputs, output, params)
    return k, output, bound(k, list(inputs), output, params)


def kernel_command(kernel, inputs, output=None, params=None):
    """Check and bind one kernel run: (kernel name, its Command, record(encoder)). The
    caller submits ``record`` with ``_encode_and_submit`` now or later (streams)."""
    k, output, d = _bound_run(kernel, inputs, output, params)
    cmd = Command(k.name, list(inputs) + [output], output)

    def record(enc):  # enc: an _encode.Encoder (_encode_and_submit without full)
        if d.launches:
            enc.record(d)

    return k.name, cmd, record


def run_kernel_async(kernel, inputs, output=None, params=None) -> Command:
    """Submit one kernel and return its Command at once (result: the output buffer)."""
    name, cmd, record = kernel_command(kernel, inputs, output, params)
    return _encode_and_submit(name, record, cmd)


def run_kernel(kernel, inputs, output=None, params=None) -> Buffer:
    """Run a named kernel and return when its output is ready (returns the output).

    The same as ``run_kernel_async(...).wait()`` without the Command: no handle outlives
    the call, so none is built (a few µs of a tiny kernel's round trip)."""
    k, output, d = _bound_run(kernel, inputs, output, params)
    run_blocking(f"run_kernel {k.name}", [*inputs, output], calls=d.raw_calls())
    return output


def run_blocking(label: str, buffers, record=None, calls=None) -> None:
    """Record with ``record(encoder)``, or one compute pass of raw ``calls`` (see
    ``_encode.record_calls``), submit and wait: the synchronous path of run_kernel and
    Pipeline.run, with no Command and no poll-thread wake-up. The buffers are held meanwhile
    (a free() from another thread is deferred, as for Commands). A failure raises
    CommandFailedError carrying the cause."""
    for b in buffers:
        b._retain()
    try:
        try:
            if calls:
                cb = encode_one_pass(calls)
            else:
                enc = Encoder()
                if record is not None:
                    record(enc)
                cb = enc.finish()
        except WgComputeError:
            raise
        except Exception as e:  # validation error, out of memory
            raise CommandFailedError(f"{label} failed: {e}", e) from e
        error = _queue.submitter().submit_and_wait(cb)
        if error is not None:  # device lost
            raise CommandFailedError(f"{label} failed: {error}", error)
    finally:
        for b in buffers:
            b._release()


# From this size on a GPU a copy runs as the "copy" kernel (16-byte words): on an H200 the
# encoder's copy_buffer_to_buffer reached 844 GB/s where a shader copy reaches ~4,000. On
# CPU adapters (lavapipe) the encoder's copy is a memcpy and 6x faster than the shader.
SHADER_COPY_MIN = 1 << 20
SHADER_COPY_GPU_ONLY = True


def copy_dispatch(src: Buffer, dst: Buffer) -> Dispatch | None:
    """The bound copy kernel for a large copy on a GPU, None otherwise (encoder copy)."""
    if src.nbytes < SHADER_COPY_MIN or (SHADER_COPY_GPU_ONLY and not get_device().is_gpu):
        return None
    return bound(registry.get("copy"), [src], dst, None)


def encode_copy(enc, src: Buffer, dst: Buffer, d: Dispatch | None) -> None:
    if d is not None:
        cpass = enc.begin_compute_pass()
        d.encode(cpass)
        cpass.end()
    elif src.nbytes:
        enc.copy_buffer_to_buffer(src.gpu_buffer, 0, dst.gpu_buffer, 0,
                                  (src.nbytes + 3) // 4 * 4)


def copy_buffer_async(src: Buffer, dst: Buffer) -> Command:
    """Copy ``src`` into ``dst`` (same dtype and element count); returns a Command."""
    check_copy(src, dst)
    d = copy_dispatch(src, dst)
    cmd = Command("copy_buffer", [src, dst], dst)
    return _encode_and_submit("copy_buffer", lambda enc: encode_copy(enc, src, dst, d), cmd)


def check_copy(src, dst, where: str = "copy_buffer") -> None:
    check_buffer(src, f"{where}: source")
    check_buffer(dst, f"{where}: destination")
    if src is dst:
        raise ArgumentError(f"{where}: source and destination are the same buffer")
    if src.dtype != dst.dtype:
        raise DtypeError(f"{where}: source is {src.dtype}, destination is {dst.dtype}")
    if src.size != dst.size:
        raise ShapeError(f"{where}: source {src.shape} has {src.size} elements, destination "
                         f"{dst.shape} has {dst.size}")


def barrier_async() -> Command:
    """A command that completes once everything submitted before it has completed."""
    cmd = Command("barrier")
    return _encode_and_submit("barrier", lambda enc: None, cmd)


_SPEC_KEYS = {"op", "kernel", "inputs", "output", "params"}


def submit(spec: dict) -> Command:
    """Submit a command given as a dict: ``{"op": "run_kernel", "kernel": ..., "inputs": [...],
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
        inputs = spec.get("inputs") or []
        if not isinstance(inputs, (list, tuple)) or len(inputs) != 1:
            raise ArgumentError("spec: op 'copy_buffer' needs inputs=[source]")
        return copy_buffer_async(inputs[0], spec.get("output"))
    if op == "barrier":
        return barrier_async()
    raise ArgumentError(f"spec: op {op!r} is not one of run_kernel, copy_buffer, barrier")
