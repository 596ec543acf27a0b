"""Streams: ordered lanes of GPU work over WebGPU's one queue, events between them, async
transfers (read_async, write_async, upload) and stream_map, the prefetching batch pipeline.

WebGPU gives a device ONE in-order queue, and wgcompute._queue is the only place that submits.
A Stream is therefore not a hardware queue but a host thread that performs its operations in
order: the host part of each (exact conversion, memcpy into mapped staging) runs on that
thread, then its GPU part is submitted. Two streams' submissions interleave in whatever order
their threads reach the queue; ``other.wait_event(ev)`` holds back ``other``'s later
submissions until everything before ``ev`` has been *submitted*, and the in-order queue does
the rest. Overlap comes from host threads copying batch N+1 while the GPU works on batch N,
from the GPU running queued submissions back to back, and from readbacks that map and copy
out on their own thread while later work is already queued. docs/guide/streams.md explains
more."""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _queue, _staging
from ._args import check_batch
from ._args import check_timeout as _check_timeout
from ._encode import Encoder
from .buffer import Buffer, _to_array, check_buffer, empty
from .buffer import buffer as _new_buffer
from .commands import Command, Status, _encode_and_submit, bound, kernel_command, prepare_output
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, CommandFailedError, DeviceError, ShapeError, WgComputeError
from .errors import TimeoutError as WgTimeoutError
from .kernels import Kernel, registry

log = logging.getLogger("wgcompute")

__all__ = ["Stream", "Event", "HostCommand", "Timeline", "StreamMap", "create_stream",
           "stream_map", "upload", "read_async", "write_async"]


# -- commands completed by host work -------------------------------------------------------

class HostCommand(Command):
    """A Command that completes when host work after the GPU has finished (copying a
    readback out of mapped staging), not at a queue fence. Its result is set by that work."""

    def __init__(self, label: str, buffers=()):
        super().__init__(label, buffers)
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

    def wait(self, timeout: float | None = None):
        _check_timeout(timeout)
        if not self._wait_done(timeout):
            raise WgTimeoutError(f"{self!r} did not finish within {timeout} s")
        if self._error is not None:
            raise CommandFailedError(f"command {self.id} ({self.label}) failed: {self._error}",
                                     self._error)
        return self._result

    def _complete(self, result) -> None:
        self._result = result
        self._finish()


_readback_pool: ThreadPoolExecutor | None = None
_readback_lock = threading.Lock()


def _readback() -> ThreadPoolExecutor:
    """One thread that waits for readback maps and copies them out, in submission order."""
    global _readback_pool
    with _readback_lock:
        if _readback_pool is None:
            _readback_pool = ThreadPoolExecutor(1, thread_name_prefix="wgcompute-readback")
        return _readback_pool


def _start_read(buf: Buffer, cmd: HostCommand) -> None:
    """Queue the GPU copies of ``buf`` into staging now (so the read sees exactly what was
    submitted before it) and finish ``cmd`` with the array on the readback thread."""
    nbytes = buf.nbytes
    out = np.empty(buf.shape, dtype=buf._dt.numpy)
    if nbytes == 0:
        cmd._started = True
        cmd._complete(out)
        return
    parts = _staging.submit_download(buf._gpu, 0, nbytes)  # checked, and retained by cmd
    cmd._started = True

    def finish():
        try:
            _staging.finish_download(parts, out.reshape(-1).view(np.uint8))
        except BaseException as e:
            cmd._fail(DeviceError(f"reading {buf!r} back failed: {e}"))
            return
        cmd._complete(out)

    _readback().submit(finish)


def read_async(buf: Buffer) -> HostCommand:
    """Start reading ``buf`` back; returns a Command whose result is the numpy array.

    The read sees every command submitted before this call and none submitted after it."""
    check_buffer(buf, "buf")
    cmd = HostCommand("read_async", [buf])
    try:
        _start_read(buf, cmd)
    except BaseException as e:
        cmd._fail(e)
        raise
    return cmd


def write_async(buf: Buffer, data) -> Command:
    """Replace ``buf``'s contents with ``data``; returns a Command done once the GPU copy is.

    The host copy into staging happens in this call (so ``data`` may be reused as soon as it
    returns and later commands see the new contents); only the GPU copy is asynchronous. For
    a copy off the calling thread, use a Stream."""
    check_buffer(buf, "buf")
    arr = _to_array(data, buf._dt, "data")
    if arr.size != buf.size:
        raise ShapeError(f"data: has {arr.size} elements, buffer {buf.shape} holds {buf.size}")
    cmd = Command("write_async", [buf], buf)
    try:
        fence = _staging.upload(buf.gpu_buffer, 0, arr) if arr.size else None
    except BaseException as e:
        cmd._fail(e)
        raise
    cmd._attach(fence if fence is not None else _queue.Fence.completed())
    return cmd


def upload(array, label: str = "") -> Buffer:
    """A new buffer with the array's shape, dtype and contents (copied through the mapped
    staging ring). Returns once ``array`` has been copied out; the GPU copy is queued."""
    if isinstance(array, Buffer):
        raise ArgumentError("array: is already a wgc.Buffer; upload takes host data")
    if not isinstance(array, np.ndarray):
        if not (hasattr(array, "__array__") or hasattr(array, "__array_interface__")):
            raise ArgumentError(f"array: expected a numpy array, got {type(array).__name__}")
        array = np.asarray(array)
    resolve_dtype(array.dtype, "array")
    return _new_buffer(array, None, None, label)


# -- timelines ---------------------------------------------------------------------------------

_gpu_clock = threading.Lock()
_gpu_last_end = 0.0

class Timeline:
    """Spans of (batch, stage, start, end) in seconds since the timeline was created, recorded
    from any thread; ``gantt()`` draws them as text. stream_map fills one if given."""

    STAGES = ("load", "upload", "gpu", "download")

    def __init__(self):
        self.t0 = time.perf_counter()
        self.spans: list[tuple[int, str, float, float]] = []
        self._lock = threading.Lock()

    def add(self, batch: int, stage: str, start: float, end: float) -> None:
        """Record a span given in ``time.perf_counter()`` seconds."""
        with self._lock:
            self.spans.append((int(batch), str(stage), start - self.t0, end - self.t0))

    def gpu_span(self, batch: int, t_submit: float, stage: str = "gpu"):
        """A fence callback recording ``stage`` from when the GPU could start this
        submission (its submit time, or the end of the previous GPU span: the queue runs
        in order) until now."""
        def done(_arg=None):
            global _gpu_last_end
            now = time.perf_counter()
            with _gpu_clock:
                start = max(t_submit, _gpu_last_end)
                _gpu_last_end = now
            self.add(batch, stage, start, now)
        return done

    def span(self, batch: int, stage: str):
        """``with tl.span(3, "upload"): ...`` records the block's duration."""
        tl = self

        class _Span:
            def __enter__(self):
                self.start = time.perf_counter()

            def __exit__(self, *exc):
                tl.add(batch, stage, self.start, time.perf_counter())

        return _Span()

    def stages(self) -> list[str]:
        seen = [s for s in self.STAGES if any(x[1] == s for x in self.spans)]
        return seen + sorted({x[1] for x in self.spans} - set(seen))

    def stage_means(self) -> dict[str, float]:
        """Mean duration of each stage over its batches."""
        out = {}
        for st in self.stages():
            d = [e - s for _, name, s, e in self.spans if name == st]
            out[st] = sum(d) / len(d)
        return out

    def total(self) -> float:
        """From the first span's start to the last span's end."""
        if not self.spans:
            return 0.0
        return max(x[3] for x in self.spans) - min(x[2] for x in self.spans)

    def gantt(self, width: int = 72) -> str:
        """One row per batch and stage; each column is total()/width seconds."""
        if not self.spans:
            return "(empty timeline)"
        t_min = min(x[2] for x in self.spans)
        scale = width / max(self.total(), 1e-12)
        marks = {st: (st[0].upper() if i < 9 else "#") for i, st in enumerate(self.stages())}
        rows = []
        for b in sorted({x[0] for x in self.spans}):
            for st in self.stages():
                line = [" "] * width
                hit = False
                for bb, name, s, e in self.spans:
                    if bb != b or name != st:
                        continue
                    hit = True
                    lo = min(width - 1, int((s - t_min) * scale))
                    hi = max(lo + 1, min(width, int(round((e - t_min) * scale))))
                    for i in range(lo, hi):
                        line[i] = marks[st]
                if hit:
                    rows.append(f"batch {b:>3} {st:<9}|{''.join(line)}|")
        legend = ", ".join(f"{m} = {st}" for st, m in marks.items())
        return "\n".join(rows + [f"{'':>19}0{'':>{width - 12}}{self.total() * 1e3:9.1f} ms",
                                 f"({legend})"])


# -- streams ---------------------------------------------------------------------------------

_stream_ids = itertools.count(1)


class _Lane:
    """A stream's state and worker thread (kept apart from Stream so that dropping the
    Stream stops the thread)."""

    def __init__(self, label: str):
        self.label = label
        self.ops: queue.SimpleQueue = queue.SimpleQueue()
        self.cond = threading.Condition()
        self.queued = 0  # operations not yet performed by the worker
        self.outstanding: deque[Command] = deque()  # enqueued, not yet seen done
        self.thread: threading.Thread | None = None
        self.closed = False

    def enqueue(self, op, cmd: Command | None) -> None:
        with self.cond:
            if self.closed:
                raise ArgumentError(f"stream {self.label!r} is closed")
            if cmd is not None:
                self.outstanding.append(cmd)
                while len(self.outstanding) > 64 and self.outstanding[0].done() \
                        and self.outstanding[0].error is None:
                    self.outstanding.popleft()  # keep the list short on long-lived streams
            self.queued += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self.run, daemon=True,
                                               name=f"wgcompute-{self.label}")
                self.thread.start()
        self.ops.put((op, cmd))

    def run(self) -> None:
        while True:
            item = self.ops.get()
            if item is None:
                return
            op, cmd = item
            try:
                op()
            except BaseException as e:  # the op's command carries the failure
                if cmd is not None and not cmd.done():
                    cmd._fail(e)
                elif cmd is None:
                    log.exception("wgcompute: stream %s operation failed", self.label)
            with self.cond:
                self.queued -= 1
                self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            if self.closed:
                return
            self.closed = True
            started = self.thread is not None
        if started:
            self.ops.put(None)


class Event:
    """A point in a stream: done once everything the stream was given before it is done.
    ``query()`` never blocks; ``wait()`` does. Pass it to ``Stream.wait_event``."""

    def __init__(self, stream_label: str, commands):
        self.stream = stream_label
        self._commands = list(commands)
        self._submitted = threading.Event()

    def __repr__(self) -> str:
        state = "done" if self.query() else "pending"
        return f"<wgc.Event of {self.stream!r} {state}>"

    def query(self) -> bool:
        """True once every operation before the event has completed (never blocks)."""
        return self._submitted.is_set() and all(c.done() for c in self._commands)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the event is done (errors stay on the commands that failed)."""
        _check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._submitted.wait(timeout):
            raise WgTimeoutError(f"{self!r}: its stream did not get there within {timeout} s")
        for c in self._commands:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                c.wait(left)
            except CommandFailedError:
                pass


class Stream:
    """An ordered lane of GPU work: its operations are performed and submitted in the order
    given, on the stream's own thread; work in different streams is ordered only by events.

    Methods return at once. Host data handed to ``upload``/``write`` is read on the stream's
    thread: do not modify it until the stream has passed that point (``sync()`` or an event).
    A buffer filled in one stream and used by another needs ``record_event``/``wait_event``."""

    def __init__(self, label: str | None = None, timeline: Timeline | None = None):
        if label is not None and not isinstance(label, str):
            raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
        if timeline is not None and not isinstance(timeline, Timeline):
            raise ArgumentError(f"timeline: expected a wgc.streams.Timeline, got "
                                f"{type(timeline).__name__}")
        self.timeline = timeline
        self.id = next(_stream_ids)
        self.label = label or f"stream-{self.id}"
        self._lane = _Lane(self.label)
        self._failed: list[BaseException] = []

    def __repr__(self) -> str:
        return f"<wgc.Stream {self.label!r}>"

    def __del__(self):
        try:
            self._lane.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.sync()
        else:
            self._wait_quietly()

    # -- work ------------------------------------------------------------------------------
    def _track(self, batch, stage: str, cmd: Command, t_start: float) -> None:
        """Timeline span from t_start until cmd is done (only with a timeline and a batch)."""
        tl = self.timeline
        if tl is None or batch is None:
            return
        cmd.add_done_callback(lambda _c: tl.add(batch, stage, t_start, time.perf_counter()))

    # ``batch`` (an int) only tags the operation in the stream's timeline, if it has one.
    def upload(self, array, label: str = "", *, batch: int | None = None) -> Buffer:
        """A new buffer that this stream fills with ``array`` (shape and dtype from it)."""
        check_batch(batch)
        if isinstance(array, Buffer) or not isinstance(array, np.ndarray):
            raise ArgumentError(f"array: expected a numpy array, got {type(array).__name__}")
        dt = resolve_dtype(array.dtype, "array")
        buf = empty(array.shape, dt, label=label or f"{self.label}-upload")
        self.write(buf, array, batch=batch)
        return buf

    def write(self, buf: Buffer, data, *, batch: int | None = None) -> Command:
        """Copy ``data`` (same number of elements, converted exactly) into ``buf`` in stream
        order; the Command completes once the GPU has the bytes."""
        check_batch(batch)
        check_buffer(buf, "buf")
        arr = _to_array(data, buf._dt, "data")
        if arr.size != buf.size:
            raise ShapeError(f"data: has {arr.size} elements, buffer {buf.shape} holds "
                             f"{buf.size}")
        cmd = Command("stream.write", [buf], buf)

        def op():
            self._track(batch, "upload", cmd, time.perf_counter())
            fence = _staging.upload(buf._gpu, 0, arr) if arr.size else None
            cmd._attach(fence if fence is not None else _queue.Fence.completed())

        self._lane.enqueue(op, cmd)
        return cmd

    def run_kernel(self, kernel, inputs, output: Buffer | None = None,
                   params: dict | None = None, *, batch: int | None = None) -> Command:
        """Run a named kernel in stream order (checked now, submitted on the stream's
        thread); the Command's result is the output buffer."""
        check_batch(batch)
        name, cmd, record = kernel_command(kernel, inputs, output, params)

        def op():
            if self.timeline is not None and batch is not None:
                cmd.add_done_callback(self.timeline.gpu_span(batch, time.perf_counter()))
            try:
                _encode_and_submit(name, record, cmd)
            except WgComputeError:
                pass  # already failed the command

        self._lane.enqueue(op, cmd)
        return cmd

    def run(self, pipeline, *, batch: int | None = None) -> Command:
        """Submit a wgc.Pipeline (or any object with ``submit() -> Command``) in stream
        order; the returned Command follows the one ``submit()`` gives."""
        check_batch(batch)
        if not callable(getattr(pipeline, "submit", None)):
            raise ArgumentError(f"pipeline: expected a wgc.Pipeline (or an object with "
                                f"submit()), got {type(pipeline).__name__}")
        label = getattr(pipeline, "label", type(pipeline).__name__)
        cmd = Command(f"stream.run({label})")

        def op():
            if self.timeline is not None and batch is not None:
                cmd.add_done_callback(self.timeline.gpu_span(batch, time.perf_counter()))
            inner = pipeline.submit()
            if not isinstance(inner, Command):
                raise ArgumentError(f"pipeline: submit() returned {type(inner).__name__}, "
                                    f"not a wgc.Command")
            cmd._result = inner._result
            if inner._fence is not None:
                cmd._attach(inner._fence)
            else:
                inner.add_done_callback(lambda c: cmd._fail(c.error) if c.error is not None
                                        else cmd._finish())

        self._lane.enqueue(op, cmd)
        return cmd

    def download(self, buf: Buffer, *, batch: int | None = None) -> HostCommand:
        """Read ``buf`` back in stream order; the Command's result is the numpy array."""
        check_batch(batch)
        check_buffer(buf, "buf")
        cmd = HostCommand("stream.download", [buf])

        def op():
            self._track(batch, "download", cmd, time.perf_counter())
            _start_read(buf, cmd)

        self._lane.enqueue(op, cmd)
        return cmd

    # -- ordering ------------------------------------------------------------------------------
    def record_event(self) -> Event:
        """An Event done once everything given to this stream so far is done."""
        with self._lane.cond:
            ev = Event(self.label, self._lane.outstanding)
        self._lane.enqueue(ev._submitted.set, None)
        return ev

    def wait_event(self, event: Event) -> None:
        """Later work in this stream is submitted only after everything before ``event``
        has been submitted (the queue then runs it after that work)."""
        if not isinstance(event, Event):
            raise ArgumentError(f"event: expected a wgc.Event (from record_event()), got "
                                f"{type(event).__name__}")
        self._lane.enqueue(event._submitted.wait, None)

    def query(self) -> bool:
        """True if everything given to this stream has completed. Never blocks."""
        lane = self._lane
        with lane.cond:
            if lane.queued:
                return False
            while lane.outstanding and lane.outstanding[0].done():
                self._note(lane.outstanding.popleft())
            return not lane.outstanding

    def sync(self, timeout: float | None = None) -> None:
        """Block until everything given to this stream has completed. Raises
        CommandFailedError for the first operation that failed since the last sync."""
        _check_timeout(timeout)
        self._wait(timeout)
        if self._failed:
            first, self._failed = self._failed[0], []
            raise CommandFailedError(f"stream {self.label!r}: an operation failed: {first}",
                                     first)

    def _note(self, cmd: Command) -> None:
        if cmd.error is not None:
            self._failed.append(cmd.error)

    def _wait(self, timeout) -> None:
        lane = self._lane
        deadline = None if timeout is None else time.monotonic() + timeout
        with lane.cond:
            while lane.queued:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise WgTimeoutError(f"{self!r} did not finish within {timeout} s")
                lane.cond.wait(left)
            pending = list(lane.outstanding)
        for c in pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                c.wait(left)
            except CommandFailedError:
                pass
        with lane.cond:
            while lane.outstanding and lane.outstanding[0].done():
                self._note(lane.outstanding.popleft())

    def _wait_quietly(self) -> None:
        try:
            self._wait(None)
        except WgComputeError:
            pass

    def close(self) -> None:
        """Finish the stream's work and stop its thread; later calls raise ArgumentError."""
        self._wait_quietly()
        self._lane.close()


def release_staging() -> int:
    """Give back the mapped staging memory that transfers and stream_map keep for reuse
    (up to 512 MB per buffer size; pinned host memory on a discrete GPU). Returns the bytes
    released. Staging of 1 MB or more is also given back by itself once no transfer has
    taken it for WGCOMPUTE_STAGING_IDLE_S seconds (30). Staging in use, or held by a
    stream_map result, is not touched; the next transfer makes new staging as it needs (on
    an H200 host ~15 ms per 64 MB)."""
    return _staging.release_free()


def create_stream(label: str | None = None, timeline: Timeline | None = None) -> Stream:
    """A new Stream (an ordered lane of GPU work with its own host thread). With a
    ``timeline``, operations given a ``batch=`` tag record their spans in it."""
    return Stream(label, timeline)


# -- stream_map: the prefetching batch pipeline ---------------------------------------------------

_STOP = object()


class _Slot:
    """One batch's worth of GPU memory: mapped upload staging, input and output buffers,
    readback staging. Reused while the batch shape repeats."""

    def __init__(self, index: int):
        self.index = index
        self.key = None
        self.up = None  # MAP_WRITE staging, mapped (or mapping) while the slot is free
        self.up_promise = None
        self.down = None
        self.spare = None  # free readback staging to take down's place when a result keeps it
        self.inp: Buffer | None = None
        self.out: Buffer | None = None
        self.own_io = True  # False when inp/out belong to a Pipeline

    def release_gpu(self) -> None:
        """Free the slot's memory; its staging goes back to the transfer pools (the next
        stream_map or transfer reuses it: new 64 MB staging cost its first batch 20-40 ms
        of mapping and page faults on the H200 host) unless a failure left it in an
        unknown state (``key`` None)."""
        healthy = self.key is not None
        if self.up is not None:
            try:
                if self.up_promise is not None:
                    self.up_promise.wait()
            except Exception:
                healthy = False
            if healthy:
                _staging.up_pool.release(self.up)
            else:
                self.up.destroy()
        if self.spare is not None:  # never used: in the pool's state
            _staging.down_pool.release(self.spare)
        if self.down is not None:
            if healthy:
                _staging.down_pool.release(self.down)
            else:
                self.down.destroy()
        if self.own_io:
            for b in (self.inp, self.out):
                if b is not None:
                    b.free()
        self.up = self.down = self.spare = self.inp = self.out = self.up_promise = None
        self.key = None


class _Work:
    """What runs on each batch: a kernel (per-slot output), a Pipeline (its own first input
    and last output), or a callable(inp, out)."""

    def __init__(self, work, params, out_shape, out_dtype):
        self.kernel: Kernel | None = None
        self.pipeline = None
        self.fn = None
        self.params = params
        self.out_shape = out_shape
        self.out_dtype = out_dtype
        if isinstance(work, (str, Kernel)):
            self.kernel = registry.get(work)
            if len(self.kernel.inputs) != 1 or self.kernel.output is None:
                raise ArgumentError(f"work: kernel {self.kernel.name!r} takes "
                                    f"{len(self.kernel.inputs)} inputs; stream_map needs a "
                                    f"kernel of one input and one output (or pass a callable)")
            if out_shape is not None or out_dtype is not None:
                raise ArgumentError("out_shape/out_dtype: only for a callable; a kernel's "
                                    "output is shaped by the kernel")
        elif _is_pipeline(work):
            if params is not None or out_shape is not None or out_dtype is not None:
                raise ArgumentError("params/out_shape/out_dtype: not used with a Pipeline "
                                    "(its stages hold them)")
            stages = work.stages
            if not stages or not stages[0].get("inputs") or stages[-1].get("output") is None:
                raise ArgumentError("work: the pipeline needs a first stage with an input and "
                                    "a last stage with an output")
            self.pipeline = work
            self.p_in = stages[0]["inputs"][0]
            self.p_out = stages[-1]["output"]
        elif callable(work):
            if params is not None:
                raise ArgumentError("params: only for a kernel name; a callable sets its own")
            self.fn = work
        else:
            raise ArgumentError(f"work: expected a kernel name, a wgc.Pipeline or a "
                                f"callable(inp, out), got {type(work).__name__}")

    def out_spec(self, inp: Buffer):
        if self.kernel is not None:
            return self.kernel.output_spec([inp], {})
        shape = inp.shape if self.out_shape is None else self.out_shape
        dt = inp.dtype if self.out_dtype is None else resolve_dtype(self.out_dtype).name
        return shape, dt


def _is_pipeline(obj) -> bool:
    try:
        from .pipeline import Pipeline
    except ImportError:  # pragma: no cover - pipeline.py is part of the package
        return False
    return isinstance(obj, Pipeline)


class _MapState:
    """Everything stream_map's threads share (the iterator object only holds this, so that
    dropping the iterator closes it)."""

    def __init__(self, work: _Work, batches, depth: int, timeline: Timeline | None):
        self.work = work
        self.source = iter(batches)
        self.depth = depth
        self.timeline = timeline
        self.closed = False
        self.slots: queue.Queue[_Slot] = queue.Queue()
        self.all_slots = [_Slot(i) for i in range(depth)]
        for s in self.all_slots:
            self.slots.put(s)
        self.inflight = threading.Semaphore(depth)
        self.loaded: queue.Queue = queue.Queue(maxsize=max(1, depth - 1))
        self.readbacks: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []

    # -- stages ----------------------------------------------------------------------------------
    def load(self, k: int):
        """Next batch from the source: (array) or raises StopIteration / the source's error."""
        t0 = time.perf_counter()
        item = next(self.source)
        if self.timeline is not None:
            self.timeline.add(k, "load", t0, time.perf_counter())
        return item

    def prepare(self, slot: _Slot, arr: np.ndarray, dt) -> None:
        key = (arr.shape, dt.name)
        if slot.key == key:
            return
        slot.release_gpu()
        w = self.work
        if w.pipeline is not None:
            slot.own_io = False
            inp, out = w.p_in, w.p_out
            if inp.shape != arr.shape or inp.dtype != dt.name:
                raise ShapeError(f"batch: is {arr.shape} {dt.name}, but the pipeline's first "
                                 f"input is {inp.shape} {inp.dtype}")
        else:
            slot.own_io = True
            inp = empty(arr.shape, dt, label=f"stream_map-in{slot.index}")
            try:
                shape, odt = w.out_spec(inp)
                if w.kernel is not None:
                    out = prepare_output(w.kernel, [inp], None, w.params)
                else:
                    out = empty(shape, odt, label=f"stream_map-out{slot.index}")
            except BaseException:
                inp.free()
                raise
        slot.inp, slot.out = inp, out
        up_size = max(4, (inp.nbytes + 3) & ~3)
        down_size = max(4, (out.nbytes + 3) & ~3)
        slot.up = _staging.up_pool.acquire(up_size)  # mapped for writing
        slot.up_promise = None
        slot.down = _staging.down_pool.acquire(down_size)
        if down_size >= _staging.LEASE_MIN:  # what the slot's first result leaves in its place
            slot.spare = _staging.down_pool.acquire(down_size)
            # and two for the results a caller holds while the next ones come
            _staging.down_pool.ensure_free(down_size, 2)
        slot.key = key

    def issue(self, k: int, item, slot: _Slot):
        """Host copy into the slot's staging, then submit copy-in, the work and copy-out.
        Returns the readback job."""
        tl = self.timeline
        if isinstance(item, Buffer) or not (isinstance(item, np.ndarray) or
                                            hasattr(item, "__array__")):
            raise ArgumentError(f"batches[{k}]: expected a numpy array, got "
                                f"{type(item).__name__}")
        arr = np.asarray(item)
        dt = resolve_dtype(arr.dtype, f"batches[{k}]")
        t0 = time.perf_counter()
        self.prepare(slot, arr, dt)
        if slot.up_promise is not None:
            slot.up_promise.wait()
            slot.up_promise = None
        n = arr.nbytes
        padded = (n + 3) & ~3
        if padded:
            view = _staging.mapped_write(slot.up, padded)
            _staging.copy_bytes(view[:n], np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
            if padded != n:
                view[n:padded] = 0
            del view
        _staging.unmap(slot.up)
        w = self.work
        inp, out = slot.inp, slot.out
        out_padded = (out.nbytes + 3) & ~3
        user_cmd = None
        enc = Encoder()
        if padded:
            enc.copy_buffer_to_buffer(slot.up, 0, inp.gpu_buffer, 0, padded)
        if w.fn is None:
            if w.kernel is not None:
                d = bound(w.kernel, [inp], out, w.params)
                if d.launches:
                    cpass = enc.begin_compute_pass()
                    d.encode(cpass)
                    cpass.end()
            else:
                w.pipeline.encode(enc)
        else:
            _queue.submit([enc.finish()])
            user_cmd = w.fn(inp, out)
            if user_cmd is not None and not isinstance(user_cmd, Command):
                raise ArgumentError(f"work: the callable returned {type(user_cmd).__name__}; "
                                    f"expected a wgc.Command or None")
            enc = Encoder()
        if out_padded:
            enc.copy_buffer_to_buffer(out.gpu_buffer, 0, slot.down, 0, out_padded)
        t_submit = time.perf_counter()
        fence = _queue.submit([enc.finish()])
        slot.up_promise = _staging.map_async(slot.up, True, slot.up.size)
        promise = _staging.map_async(slot.down, False, max(4, out_padded)) \
            if out_padded else None
        if tl is not None:
            tl.add(k, "upload", t0, t_submit)
            fence.add_callback(tl.gpu_span(k, t_submit))
        # A large result is the readback staging itself (leased to the array, no copy) when
        # a free one can replace it in the slot; otherwise a new array, faulted in while the
        # GPU works.
        spare = self.spare(slot, out_padded) if out_padded >= _staging.LEASE_MIN else None
        fresh = None if spare is not None else _staging.Fresh(out.shape, out._dt.numpy)
        return (k, slot, fence, promise, user_cmd, fresh, spare)

    def spare(self, slot: _Slot, nbytes: int):
        """Free readback staging to replace the slot's, which its result will keep: the
        slot's own spare, else a free one from the pool; None if there is none (the result is
        then copied out). Staging is only made in prepare(): pinning new staging cost the
        H200 host ~15 ms per 64 MB and held up the submissions beside it. Results dropped as
        they come bring theirs back to the pool; results kept (in a list) soon leave none."""
        if not _staging.reserve_lease():
            return None
        buf, slot.spare = slot.spare, None
        if buf is None:
            buf = _staging.down_pool.take_free(nbytes)
        if buf is None:
            _staging.cancel_lease()
        return buf

    def finish(self, job):
        """Wait for the readback; the result is the leased staging or a copy of it in a new
        array. Returns (k, array | error)."""
        k, slot, fence, promise, user_cmd, fresh, spare = job
        t0 = None
        try:
            out = slot.out
            result = fresh.get() if fresh is not None else None
            if promise is not None:
                promise.wait()
                t0 = time.perf_counter()
                if spare is None:
                    n = out.nbytes
                    view = _staging.mapped_read(slot.down, (n + 3) & ~3)
                    _staging.copy_bytes(result.reshape(-1).view(np.uint8), view[:n])
                    del view
                    _staging.unmap(slot.down)
            _queue.wait(fence)
            err = fence.error
            if err is None and user_cmd is not None:
                try:
                    user_cmd.wait()
                except CommandFailedError as e:
                    err = e.cause or e
            if err is not None:
                raise CommandFailedError(f"stream_map: batch {k} failed on the GPU: {err}",
                                         err)
            if spare is not None:  # the array owns the lease and this staging from here
                leased, slot.down, spare = slot.down, spare, None
                result = _staging.lease_read(leased, out.nbytes).view(
                    out._dt.numpy).reshape(out.shape)
        except BaseException as e:
            if spare is not None:
                _staging.cancel_lease()
                _staging.down_pool.release(spare)
            slot.key = None  # its staging may be in any state: rebuild it next time
            return k, e
        finally:
            if self.timeline is not None and t0 is not None:
                self.timeline.add(k, "download", t0, time.perf_counter())
            self.slots.put(slot)
        return k, result

    def fail_slot(self, slot: _Slot) -> None:
        """A batch failed before its submission: the slot's staging may be unmapped."""
        slot.key = None
        slot.release_gpu()
        self.slots.put(slot)

    # -- threads (depth >= 2) ----------------------------------------------------------------------
    def start(self) -> None:
        for target, name in ((self._loader, "load"), (self._issuer, "issue"),
                             (self._reader, "readback")):
            t = threading.Thread(target=target, daemon=True, name=f"wgcompute-stream_map-{name}")
            t.start()
            self.threads.append(t)

    def _put(self, q: queue.Queue, item) -> bool:
        while not self.closed:
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _loader(self) -> None:
        for k in itertools.count():
            try:
                item = self.load(k)
            except StopIteration:
                self._put(self.loaded, _STOP)
                return
            except BaseException as e:
                self._put(self.loaded, (k, e, True))
                return
            if not self._put(self.loaded, (k, item, False)):
                return

    def _issuer(self) -> None:
        while not self.closed:
            if not self.inflight.acquire(timeout=0.05):
                continue
            item = None
            while not self.closed and item is None:
                try:
                    item = self.loaded.get(timeout=0.05)
                except queue.Empty:
                    pass
            if item is None:
                return
            if item is _STOP:
                self.readbacks.put(_STOP)
                return
            k, value, fatal = item
            if fatal:
                self.readbacks.put((k, value, True))
                return
            slot = None
            while not self.closed and slot is None:
                try:
                    slot = self.slots.get(timeout=0.05)
                except queue.Empty:
                    pass
            if slot is None:
                return
            try:
                job = self.issue(k, value, slot)
            except BaseException as e:
                self.fail_slot(slot)
                self.readbacks.put((k, e, False))
                continue
            self.readbacks.put(job)

    def _reader(self) -> None:
        while True:
            job = self.readbacks.get()
            if job is _STOP:
                self.results.put(_STOP)
                return
            if len(job) == 3:  # (k, error, fatal): failed before the GPU
                self.results.put(job)
                if job[2]:
                    return
                continue
            k, value = self.finish(job)
            self.results.put((k, value, False))

    def close(self) -> None:
        self.closed = True
        loader, issuer, reader = (self.threads + [None, None, None])[:3]
        for t in (loader, issuer):
            if t is not None and t is not threading.current_thread():
                t.join(timeout=5)
        if reader is not None:
            # The reader drains the jobs still in flight (their slots return when their
            # readback finished), then stops.
            self.readbacks.put(_STOP)
            if reader is not threading.current_thread():
                reader.join(timeout=30)
        for s in self.all_slots:
            s.release_gpu()


class StreamMap:
    """The iterator stream_map returns: results in input order, at most ``depth`` batches
    in flight. Use it in a for loop; ``close()`` (or leaving a ``with`` block) stops the
    threads and frees the per-slot GPU memory early."""

    def __init__(self, state: _MapState):
        self._state = state
        self._k = 0
        self._done = False
        # Closed when this iterator is dropped. A finalizer, not __del__: it holds the state,
        # so when the iterator dies in a reference cycle the state (slots, staging) is not
        # part of the garbage, and the collector cannot release the staging buffers before
        # close() hands them back to the pools.
        self._closer = weakref.finalize(self, state.close)
        self._closer.atexit = False

    def __iter__(self) -> StreamMap:
        return self

    def __enter__(self) -> StreamMap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._done = True
        self._closer()  # runs state.close() once

    def __next__(self) -> np.ndarray:
        st = self._state
        if self._done or st.closed:
            raise StopIteration
        if st.depth == 1:
            return self._next_sequential()
        item = st.results.get()
        if item is _STOP:
            self._done = True
            self.close()
            raise StopIteration
        k, value, fatal = item
        st.inflight.release()
        self._k = k + 1
        if fatal:
            self._done = True
            self.close()
        if isinstance(value, BaseException):
            _raise_at(k, value)
        return value

    def _next_sequential(self) -> np.ndarray:
        st = self._state
        k = self._k
        self._k += 1
        try:
            item = st.load(k)
        except StopIteration:
            self.close()
            raise
        except BaseException as e:
            self.close()
            _raise_at(k, e)
        slot = st.slots.get()
        try:
            job = st.issue(k, item, slot)
        except BaseException as e:
            st.fail_slot(slot)
            _raise_at(k, e)
        _, value = st.finish(job)
        if isinstance(value, BaseException):
            _raise_at(k, value)
        return value


def _raise_at(k: int, e: BaseException):
    if not any(f"batch {k}" in n for n in getattr(e, "__notes__", ())):
        e.add_note(f"(raised by stream_map batch {k})")
    raise e


def stream_map(work, batches, depth: int = 3, *, params: dict | None = None,
               out_shape=None, out_dtype=None, timeline: Timeline | None = None) -> StreamMap:
    """Run ``work`` on every batch of ``batches``; yields each batch's result as a numpy
    array, in input order, while later batches upload and earlier ones download.

    ``work`` is one of:

    * a kernel name (or Kernel) of one input and one output, run with ``params``; the output
      is shaped by the kernel;
    * a wgc.Pipeline: each batch is copied into its first stage's first input, the pipeline
      runs, and its last stage's output is read back (the in-order queue keeps batches apart);
    * a callable ``work(inp, out)`` that queues GPU work reading buffer ``inp`` and writing
      buffer ``out`` (shaped ``out_shape``/``out_dtype``, by default like ``inp``) and returns
      the Command it submitted (or None). It is called on stream_map's submit thread, in
      batch order.

    ``batches`` is a list or any iterable (a generator that loads data is read on its own
    thread, ahead of the GPU). ``depth`` is how many batches may be in flight: 1 runs them one
    after another (the baseline), 2 is double and 3 triple buffering. Each slot's GPU buffers
    and mapped staging are reused while batch shapes repeat. An error in batch k is raised
    at position k of the iterator (earlier results all come first); iteration may continue
    after it, unless the error came from ``batches`` itself. A ``timeline`` keeps a span per
    stage and batch: give one to finite runs only.

    A result of 1 MB or more is, when free staging can take its place, an array over the
    mapped readback staging itself (no copy; ``flags.owndata`` is False): it keeps that
    staging until it and all its views are dropped. Results used and dropped as they come
    circulate a few staging buffers; results kept (in a list) are copied once none is free
    (docs/guide/streams.md)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ArgumentError(f"depth: expected an int >= 1 (1 sequential, 2 double, 3 triple "
                            f"buffering), got {depth!r}")
    if isinstance(batches, (np.ndarray, Buffer)):
        raise ArgumentError("batches: expected a list or iterable of arrays, got one "
                            f"{type(batches).__name__} (wrap it in a list)")
    try:
        iter(batches)
    except TypeError:
        raise ArgumentError(f"batches: expected a list or iterable of numpy arrays, got "
                            f"{type(batches).__name__}") from None
    if timeline is not None and not isinstance(timeline, Timeline):
        raise ArgumentError(f"timeline: expected a wgc.streams.Timeline, got "
                            f"{type(timeline).__name__}")
    if out_dtype is not None:
        resolve_dtype(out_dtype, "out_dtype")
    if out_shape is not None:
        from .buffer import normalize_shape
        out_shape = normalize_shape(out_shape, "out_shape")
    state = _MapState(_Work(work, params, out_shape, out_dtype), batches, depth, timeline)
    if depth > 1:
        state.start()
    return StreamMap(state)

