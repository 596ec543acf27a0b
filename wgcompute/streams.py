"""Streams: ordered lanes of GPU work on one device, with events between them.

WebGPU gives a device ONE in-order queue. A Stream is therefore not a hardware queue but a host
thread that performs its operations in order: the host part of each (exact conversion, memcpy
into mapped staging) runs on that thread, then its GPU part is submitted. Two streams'
submissions interleave in whatever order their threads reach the queue;
``other.wait_event(ev)`` holds back ``other``'s later submissions until everything before
``ev`` has been *submitted*, and the in-order queue does the rest. docs/guide/streams.md
explains more."""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque

import numpy as np

from . import _lazy
from ._args import check_batch, check_timeout
from .buffer import Buffer, _to_array, check_buffer, empty
from .buffer import buffer as _new_buffer
from .commands import (
    Command,
    HostCommand,
    abandon,
    follow,
    kernel_work,
    start_read,
    submit_command,
    upload_into,
)
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, CommandFailedError, DeviceError, ShapeError, WgComputeError
from .errors import TimeoutError as WgTimeoutError
from .pipeline import Pipeline
from .runtime import Device, resolve
from .timeline import Timeline

log = logging.getLogger("wgcompute")

__all__ = ["Stream", "Event", "create_stream", "upload", "release_staging"]

_stream_ids = itertools.count(1)


class StreamWorker:
    """A stream's state and worker thread (kept apart from Stream so that dropping the Stream
    stops the thread)."""

    def __init__(self, label: str, device: Device | None = None):
        self.label = label
        self.device = device
        self.ops: queue.SimpleQueue = queue.SimpleQueue()
        self.cond = threading.Condition()
        self.queued = 0  # operations not yet performed by the worker
        self.outstanding: deque[Command] = deque()  # enqueued, not yet seen done
        self.thread: threading.Thread | None = None
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            self._refuse()

    def _refuse(self) -> None:
        """A closed stream: closed with its device (DeviceError, as every object of a closed
        or lost device raises), or by the user (ArgumentError)."""
        dev = self.device
        if dev is not None and not dev.alive:
            dev.check(f"stream {self.label!r}")
        if dev is not None and dev.closed:  # closing: its streams close first
            raise DeviceError(f"stream {self.label!r}: {dev.label} is closed")
        raise ArgumentError(f"stream {self.label!r} is closed")

    def enqueue(self, op, cmd: Command | None) -> None:
        with self.cond:
            if self.closed:
                try:
                    self._refuse()
                except WgComputeError as e:
                    if cmd is not None:  # made before the stream closed: let go of its buffers
                        abandon(cmd, e)
                    raise
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
                if cmd is not None:
                    abandon(cmd, e)
                else:
                    log.exception("wgcompute: stream %s operation failed", self.label)
            with self.cond:
                self.queued -= 1
                self.cond.notify_all()

    def close(self, join: float | None = None) -> None:
        with self.cond:
            if self.closed:
                return
            self.closed = True
            thread = self.thread
        if thread is not None:
            self.ops.put(None)
            if join is not None and thread is not threading.current_thread():
                thread.join(join)


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
        check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._submitted.wait(timeout):
            raise WgTimeoutError(f"{self!r}: its stream did not get there within {timeout} s")
        for c in self._commands:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                c.wait(left)
            except CommandFailedError:
                pass


class StreamBatch(_lazy.Batch):
    """The operators queued inside a ``with stream:`` block: flushed (at the block's end, a
    size bound, or a submit elsewhere on the device) into the stream as one command, which
    the stream's thread records and submits in stream order."""

    def __init__(self, stream: Stream):
        super().__init__(stream.device)
        self.stream = stream

    def thread(self):
        return self.stream._lane.thread

    def _submit(self, after, raises: bool, submit=None):
        ops, self.ops = self.ops, []  # (a read elsewhere waits for the stream's lane instead)
        calls = [c for op in ops for c in op.calls]
        keep = [op.keep for op in ops]  # the bind groups the calls name by handle
        names = list(dict.fromkeys(op.label for op in ops))
        label = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        try:  # the Command holds the buffers now
            cmd = Command(f"run_kernel {label} (queued from {ops[0].site} on)", self.device,
                          [b for op in ops for b in op.buffers])
        finally:
            _lazy.release(ops)

        def op(keep=keep):
            try:
                submit_command(cmd, lambda enc: enc.record_calls(calls))
            except WgComputeError:
                pass  # already failed the command

        self.stream._lane.enqueue(op, cmd)

    def wait_submitted(self) -> None:
        """Wait until the stream's thread has submitted what it was given."""
        lane = self.stream._lane
        with lane.cond:
            while lane.queued and not lane.closed:
                lane.cond.wait(0.1)


class Stream:
    """An ordered lane of GPU work on one device: its operations are performed and submitted
    in the order given, on the stream's own thread; work in different streams is ordered only
    by events.

    Methods return at once. Host data handed to ``upload``/``write`` is read on the stream's
    thread: do not modify it until the stream has passed that point (``sync()`` or an event).
    A buffer filled in one stream and used by another needs ``record_event``/``wait_event``."""

    finish_on_close = True  # Device.close() lets it submit its work before refusing more

    def __init__(self, label: str | None = None, timeline: Timeline | None = None,
                 device: Device | None = None):
        if label is not None and not isinstance(label, str):
            raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
        if timeline is not None and not isinstance(timeline, Timeline):
            raise ArgumentError(f"timeline: expected a wgc.Timeline, got "
                                f"{type(timeline).__name__}")
        self.device = resolve(device)
        self.timeline = timeline
        self.id = next(_stream_ids)
        self.label = label or f"stream-{self.id}"
        self._lane = StreamWorker(self.label, self.device)
        self._failed: list[BaseException] = []
        self._blocks: list = []  # (batch, context token) of each open `with stream:` block
        self.device.adopt(self)

    def __repr__(self) -> str:
        state = " closed" if self._lane.closed else ""
        return f"<wgc.Stream {self.label!r} on device {self.device.ordinal}{state}>"

    def __del__(self):
        try:
            self._lane.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self) -> Stream:
        """Operators and array functions on this stream's device run in the stream for the
        block (the device's queued work is submitted first); leaving it submits them and
        waits for the stream (sync())."""
        self._lane.check_open()
        self.device.flush()
        sb = StreamBatch(self)
        _lazy.batch_of(self.device).streams.append(sb)
        self._blocks.append((sb, _lazy.route(sb)))
        return self

    def __exit__(self, exc_type, *exc) -> None:
        sb, token = self._blocks.pop()
        _lazy.unroute(token)
        try:
            sb.flush()
        finally:
            _lazy.batch_of(self.device).streams.remove(sb)
        if exc_type is None:
            self.sync()
        else:
            self._wait_quietly()

    def _on_device(self, argument: str, buf: Buffer) -> None:
        if buf._dev is not self.device:
            raise DeviceError(f"{argument}: {buf!r} is on {buf._dev.label}, this stream on "
                              f"{self.device.label} (copy with buf.to(device))")

    # -- work ------------------------------------------------------------------------------
    def _track(self, batch, stage: str, cmd: Command, t_start: float) -> None:
        """Timeline span from t_start until cmd is done (only with a timeline and a batch)."""
        tl = self.timeline
        if tl is None or batch is None:
            return
        cmd.add_done_callback(lambda _c: tl.add(batch, stage, t_start, time.perf_counter()))

    # ``batch`` (an int) only tags the operation in the stream's timeline, if it has one.
    def upload(self, array, label: str = "", *, batch: int | None = None) -> Buffer:
        """A new buffer on the stream's device that this stream fills with ``array`` (shape
        and dtype from it)."""
        self._lane.check_open()
        check_batch(batch)
        if isinstance(array, Buffer) or not isinstance(array, np.ndarray):
            raise ArgumentError(f"array: expected a numpy array, got {type(array).__name__}")
        dt = resolve_dtype(array.dtype, "array")
        buf = empty(array.shape, dt, label=label or f"{self.label}-upload", device=self.device)
        self.write(buf, array, batch=batch)
        return buf

    def write(self, buf: Buffer, data, *, batch: int | None = None) -> Command[Buffer]:
        """Copy ``data`` (same number of elements, converted exactly) into ``buf`` in stream
        order; the Command completes once the GPU has the bytes."""
        self._lane.check_open()
        check_batch(batch)
        check_buffer(buf, "buf")
        self._on_device("buf", buf)
        arr = _to_array(data, buf._dt, "data")
        if arr.size != buf.size:
            raise ShapeError(f"data: has {arr.size} elements, buffer {buf.shape} holds "
                             f"{buf.size}")
        cmd = Command("stream.write", self.device, [buf], buf)

        def op():
            self._track(batch, "upload", cmd, time.perf_counter())
            upload_into(cmd, buf, arr)

        self._lane.enqueue(op, cmd)
        return cmd

    def run_kernel(self, kernel, inputs, output: Buffer | None = None,
                   params: dict | None = None, *, batch: int | None = None
                   ) -> Command[Buffer]:
        """Run a named kernel in stream order (checked now, submitted on the stream's thread);
        the Command's result is the output buffer."""
        self._lane.check_open()
        check_batch(batch)
        name, dev, buffers, output, record = kernel_work(kernel, inputs, output, params)
        if dev is not self.device:
            raise DeviceError(f"{name}: its buffers are on {dev.label}, this stream on "
                              f"{self.device.label}")
        cmd = Command(name, dev, buffers, output)

        def op():
            if self.timeline is not None and batch is not None:
                cmd.add_done_callback(self.timeline.gpu_span(batch, time.perf_counter(),
                                                             lane=dev.ordinal))
            try:
                submit_command(cmd, record)
            except WgComputeError:
                pass  # already failed the command

        self._lane.enqueue(op, cmd)
        return cmd

    def run(self, pipeline, *, batch: int | None = None) -> Command:
        """Submit a wgc.Pipeline (or any object with ``submit() -> Command``) in stream
        order; the returned Command follows the pipeline's submission."""
        self._lane.check_open()
        check_batch(batch)
        if not callable(getattr(pipeline, "submit", None)):
            raise ArgumentError(f"pipeline: expected a wgc.Pipeline (or an object with "
                                f"submit()), got {type(pipeline).__name__}")
        dev = getattr(pipeline, "device", self.device)
        if dev is not self.device:
            raise DeviceError(f"pipeline: it is on {dev.label}, this stream on "
                              f"{self.device.label}")
        label = getattr(pipeline, "label", type(pipeline).__name__)
        if isinstance(pipeline, Pipeline):
            # the stream holds the pipeline's buffers from now until the run is done, as it
            # holds those of every other operation it is given (freeing them is safe)
            pipeline._check_open()
            pipeline._check_buffers()
            cmd = Command(f"stream.run({label})", self.device, pipeline._buffers())
        else:
            cmd = Command(f"stream.run({label})", self.device)

        def op():
            if self.timeline is not None and batch is not None:
                cmd.add_done_callback(self.timeline.gpu_span(batch, time.perf_counter(),
                                                             lane=dev.ordinal))
            if isinstance(pipeline, Pipeline):
                pipeline._submit_as(cmd)
                return
            inner = pipeline.submit()
            if not isinstance(inner, Command):
                raise ArgumentError(f"pipeline: submit() returned {type(inner).__name__}, "
                                    f"not a wgc.Command")
            follow(cmd, inner)

        self._lane.enqueue(op, cmd)
        return cmd

    def download(self, buf: Buffer, *, batch: int | None = None) -> HostCommand:
        """Read ``buf`` back in stream order; the Command's result is the numpy array."""
        self._lane.check_open()
        check_batch(batch)
        check_buffer(buf, "buf")
        self._on_device("buf", buf)
        cmd = HostCommand("stream.download", self.device, [buf])

        def op():
            self._track(batch, "download", cmd, time.perf_counter())
            start_read(buf, cmd)

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
        """Later work in this stream is submitted only after everything before ``event`` has
        been submitted (the queue then runs it after that work)."""
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
        check_timeout(timeout)
        self._wait(timeout)
        if self._failed:
            first, self._failed = self._failed[0], []
            raise CommandFailedError(f"stream {self.label!r}: an operation failed: {first}",
                                     first)

    def _note(self, cmd: Command) -> None:
        e = cmd.error
        if e is not None:  # a native error names the command it failed
            self._failed.append(e if isinstance(e, WgComputeError) else
                                CommandFailedError(f"{cmd.label} failed: {e}", e))

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
            except (CommandFailedError, DeviceError):
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
        if self._lane.closed:
            return
        if self.device.alive:
            self._wait_quietly()
        self._lane.close(join=5.0)


def release_staging(device: Device | None = None) -> int:
    """Give back the mapped staging memory that transfers and stream_map keep for reuse on
    ``device`` (default: every open device): up to 512 MB per buffer size, pinned host memory
    on a discrete GPU. Returns the bytes released. Staging of 1 MB or more is also given back
    by itself once no transfer has taken it for WGCOMPUTE_STAGING_IDLE_S seconds (30).
    Staging in use, or held by a stream_map result, is not touched; the next transfer makes
    new staging as it needs (on an H200 host ~15 ms per 64 MB)."""
    from .runtime import open_devices

    devs = [resolve(device)] if device is not None else open_devices()
    return sum(d.staging.release_free() for d in devs)


def create_stream(label: str | None = None, timeline: Timeline | None = None,
                  device: Device | None = None) -> Stream:
    """A new Stream (an ordered lane of GPU work with its own host thread) on ``device``
    (default: the current device). With a ``timeline``, operations given a ``batch=`` tag
    record their spans in it."""
    return Stream(label, timeline, device)


def upload(array, label: str = "", *, device: Device | None = None) -> Buffer:
    """A new buffer with the array's shape, dtype and contents (copied through the mapped
    staging ring). Returns once ``array`` has been copied out; the GPU copy is queued."""
    if isinstance(array, Buffer):
        raise ArgumentError("array: is already a wgc.Buffer; upload takes host data")
    if not isinstance(array, np.ndarray):
        if not (hasattr(array, "__array__") or hasattr(array, "__array_interface__")):
            raise ArgumentError(f"array: expected a numpy array, got {type(array).__name__}")
        array = np.asarray(array)
    resolve_dtype(array.dtype, "array")
    return _new_buffer(array, None, None, label, device=device)
