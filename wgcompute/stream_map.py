"""stream_map: the prefetching batch pipeline. Batches load on a thread of their own, upload
while the GPU computes earlier ones and download while later ones upload, on one device or
spread over several; results come back in input order."""

from __future__ import annotations

import inspect
import itertools
import queue
import threading
import time
import weakref

import numpy as np

from . import _native, _queue
from ._pools import Fresh
from .buffer import Buffer, _to_array, empty, normalize_shape
from .commands import Command, bound, prepare_output
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, CommandFailedError, DeviceError, ShapeError
from .kernels import Kernel, registry
from .pipeline import Pipeline
from .runtime import Device, check_device, current_device
from .timeline import Timeline
from .transfers import LEASE_MIN, DownloadStage, UploadStage

__all__ = ["stream_map", "StreamMap"]

_STOP = object()
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


class _Slot:
    """One batch's worth of memory on a device: upload staging, input and output buffers,
    readback staging. Reused while the batch shape repeats."""

    def __init__(self, index: int):
        self.index = index
        self.key = None
        self.up: UploadStage | None = None
        self.down: DownloadStage | None = None
        self.spare = None  # free readback staging to take down's place when a result keeps it
        self.inp: Buffer | None = None
        self.out: Buffer | None = None
        self.own_in = self.own_out = True  # False for a Pipeline's or fn(inp)'s buffers

    def release(self) -> None:
        """Free the slot's memory; its staging goes back to the transfer pools (new 64 MB
        staging cost its first batch 20-40 ms of mapping and page faults on the H200 host)
        unless a failure left it in an unknown state (``key`` None)."""
        healthy = self.key is not None
        for stage in (self.up, self.down):
            if stage is not None:
                try:
                    stage.release(healthy)
                except Exception:  # noqa: BLE001 - the device is gone
                    pass
        if self.spare is not None:
            dev = self.inp.device if self.inp is not None else None
            if dev is not None and dev.alive:
                dev.staging.down.release(self.spare)
        for b, own in ((self.inp, self.own_in), (self.out, self.own_out)):
            if b is not None and own:
                b.free()
        self.up = self.down = self.spare = self.inp = self.out = None
        self.key = None


class DeviceLane:
    """The batches of one device: its slots, at most ``depth`` results not yet taken, and the
    thread that issues batches and the one that reads them back."""

    def __init__(self, state: _MapState, index: int, dev: Device, depth: int):
        self.state = state
        self.index = index
        self.dev = dev
        self.depth = depth
        self.slots: queue.Queue[_Slot] = queue.Queue()
        self.all_slots = [_Slot(i) for i in range(depth)]
        for s in self.all_slots:
            self.slots.put(s)
        self.inflight = threading.Semaphore(depth)
        self.readbacks: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []

    # -- one batch -------------------------------------------------------------------------------
    def prepare(self, slot: _Slot, arr: np.ndarray, dt) -> None:
        key = (arr.shape, dt.name)
        if slot.key == key:
            return
        slot.release()
        w, dev = self.state.work, self.dev
        if w.pipeline is not None:
            p = w.pipeline_on(dev)
            stages = p.stages
            inp, out = stages[0]["inputs"][0], stages[-1]["output"]
            slot.own_in = slot.own_out = False
            if inp.shape != arr.shape or inp.dtype != dt.name:
                raise ShapeError(f"batch: is {arr.shape} {dt.name}, but the pipeline's first "
                                 f"input is {inp.shape} {inp.dtype}")
        else:
            inp = empty(arr.shape, dt, label=f"stream_map-in{slot.index}", device=dev)
            slot.own_in, slot.own_out = True, not w.map_form
            out = None
            try:
                if w.kernel is not None:
                    out = prepare_output(w.kernel, [inp], None, w.params)
                elif not w.map_form:
                    shape, odt = w.out_spec(inp)
                    out = empty(shape, odt, label=f"stream_map-out{slot.index}", device=dev)
            except BaseException:
                inp.free()
                raise
        slot.inp, slot.out = inp, out
        slot.up = UploadStage(dev, inp.nbytes)
        if out is not None:
            self._down_for(slot, out.nbytes)
        slot.key = key

    def _down_for(self, slot: _Slot, nbytes: int) -> None:
        """The slot's readback staging for ``nbytes`` results (and a spare for the first
        result that keeps its staging, plus two for results a caller holds meanwhile)."""
        dev = self.dev
        if slot.down is not None and slot.down.nbytes == nbytes:
            return
        if slot.down is not None:
            slot.down.release()
        if slot.spare is not None:
            dev.staging.down.release(slot.spare)
            slot.spare = None
        slot.down = DownloadStage(dev, nbytes)
        if slot.down.padded >= LEASE_MIN:
            slot.spare = dev.staging.down.acquire(slot.down.padded)
            dev.staging.down.ensure_free(slot.down.padded, 2)

    def issue(self, k: int, item, slot: _Slot):
        """``_issue``, with what wgpu raises turned into the WgComputeError a user sees."""
        try:
            return self._issue(k, item, slot)
        except _native.ERRORS as e:  # validation, out of memory, a lost device
            raise self.dev.wrap(e, f"stream_map batch {k}") from e

    def _issue(self, k: int, item, slot: _Slot):
        """Host copy into the slot's staging, then submit copy-in, the work and copy-out.
        Returns the readback job."""
        st, dev, w = self.state, self.dev, self.state.work
        tl = st.timeline
        if isinstance(item, Buffer) or not (isinstance(item, np.ndarray) or
                                            hasattr(item, "__array__")):
            raise ArgumentError(f"batches[{k}]: expected a numpy array, got "
                                f"{type(item).__name__}")
        arr = np.asarray(item)
        dt = resolve_dtype(arr.dtype, f"batches[{k}]")
        arr = _to_array(arr, dt, f"batches[{k}]")  # little-endian, exact
        t0 = time.perf_counter()
        self.prepare(slot, arr, dt)
        padded = slot.up.fill(arr)
        inp = slot.inp
        user_cmd = None
        link = dev.link
        enc = link.encoder()
        slot.up.record(enc, inp.gpu_buffer, padded)
        if w.kernel is not None:
            # d owns the bind groups its raw calls name: held until they are recorded (the bind
            # cache may let go of it meanwhile, and a released bind group aborts the process)
            d = bound(w.kernel, [inp], slot.out, w.params)
            calls = d.raw_calls()
            if calls:
                enc.record_calls(calls)
        elif w.pipeline is not None:
            w.pipeline_on(dev).encode(enc)
        else:
            dev.submitter.submit([enc.finish()])
            if w.map_form:
                got = w.fn(inp)
                if isinstance(got, Command):
                    user_cmd, got = got, got.output
                if not isinstance(got, Buffer):
                    raise ArgumentError(f"work: fn(inp) returned {type(got).__name__}; expected "
                                        f"the result as a wgc.Buffer (or the Command writing it)")
                if got.device is not dev:
                    raise DeviceError(f"work: fn(inp) returned a buffer on {got.device.label}; "
                                      f"the batch is on {dev.label}")
                slot.out = got
                self._down_for(slot, got.nbytes)
            else:
                user_cmd = w.fn(inp, slot.out)
                if user_cmd is not None and not isinstance(user_cmd, Command):
                    raise ArgumentError(f"work: fn(inp, out) returned "
                                        f"{type(user_cmd).__name__}; expected a wgc.Command or "
                                        f"None")
            enc = link.encoder()
        out = slot.out
        slot.down.record(enc, out.gpu_buffer)
        t_submit = time.perf_counter()
        fence = dev.submitter.submit([enc.finish()])
        slot.up.remap()
        slot.down.map()
        if tl is not None:
            tl.add(k, "upload", t0, t_submit)
            fence.add_callback(tl.gpu_span(k, t_submit, lane=dev.ordinal))
        # A large result is the readback staging itself (leased to the array, no copy) when a
        # free one can replace it in the slot; otherwise a new array, faulted in while the GPU
        # works.
        spare = self.take_spare(slot) if slot.down.padded >= LEASE_MIN else None
        fresh = None if spare is not None else Fresh(out.shape, out._dt.numpy, dev.workers)
        return (k, slot, fence, user_cmd, fresh, spare, out)

    def take_spare(self, slot: _Slot):
        """Free readback staging to replace the slot's, which its result will keep: the slot's
        own spare, else a free one from the pool; None if there is none (the result is then
        copied out). Staging is only made in prepare(): pinning new staging cost the H200 host
        ~15 ms per 64 MB and held up the submissions beside it."""
        staging = self.dev.staging
        if not staging.reserve_lease():
            return None
        buf, slot.spare = slot.spare, None
        if buf is None:
            buf = staging.down.take_free(slot.down.padded)
        if buf is None:
            staging.cancel_lease()
        return buf

    def finish(self, job):
        """Wait for the readback; the result is the leased staging or a copy of it in a new
        array. Returns (k, array | error)."""
        k, slot, fence, user_cmd, fresh, spare, out = job
        dev = self.dev
        tl = self.state.timeline
        t0 = None
        try:
            result = fresh.get() if fresh is not None else None
            slot.down.wait()
            t0 = time.perf_counter()
            if spare is None:
                slot.down.copy_into(result.reshape(-1).view(np.uint8))
            _queue.wait(fence)
            err = fence.error
            if err is None and user_cmd is not None:
                try:
                    user_cmd.wait()
                except CommandFailedError as e:
                    err = e.cause or e
            if err is not None:
                raise CommandFailedError(f"stream_map: batch {k} failed on the GPU: {err}", err)
            if spare is not None:  # the array owns the lease and this staging from here
                down = slot.down
                leased = down.lease()
                if leased is None:  # the native calls cannot lend a mapping: copy instead
                    dev.staging.cancel_lease()
                    result = np.empty(out.shape, out._dt.numpy)
                    down.copy_into(result.reshape(-1).view(np.uint8))
                    dev.staging.down.release(spare)
                else:
                    slot.down = DownloadStage(dev, out.nbytes, buf=spare)
                    result = leased.view(out._dt.numpy).reshape(out.shape)
                spare = None
        except BaseException as e:
            if isinstance(e, _native.ERRORS):
                e = dev.wrap(e, f"stream_map batch {k}")
            if spare is not None:
                dev.staging.cancel_lease()
                if dev.alive:
                    dev.staging.down.release(spare)
            slot.key = None  # its staging may be in any state: rebuild it next time
            return k, e
        finally:
            if tl is not None and t0 is not None:
                tl.add(k, "download", t0, time.perf_counter())
            self.slots.put(slot)
        return k, result

    def fail_slot(self, slot: _Slot) -> None:
        """A batch failed before its submission: the slot's staging may be unmapped."""
        slot.key = None
        slot.release()
        self.slots.put(slot)

    # -- threads -------------------------------------------------------------------------------
    def start(self) -> None:
        for target, name in ((self._issuer, "issue"), (self._reader, "readback")):
            t = threading.Thread(target=target, daemon=True,
                                 name=f"wgcompute-stream_map-{name}-{self.index}")
            t.start()
            self.threads.append(t)

    def _get(self, q: queue.Queue):
        st = self.state
        while not st.closed:
            try:
                return q.get(timeout=0.05)
            except queue.Empty:
                continue
        return None

    def _issuer(self) -> None:
        st = self.state
        while not st.closed:
            if not self.inflight.acquire(timeout=0.05):
                continue
            item = self._get(st.loaded)
            if item is None:
                return
            if item is _STOP:
                st.loaded.put(_STOP)  # for the other devices' issuers
                self.readbacks.put(_STOP)
                return
            k, value = item
            slot = self._get(self.slots)
            if slot is None:
                return
            try:
                job = self.issue(k, value, slot)
            except BaseException as e:
                self.fail_slot(slot)
                self.readbacks.put((k, e))
                continue
            self.readbacks.put(job)

    def _reader(self) -> None:
        st = self.state
        while True:
            job = self.readbacks.get()
            if job is _STOP:
                return
            if len(job) == 2:  # (k, error): failed before the GPU
                st.post(job[0], job[1], self)
                continue
            k, value = self.finish(job)
            st.post(k, value, self)

    def close(self) -> None:
        issuer, reader = (self.threads + [None, None])[:2]
        if issuer is not None and issuer is not threading.current_thread():
            issuer.join(timeout=5)
        if reader is not None:
            # The reader drains the jobs still in flight (their slots come back when their
            # readback finished), then stops.
            self.readbacks.put(_STOP)
            if reader is not threading.current_thread():
                reader.join(timeout=30)
        for s in self.all_slots:
            s.release()


class _MapState:
    """Everything stream_map's threads share (the iterator only holds this, so that dropping
    the iterator closes it): the source, its loader thread, one lane per device, and the
    results waiting to be taken in input order."""

    def __init__(self, work: _Work, batches, depth: int, devices: list[Device],
                 timeline: Timeline | None):
        self.work = work
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

    def __next__(self) -> np.ndarray:
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
            _raise_at(k, value)
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
            _raise_at(k, e)
        slot = lane.slots.get()
        try:
            job = lane.issue(k, item, slot)
        except BaseException as e:
            lane.fail_slot(slot)
            _raise_at(k, e)
        _, value = lane.finish(job)
        if isinstance(value, BaseException):
            _raise_at(k, value)
        return value


def _raise_at(k: int, e: BaseException):
    if not any(f"batch {k}" in n for n in getattr(e, "__notes__", ())):
        e.add_note(f"(raised by stream_map batch {k})")
    raise e


def stream_map(work, batches, depth: int = 3, *, params: dict | None = None,
               out_shape=None, out_dtype=None, timeline: Timeline | None = None,
               devices: list[Device] | None = None) -> StreamMap:
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
    return StreamMap(state)
