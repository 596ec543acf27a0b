"""Several devices as one worker process each, the parent's side: the pool of processes (each
opens its adapter by enumeration index; _multiproc_worker is what they run), the shared memory
batches and results travel through, and the ordered map over them (stream_map(processes=))."""

from __future__ import annotations

import contextlib
import itertools
import mmap
import multiprocessing
import os
import secrets
import signal
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor

try:
    import _posixshmem
except ImportError:  # pragma: no cover - Windows
    _posixshmem = None

import numpy as np

from ._multiproc_common import (  # noqa: F401 - re-exported: other modules import them here
    _START_TIMEOUT_S,
    LEASE_MIN,
    LoadEach,
    adapter_index,
    create_shm,
    dumps,
    leftover_shm,
    load_each,
    local_batches,
    map_shm,
    no_note,
    shm_view,
    unlink_shm,
    unpack_error,
    usable_adapters,
)
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DeviceError, DeviceLostError

__all__ = ["LoadEach", "load_each", "DeviceProcesses", "ProcessMap", "usable_adapters"]


class _Proc:
    """One worker process as the parent sees it."""

    def __init__(self, number: int, adapter: int, process, conn):
        self.number = number
        self.adapter = adapter
        self.process = process
        self.conn = conn
        self.lock = threading.Lock()
        self.info: dict = {}
        self.alive = True
        self.reader: threading.Thread | None = None
        self.inflight = 0
        self.outputs: set[str] = set()

    @property
    def label(self) -> str:
        name = self.info.get("name", "?")
        return f"device {self.number} (adapter {self.adapter}: {name}, worker process " \
               f"{self.info.get('pid', '?')})"

    def send(self, msg) -> bool:
        with self.lock:
            if not self.alive:
                return False
            try:
                self.conn.send(msg)
                return True
            except (OSError, ValueError):
                return False

    def ended(self) -> str:
        self.process.join(timeout=2)
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"


class _PoolState:
    """Everything the pool's threads share (the pool object only holds this, so that dropping
    the pool closes it)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.procs: list[_Proc] = []
        self.run: _Run | None = None
        self.lock = threading.Lock()
        self.attached: dict[str, mmap.mmap] = {}
        self.closed = False
        self.mids = itertools.count()

    def attach(self, name: str) -> mmap.mmap:
        with self.lock:
            mapped = self.attached.get(name)
            if mapped is None:
                mapped = self.attached[name] = map_shm(name)
            return mapped

    def free_output(self, proc: _Proc, name: str) -> None:
        if not self.closed:
            proc.send(("free", name))

    def read(self, proc: _Proc) -> None:
        """The reader thread of one worker: its messages, then its end."""
        while True:
            try:
                msg = proc.conn.recv()
            except (EOFError, OSError):
                break
            except Exception:  # noqa: BLE001 - a message that does not unpickle here
                continue
            run = self.run
            if msg[0] in ("result", "error") and (run is None or run.mid != msg[1]):
                if msg[0] == "result":
                    proc.send(("free", msg[3]))  # a result of a map closed meanwhile
                continue
            try:
                if msg[0] == "result":
                    proc.outputs.add(msg[3])
                    run.on_result(proc, *msg[2:])
                elif msg[0] == "error":
                    run.on_error(proc, msg[2], unpack_error(msg[3]))
            except Exception as e:  # noqa: BLE001 - e.g. the result's memory is gone
                run.on_error(proc, msg[2], e)
        with proc.lock:
            proc.alive = False
        run = self.run
        if run is not None and not self.closed:
            run.on_death(proc)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        run = self.run
        if run is not None:
            run.close()
        for p in self.procs:
            p.send(("close",))
        for p in self.procs:
            p.process.join(timeout=10)
            if p.process.is_alive():
                p.process.terminate()
                p.process.join(timeout=5)
            if p.process.is_alive():
                p.process.kill()
                p.process.join(timeout=5)
            with p.lock:
                p.alive = False
                with contextlib.suppress(OSError):
                    p.conn.close()
        for p in self.procs:
            if p.reader is not None and p.reader is not threading.current_thread():
                p.reader.join(timeout=5)
        if run is not None:
            run.release_inputs()
        # what a worker left (killed before it could remove its own): gone with the pool
        for p in self.procs:
            for name in p.outputs:
                unlink_shm(name)
        for name in leftover_shm(self.prefix):
            unlink_shm(name)
        with self.lock:  # results over them keep their mappings
            self.attached.clear()


class DeviceProcesses:
    """One worker process per device, each opening its adapter (by its index in
    wgc.devices()) as its own device when it starts, kept for any number of maps:
    ``wgc.stream_map(work, batches, processes=pool)`` spreads the batches over the processes.
    Close it when done (``close()`` or ``with``): the processes end and their shared memory is
    removed. A worker process whose parent ends (even killed) ends too."""

    def __init__(self, adapters: list[int], entry, *, start_timeout: float = _START_TIMEOUT_S):
        self._state = st = _PoolState(f"wgc{os.getpid()}{secrets.token_hex(3)}_")
        self._closer = weakref.finalize(self, st.close)
        ctx = multiprocessing.get_context("spawn")
        try:
            for number, adapter in enumerate(adapters):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=entry, args=(child, adapter, st.prefix, number),
                                   daemon=True, name=f"wgcompute-device-{number}")
                proc.start()
                child.close()
                st.procs.append(_Proc(number, adapter, proc, parent))
            for p in st.procs:
                if not p.conn.poll(start_timeout):
                    raise DeviceError(f"device {p.number} (adapter {p.adapter}): its worker "
                                      f"process did not start within {start_timeout:.0f} s")
                try:
                    msg = p.conn.recv()
                except EOFError:
                    raise DeviceLostError(f"device {p.number} (adapter {p.adapter}): its "
                                          f"worker process {p.ended()} while starting") from None
                if msg[0] == "fatal":
                    e = unpack_error(msg[1])
                    e.add_note(f"(raised by the worker process of device {p.number}, "
                               f"adapter {p.adapter})")
                    raise e
                p.info = msg[1]
            for p in st.procs:
                p.reader = threading.Thread(target=st.read, args=(p,), daemon=True,
                                            name=f"wgcompute-device-{p.number}-read")
                p.reader.start()
        except BaseException:
            self.close()
            raise

    @property
    def devices(self) -> list[dict]:
        """Per worker process: its adapter index, the adapter's name, its pid and whether it
        is alive."""
        return [{"adapter": p.adapter, "name": p.info.get("name"), "pid": p.info.get("pid"),
                 "alive": p.alive} for p in self._state.procs]

    @property
    def closed(self) -> bool:
        return self._state.closed

    def __repr__(self) -> str:
        st = self._state
        alive = sum(p.alive for p in st.procs)
        state = " closed" if st.closed else ""
        return f"<wgc.DeviceProcesses {alive} of {len(st.procs)} alive, adapters " \
               f"{[p.adapter for p in st.procs]}{state}>"

    def __enter__(self) -> DeviceProcesses:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker processes (waiting for what they run) and remove the shared
        memory; results already handed out stay valid."""
        self._closer()

    def start_map(self, payload: bytes, batches, depth: int, owns_pool: bool = False
                  ) -> ProcessMap:
        st = self._state
        if st.closed:
            raise ArgumentError("processes: this wgc.DeviceProcesses is closed")
        if st.run is not None and not st.run.closed:
            raise ArgumentError("processes: this wgc.DeviceProcesses runs another map; close "
                                "it (or finish it) first")
        alive = [p for p in st.procs if p.alive]
        if not alive:
            raise DeviceLostError(f"processes: every worker process has ended "
                                  f"({'; '.join(p.label for p in st.procs)})")
        loader = None
        if isinstance(batches, LoadEach):  # the function travels once, each item with its batch
            loader = dumps(LoadEach(batches.fn, (), batches.threads), "batches")
            source = iter(batches.items)
        else:
            source = iter(batches)
        run = _Run(st, next(st.mids), payload, loader, source, depth)
        st.run = run
        run.start()
        return ProcessMap(run, self if owns_pool else None)


class _Run:
    """One map over the pool: the feeder thread handing batches out, the results in order."""

    def __init__(self, st: _PoolState, mid: int, payload: bytes, loader, source, depth: int):
        self.st = st
        self.mid = mid
        self.payload = payload
        self.loader = loader
        self.source = source
        self.depth = depth
        self.per_worker = depth + 1
        self.cond = threading.Condition()
        self.results: dict[int, tuple] = {}  # k -> (ok, value)
        self.pending: dict[int, list] = {}  # k -> [proc, data, tries, slot]
        self.total: int | None = None
        self.closed = False
        self.taken = 0
        self.slots: list[list] = []  # [name, shm, busy]; the inputs of array batches
        self.nslots = self.per_worker * len(st.procs)
        self.feeder: threading.Thread | None = None
        self.copier = ThreadPoolExecutor(min(4, len(st.procs)),
                                         thread_name_prefix="wgcompute-processes-copy")

    # -- handing batches out --------------------------------------------------------------------
    def start(self) -> None:
        for p in self.st.procs:
            p.inflight = 0
            p.send(("map", self.mid, self.payload, self.loader, self.depth))
        self.feeder = threading.Thread(target=self._feed, daemon=True,
                                       name="wgcompute-processes-feed")
        self.feeder.start()

    def _window_open(self, k: int) -> bool:
        # results not yet taken are bounded: a slow consumer stops the feeder
        return k - self.taken < self.nslots

    def _feed(self) -> None:
        for k in itertools.count():
            with self.cond:
                while not self.closed and not self._window_open(k):
                    self.cond.wait(0.1)
                if self.closed:
                    return
            try:
                item = next(self.source)
            except StopIteration:
                self._end(k)
                return
            except BaseException as e:  # noqa: BLE001 - raised at k; the map ends there
                self.post(k, False, e)
                self._end(k + 1)
                return
            if self.loader is not None:  # the worker loads it: only the item travels
                if not self._dispatch(k, ("load", item), None, tries=0):
                    return
                continue
            try:
                arr, slot = self._slot_for(k, item)
            except BaseException as e:  # noqa: BLE001 - this batch's error, raised at k
                self.post(k, False, e)
                continue
            # The copies into shared memory run on threads of their own (numpy lets go of
            # the interpreter while it copies): one thread copying would feed ~8 GB/s, less
            # than two GPUs take.
            self.copier.submit(self._copy_and_send, k, arr, slot)

    def _end(self, total: int) -> None:
        # The workers' maps stay open until this one closes: a dead worker's batches may
        # still go to them.
        with self.cond:
            self.total = total if self.total is None else min(self.total, total)
            self.cond.notify_all()

    def _slot_for(self, k: int, item):
        """Batch k as an array, and a free input segment for it."""
        from .buffer import Buffer  # a GPU buffer belongs to this process: refused by name

        if isinstance(item, Buffer) or not (isinstance(item, np.ndarray) or
                                            hasattr(item, "__array__")):
            raise ArgumentError(f"batches[{k}]: expected a numpy array, got "
                                f"{type(item).__name__}")
        arr = np.asarray(item)
        resolve_dtype(arr.dtype, f"batches[{k}]")
        return arr, self._slot(arr.nbytes)

    def _copy_and_send(self, k: int, arr: np.ndarray, slot) -> None:
        try:
            np.copyto(shm_view(slot[1], arr.shape, arr.dtype.str), arr)
        except BaseException as e:  # noqa: BLE001 - this batch's error, raised at k
            self._free_slot(slot)
            self.post(k, False, e)
            return
        self._dispatch(k, ("shm", slot[0], arr.shape, arr.dtype.str), slot, tries=0)

    def _slot(self, nbytes: int) -> list:
        """A free input segment of at least ``nbytes`` (a too small free one is replaced)."""
        with self.cond:
            while True:
                if self.closed:
                    raise ArgumentError("stream_map: closed")
                free = [s for s in self.slots if not s[2]]
                fits = [s for s in free if s[1].size >= nbytes]
                if fits:
                    slot = min(fits, key=lambda s: s[1].size)
                    slot[2] = True
                    return slot
                if len(self.slots) < self.nslots or free:
                    break
                self.cond.wait(0.1)
            if free:  # too small: make room for one that fits
                old = free[0]
                self.slots.remove(old)
                self._drop(old)
            slot = [f"{self.st.prefix}i{self.mid}_{len(self.slots)}_{secrets.token_hex(2)}",
                    None, True]
            self.slots.append(slot)
        try:
            slot[1] = create_shm(slot[0], nbytes, "batches")
        except BaseException:
            with self.cond:
                self.slots.remove(slot)
            raise
        return slot

    def _drop(self, slot) -> None:
        for p in self.st.procs:
            p.send(("forget", slot[0]))
        if slot[1] is not None:
            with contextlib.suppress(FileNotFoundError, OSError):
                slot[1].unlink()
            with contextlib.suppress(BufferError):
                slot[1].close()

    def _free_slot(self, slot) -> None:
        if slot is not None:
            with self.cond:
                slot[2] = False
                self.cond.notify_all()

    def _dispatch(self, k: int, data, slot, tries: int, exclude=None) -> bool:
        """Send batch k to the live worker with the fewest batches (waiting for room)."""
        while True:
            with self.cond:
                if self.closed:
                    self._free_slot(slot)
                    return False
                alive = [p for p in self.st.procs if p.alive and p is not exclude]
                if not alive:
                    break
                room = [p for p in alive if p.inflight < self.per_worker]
                if not room and tries == 0:
                    self.cond.wait(0.1)
                    continue
                proc = min(room or alive, key=lambda p: p.inflight)
                proc.inflight += 1
                self.pending[k] = [proc, data, tries, slot]
            if proc.send(("batch", self.mid, k, data)):
                return True
            with self.cond:  # it ended meanwhile: its reader tells; try another
                self.pending.pop(k, None)
                proc.inflight -= 1
        self._all_ended(k, slot)
        return False

    def _all_ended(self, k: int, slot) -> None:
        self._free_slot(slot)
        ends = "; ".join(f"{p.label} {p.ended()}" for p in self.st.procs)
        self.post(k, False, DeviceLostError(f"stream_map: every worker process has ended "
                                            f"({ends}); batch {k} and those after it did not "
                                            f"run"))
        with self.cond:
            self.total = k + 1 if self.total is None else min(self.total, k + 1)
            self.cond.notify_all()

    # -- what comes back --------------------------------------------------------------------------
    def _finished(self, k: int):
        with self.cond:
            entry = self.pending.pop(k, None)
            if entry is None:
                return None
            entry[0].inflight -= 1
            self.cond.notify_all()
        self._free_slot(entry[3])
        return entry

    def on_result(self, proc: _Proc, k: int, name: str, shape, dt: str, note) -> None:
        if self._finished(k) is None:
            proc.send(("free", name))
            return
        view = np.ndarray(shape, np.dtype(dt), buffer=self.st.attach(name))
        if view.nbytes >= LEASE_MIN:  # the shared memory itself, until the array is dropped
            value = view
            weakref.finalize(value, self.st.free_output, proc, name).atexit = False
        else:
            value = view.copy()
            proc.send(("free", name))
        self.post(k, True, value if no_note(note) else (value, note))

    def on_error(self, proc: _Proc, k: int, e: BaseException) -> None:
        if self._finished(k) is None:
            return
        e.add_note(f"(raised by stream_map batch {k} on {proc.label})")
        self.post(k, False, e)

    def on_death(self, proc: _Proc) -> None:
        """A worker ended mid-map: its batches run again on the others (once: a batch whose
        second worker ends too fails, with why)."""
        how = proc.ended()
        with self.cond:
            lost = sorted((k, e) for k, e in self.pending.items() if e[0] is proc)
            for k, _ in lost:
                del self.pending[k]
            proc.inflight = 0
            self.cond.notify_all()
        if lost and not self.closed:
            warnings.warn(f"stream_map: {proc.label} {how}; its batches "
                          f"{', '.join(str(k) for k, _ in lost)} go to the other processes",
                          RuntimeWarning, stacklevel=1)
        for k, (_, data, tries, slot) in lost:
            if self.closed:
                self._free_slot(slot)
                continue
            if tries >= 1:
                self._free_slot(slot)
                self.post(k, False, DeviceLostError(
                    f"stream_map: batch {k} was on {proc.label}, which {how}, after the worker "
                    f"it was on before ended too; it was not run again"))
                continue
            self._dispatch(k, data, slot, tries + 1, exclude=proc)

    def post(self, k: int, ok: bool, value) -> None:
        with self.cond:
            if not self.closed:
                self.results[k] = (ok, value)
            self.cond.notify_all()

    def take(self, k: int):
        """Block until result k is there: (ok, value), or None at the end."""
        with self.cond:
            while k not in self.results:
                if self.closed or (self.total is not None and k >= self.total):
                    return None
                self.cond.wait(0.1)
            got = self.results.pop(k)
            self.taken = k + 1
            self.cond.notify_all()
            return got

    def close(self) -> None:
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.results.clear()
            self.cond.notify_all()
        if self.feeder is not None and self.feeder is not threading.current_thread():
            self.feeder.join(timeout=10)
        self.copier.shutdown(wait=True, cancel_futures=True)
        for p in self.st.procs:
            p.send(("cancel", self.mid))
        with self.cond:
            for entry in self.pending.values():
                entry[0].inflight -= 1
            self.pending.clear()
        self.release_inputs()

    def release_inputs(self) -> None:
        with self.cond:
            slots, self.slots = self.slots, []
        for slot in slots:
            self._drop(slot)


class ProcessMap:
    """The iterator of a map over worker processes: results in input order (see stream_map).
    ``close()`` (or leaving a ``with`` block) stops it; when stream_map started the processes
    for this map alone, they end with it."""

    def __init__(self, run: _Run, pool: DeviceProcesses | None):
        self._run = run
        self._pool = pool
        self._k = 0
        self._done = False
        self._closer = weakref.finalize(self, _close_map, run, pool)
        self._closer.atexit = False

    def __repr__(self) -> str:
        procs = ", ".join(str(p.adapter) for p in self._run.st.procs)
        state = " closed" if self._done else ""
        return f"<wgc.ProcessMap at batch {self._k} on adapter(s) {procs}{state}>"

    def __iter__(self) -> ProcessMap:
        return self

    def __enter__(self) -> ProcessMap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._done = True
        self._closer()

    def __next__(self):
        if self._done:
            raise StopIteration
        got = self._run.take(self._k)
        if got is None:
            self.close()
            raise StopIteration
        k = self._k
        self._k += 1
        ok, value = got
        if ok:
            return value
        if not any(f"batch {k}" in n for n in getattr(value, "__notes__", ())):
            value.add_note(f"(raised by stream_map batch {k})")
        raise value


def _close_map(run: _Run, pool: DeviceProcesses | None) -> None:
    run.close()
    if pool is not None:
        pool.close()
