"""stream_map's lanes: one per device, with its slots (a batch's buffers and staging) and the
threads that issue batches and read their results back (leased staging or a fresh array)."""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from . import _native, _queue
from ._multiproc_common import LoadFailed
from ._pools import Fresh
from .buffer import Buffer, _to_array, empty
from .commands import Command, bound, prepare_output
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, CommandFailedError, DeviceError, ShapeError
from .runtime import Device
from .transfers import LEASE_MIN, DownloadStage, UploadStage

if TYPE_CHECKING:
    from .stream_map import _MapState

_STOP = object()  # the end of the batches, passed along the queues


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
            raise self.dev.wrap(e, f"stream_map batch {self.state.at(k)}") from e

    def _issue(self, k: int, item, slot: _Slot):
        """Host copy into the slot's staging, then submit copy-in, the work and copy-out.
        Returns the readback job."""
        st, dev, w = self.state, self.dev, self.state.work
        tl = st.timeline
        if isinstance(item, LoadFailed):  # wgc.load_each's fn raised: the error of this batch
            raise item.error
        at = st.at(k)
        if isinstance(item, Buffer) or not (isinstance(item, np.ndarray) or
                                            hasattr(item, "__array__")):
            raise ArgumentError(f"batches[{at}]: expected a numpy array, got "
                                f"{type(item).__name__}")
        arr = np.asarray(item)
        dt = resolve_dtype(arr.dtype, f"batches[{at}]")
        arr = _to_array(arr, dt, f"batches[{at}]")  # little-endian, exact
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
            dev.submit([enc.finish()])
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
        fence = dev.submit([enc.finish()])
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
                raise CommandFailedError(f"stream_map: batch {self.state.at(k)} failed on the GPU: "
                                         f"{err}", err)
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
                e = dev.wrap(e, f"stream_map batch {self.state.at(k)}")
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
