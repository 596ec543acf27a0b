"""stream_map: the prefetching batch pipeline. Batches load on a thread of their own, upload
while the GPU computes earlier ones and download while later ones upload, on one device or
spread over several; results come back in input order."""

from __future__ import annotations

import collections
import inspect
import itertools
import queue
import threading
import time
import weakref

import numpy as np

from . import _adapters, _multiproc, _multiproc_worker
from ._multiproc import DeviceProcesses, LoadEach, ProcessMap
from .buffer import Buffer, normalize_shape
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DeviceError
from .kernels import Kernel, registry
from .pipeline import Pipeline
from .runtime import Device, check_device, current_device
from .stream_lanes import _STOP, DeviceLane
from .timeline import Timeline

__all__ = ["stream_map", "StreamMap", "device_processes", "DeviceProcesses", "ProcessMap",
           "load_each", "LoadEach"]

load_each = _multiproc.load_each

_MAX_DEPTH = 64  # batches in flight per device: each holds its own GPU buffers and staging


class _Work:
    """What runs on each batch: a kernel (per-slot output), a Pipeline (its own first input and
    last output), ``fn(inp, out)`` queuing work, or ``fn(inp)`` returning the result buffer."""

    def __init__(self, work, params, out_shape, out_dtype):
        self.kernel: Kernel | None = None
        self.pipeline: Pipeline | None = None
        self.fn = None
        self.map_form = False  # fn(inp) -> Buffer | Command
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
                raise ArgumentError("out_shape/out_dtype: only for a callable fn(inp, out); a "
                                    "kernel's output is shaped by the kernel")
        elif isinstance(work, Pipeline):
            if params is not None or out_shape is not None or out_dtype is not None:
                raise ArgumentError("params/out_shape/out_dtype: not used with a Pipeline (its "
                                    "stages hold them)")
            stages = work.stages
            if not stages or not stages[0].get("inputs") or stages[-1].get("output") is None:
                raise ArgumentError("work: the pipeline needs a first stage with an input and "
                                    "a last stage with an output")
            self.pipeline = work
        elif callable(work):
            if params is not None:
                raise ArgumentError("params: only for a kernel name; a callable sets its own")
            self.fn = work
            self.map_form = _positional_arity(work) == 1
            if self.map_form and (out_shape is not None or out_dtype is not None):
                raise ArgumentError("out_shape/out_dtype: fn(inp) returns its result buffer; "
                                    "they are for fn(inp, out)")
        else:
            raise ArgumentError(f"work: expected a kernel name, a wgc.Pipeline, fn(inp) -> "
                                f"Buffer or fn(inp, out), got {type(work).__name__}")

    def pipeline_on(self, dev: Device) -> Pipeline:
        """The pipeline on ``dev``: the one given, or its clone there (made once, kept by
        ``dev``, which closes it)."""
        if dev is self.pipeline.device:
            return self.pipeline
        return dev.state_for(self, self.pipeline.clone)

    def out_spec(self, inp: Buffer):
        shape = inp.shape if self.out_shape is None else self.out_shape
        dt = inp.dtype if self.out_dtype is None else resolve_dtype(self.out_dtype).name
        return shape, dt


def _positional_arity(fn) -> int:
    """How many positional arguments ``fn`` takes at most (2 when it cannot be told)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 2
    return len(pos)




class _MapState:
    """Everything stream_map's threads share (the iterator only holds this, so that dropping
    the iterator closes it): the source, its loader thread, one lane per device, and the
    results waiting to be taken in input order."""

    def __init__(self, work: _Work, batches, depth: int, devices: list[Device],
                 timeline: Timeline | None, index_of=None):
        self.work = work
        self.index_of = index_of  # batch k's index in the user's batches, when they differ
        self.source = iter(batches)
        self.timeline = timeline
        self.closed = False
        self.lanes = [DeviceLane(self, i, d, depth) for i, d in enumerate(devices)]
        self.loaded: queue.Queue = queue.Queue(maxsize=max(1, depth * len(devices) - 1))
        self.results: dict[int, tuple] = {}  # k -> (value, fatal, lane)
        self.total: int | None = None  # number of batches, once the source ended
        self.cond = threading.Condition()
        self.loader: threading.Thread | None = None
        self.threaded = depth > 1 or len(devices) > 1

    def at(self, k: int) -> int:
        """Batch k's index in the batches the user gave (a worker process runs some of them)."""
        return k if self.index_of is None else self.index_of(k)

    def load(self, k: int):
        """Next batch from the source, or raises StopIteration / the source's error."""
        t0 = time.perf_counter()
        item = next(self.source)
        if self.timeline is not None:
            self.timeline.add(k, "load", t0, time.perf_counter())
        return item

    def post(self, k: int, value, lane: DeviceLane | None, fatal: bool = False) -> None:
        with self.cond:
            self.results[k] = (value, fatal, lane)
            self.cond.notify_all()

    def start(self) -> None:
        self.loader = threading.Thread(target=self._loader, daemon=True,
                                       name="wgcompute-stream_map-load")
        self.loader.start()
        for lane in self.lanes:
            lane.start()

    def _put(self, item) -> bool:
        while not self.closed:
            try:
                self.loaded.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _loader(self) -> None:
        for k in itertools.count():
            try:
                item = self.load(k)
            except StopIteration:
                with self.cond:
                    self.total = k
                    self.cond.notify_all()
                self._put(_STOP)
                return
            except BaseException as e:
                with self.cond:
                    self.total = k + 1
                self.post(k, e, None, fatal=True)
                self._put(_STOP)
                return
            if not self._put((k, item)):
                return

    def take(self, k: int):
        """Block until result ``k`` is there: (value, fatal, lane), or None at the end."""
        with self.cond:
            while k not in self.results:
                if self.closed or (self.total is not None and k >= self.total):
                    return None
                self.cond.wait(0.1)
            return self.results.pop(k)

    def close(self) -> None:
        self.closed = True
        with self.cond:
            self.cond.notify_all()
        if self.loader is not None and self.loader is not threading.current_thread():
            self.loader.join(timeout=5)
        for lane in self.lanes:
            lane.close()


class StreamMap:
    """The iterator stream_map returns: results in input order, at most ``depth`` batches in
    flight per device. Use it in a for loop; ``close()`` (or leaving a ``with`` block) stops
    the threads and frees the per-slot GPU memory early."""

    def __init__(self, state: _MapState, notes: collections.deque | None = None):
        self._state = state
        self._k = 0
        self._done = False
        self._notes = notes  # per batch, in order: what wgc.load_each's fn gave with it
        # Closed when this iterator is dropped. A finalizer, not __del__: it holds the state,
        # so when the iterator dies in a reference cycle the state (slots, staging) is not
        # part of the garbage, and the collector cannot release the staging buffers before
        # close() hands them back to the pools.
        self._closer = weakref.finalize(self, state.close)
        self._closer.atexit = False
        for lane in state.lanes:
            lane.dev.adopt(self)

    def __repr__(self) -> str:
        devs = ", ".join(str(lane.dev.ordinal) for lane in self._state.lanes)
        state = " closed" if self._done else ""
        return f"<wgc.StreamMap at batch {self._k} on device(s) {devs}{state}>"

    def __iter__(self) -> StreamMap:
        return self

    def __enter__(self) -> StreamMap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._done = True
        self._closer()  # runs state.close() once

    def __next__(self):
        if self._notes is None:
            return self._next()
        try:
            value = self._next()
        except StopIteration:
            raise
        except BaseException:
            self._note()
            raise
        note = self._note()
        return value if _multiproc.no_note(note) else (value, note)

    def _note(self):
        return self._notes.popleft() if self._notes else None

    def _next(self) -> np.ndarray:
        st = self._state
        if self._done or st.closed:
            raise StopIteration
        if not st.threaded:
            return self._next_sequential()
        got = st.take(self._k)
        if got is None:
            self.close()
            raise StopIteration
        value, fatal, lane = got
        k = self._k
        self._k += 1
        if lane is not None:
            lane.inflight.release()
        if fatal:
            self.close()
        if isinstance(value, BaseException):
            _raise_at(st.at(k), value)
        return value

    def _next_sequential(self) -> np.ndarray:
        st = self._state
        lane = st.lanes[0]
        k = self._k
        self._k += 1
        try:
            item = st.load(k)
        except StopIteration:
            self.close()
            raise
        except BaseException as e:
            self.close()
            _raise_at(st.at(k), e)
        slot = lane.slots.get()
        try:
            job = lane.issue(k, item, slot)
        except BaseException as e:
            lane.fail_slot(slot)
            _raise_at(st.at(k), e)
        _, value = lane.finish(job)
        if isinstance(value, BaseException):
            _raise_at(st.at(k), value)
        return value


def _raise_at(k: int, e: BaseException):
    if not any(f"batch {k}" in n for n in getattr(e, "__notes__", ())):
        e.add_note(f"(raised by stream_map batch {k})")
    raise e


def stream_map(work, batches, depth: int = 3, *, params: dict | None = None,
               out_shape=None, out_dtype=None, timeline: Timeline | None = None,
               devices: list | None = None, processes=False) -> StreamMap | ProcessMap:
    """Run ``work`` on every batch of ``batches``; yields each batch's result as a numpy
    array, in input order, while later batches upload and earlier ones download.

    ``work`` is one of:

    * a kernel name (or Kernel) of one input and one output, run with ``params``; the output
      is shaped by the kernel;
    * a wgc.Pipeline: each batch is copied into its first stage's first input, the pipeline
      runs, and its last stage's output is read back (the in-order queue keeps batches apart);
    * ``fn(inp)`` returning the result buffer (e.g. ``lambda b: wgc.relu(b)``), or the
      Command that writes it;
    * ``fn(inp, out)`` queuing GPU work that reads buffer ``inp`` and writes buffer ``out``
      (shaped ``out_shape``/``out_dtype``, by default like ``inp``), returning the Command it
      submitted (or None).

    A callable is called on stream_map's submit thread, in batch order. ``batches`` is a list
    or any iterable (a generator that loads data is read on its own thread, ahead of the GPU).
    ``depth`` is how many batches may be in flight per device: 1 runs them one after another
    (the baseline), 2 is double and 3 triple buffering. ``devices`` spreads the batches over
    several devices (each with its own upload / compute / download overlap; a Pipeline is
    copied to each once); results still come in input order. Each slot's GPU buffers and
    mapped staging are reused while batch shapes repeat. An error in batch k is raised at
    position k of the iterator (earlier results all come first); iteration may continue after
    it, unless the error came from ``batches`` itself. A ``timeline`` keeps a span per stage
    and batch: give one to finite runs only.

    ``processes=True`` runs one worker process per device instead of threads in this one
    (``devices``: adapter indices in wgc.devices() or opened wgc.Devices, by default every
    GPU): the interpreter's own copies no longer limit several GPUs. Batches travel through
    shared memory, or are loaded by the worker itself from a ``wgc.load_each(fn, items)``;
    ``work`` must pickle. ``processes=pool`` runs on a wgc.device_processes pool (started
    once, for many maps). A worker that ends mid-map has its batches run again by the others.

    A result of 1 MB or more is, when free staging can take its place, an array over the
    mapped readback staging itself (no copy; ``flags.owndata`` is False): it keeps that staging
    until it and all its views are dropped. Results used and dropped as they come circulate a
    few staging buffers; results kept (in a list) are copied once none is free."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= _MAX_DEPTH:
        raise ArgumentError(f"depth: expected an int from 1 to {_MAX_DEPTH} (1 sequential, 2 "
                            f"double, 3 triple buffering), got {depth!r}")
    if isinstance(batches, (np.ndarray, Buffer)):
        raise ArgumentError("batches: expected a list or iterable of arrays, got one "
                            f"{type(batches).__name__} (wrap it in a list)")
    try:
        iter(batches)
    except TypeError:
        raise ArgumentError(f"batches: expected a list or iterable of numpy arrays, got "
                            f"{type(batches).__name__}") from None
    if timeline is not None and not isinstance(timeline, Timeline):
        raise ArgumentError(f"timeline: expected a wgc.Timeline, got "
                            f"{type(timeline).__name__}")
    if out_dtype is not None:
        resolve_dtype(out_dtype, "out_dtype")
    if out_shape is not None:
        out_shape = normalize_shape(out_shape, "out_shape")
    work_ = _Work(work, params, out_shape, out_dtype)
    if processes is not False:
        return _process_map(work, work_, batches, depth, timeline, devices, processes)
    notes = None
    if isinstance(batches, LoadEach):
        notes = collections.deque()
        batches = _multiproc.local_batches(batches, notes)
    if devices is None:
        devs = [work_.pipeline.device if work_.pipeline is not None else current_device()]
    else:
        if isinstance(devices, Device) or not isinstance(devices, (list, tuple)) or not devices:
            raise ArgumentError(f"devices: expected a non-empty list of wgc.Device, got "
                                f"{devices!r}")
        devs = [check_device(d, f"devices[{i}]") for i, d in enumerate(devices)]
        for i, d in enumerate(devs):
            d.check(f"devices[{i}]")
    state = _MapState(work_, batches, depth, devs, timeline)
    if state.threaded:
        state.start()
    return StreamMap(state, notes)


# -- one worker process per device ----------------------------------------------------------------
def device_processes(devices=None, *, start_timeout: float = 300.0) -> DeviceProcesses:
    """Start one worker process per device and open each one's device there: ``devices`` are
    adapter indices in wgc.devices() (or opened wgc.Devices, by their adapter), by default
    every GPU (lavapipe or another CPU adapter where there is none); an index given twice
    starts two processes on that adapter. Pass the pool to ``stream_map(...,
    processes=pool)`` for as many maps as you like (one at a time); close it when done."""
    if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float)) or \
            not start_timeout > 0:
        raise ArgumentError(f"start_timeout: expected seconds > 0, got {start_timeout!r}")
    return DeviceProcesses(_adapter_list(devices), _process_entry,
                           start_timeout=float(start_timeout))


def _adapter_list(devices) -> list[int]:
    if devices is None:
        found = _multiproc.usable_adapters()
        if not found:
            raise DeviceError("devices: no WebGPU adapter found on this machine")
        return found
    if isinstance(devices, (Device, int)) or not isinstance(devices, (list, tuple)) or \
            not devices:
        raise ArgumentError(f"devices: expected a non-empty list of adapter indices (in "
                            f"wgc.devices()) or wgc.Devices, got {devices!r}")
    count = len(_adapters.devices())
    out = []
    for i, d in enumerate(devices):
        if isinstance(d, Device):
            out.append(_multiproc.adapter_index(check_device(d, f"devices[{i}]"),
                                                f"devices[{i}]"))
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d < count:
            out.append(int(d))
        else:
            raise ArgumentError(f"devices[{i}]: expected an adapter index in 0..{count - 1} "
                                f"(wgc.devices()) or a wgc.Device, got {d!r}")
    return out


def _process_map(work, work_: _Work, batches, depth, timeline, devices, processes):
    if timeline is not None:
        raise ArgumentError("timeline: a timeline records this process's threads; it is not "
                            "kept with processes")
    if isinstance(processes, DeviceProcesses):
        if devices is not None:
            raise ArgumentError("devices: the wgc.DeviceProcesses given as processes chose "
                                "them; leave devices out")
        pool, owns = processes, False
    elif processes is True:
        pool, owns = None, True
    else:
        raise ArgumentError(f"processes: expected True, False or a wgc.DeviceProcesses, got "
                            f"{processes!r}")
    if isinstance(work, str):
        work = work_.kernel  # by name, or by its registration for a user's kernel
    payload = _multiproc.dumps((work, work_.params, work_.out_shape, work_.out_dtype), "work")
    if pool is None:
        pool = device_processes(devices)
    try:
        return pool.start_map(payload, batches, depth, owns_pool=owns)
    except BaseException:
        if owns:
            pool.close()
        raise


def _process_entry(conn, adapter: int, prefix: str, number: int) -> None:
    """What a worker process of device_processes runs (spawned: this module by name)."""
    _multiproc_worker.worker_main(conn, adapter, prefix, number, _local_map)


def _local_map(payload, source, depth: int, dev: Device, index_of) -> StreamMap:
    """A worker's map of the batches it is given; ``index_of(j)``: the j-th one's index in
    the user's batches (for messages)."""
    work, params, out_shape, out_dtype = payload
    state = _MapState(_Work(work, params, out_shape, out_dtype), source, depth, [dev], None,
                      index_of)
    if state.threaded:
        state.start()
    return StreamMap(state)

