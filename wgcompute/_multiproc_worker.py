"""The worker side of wgc.device_processes: a process that opens its adapter as its device,
maps the shared memory the batches come in, runs a local stream_map per map and writes each
result into shared memory for the parent."""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import pickle
import queue
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import shared_memory

import numpy as np

from ._multiproc_common import (
    NO_NOTE,
    STOP,
    adapter_index,
    create_shm,
    loaded,
    map_shm,
    pack_error,
    shm_view,
)

__all__ = ["worker_main"]


class _Worker:
    """The worker side: the device, the shared memory it maps, one local map per run."""

    def __init__(self, conn, dev, prefix: str, number: int, local_map):
        self.conn = conn
        self.dev = dev
        self.prefix = prefix
        self.number = number
        self.local_map = local_map
        self.send_lock = threading.Lock()
        self.inputs: dict[str, mmap.mmap] = {}
        self.outputs: dict[str, shared_memory.SharedMemory] = {}
        self.free: list[str] = []
        self.out_lock = threading.Lock()
        self.counter = itertools.count()
        self.payloads: dict[bytes, object] = {}
        self.runs: dict[int, _LocalRun] = {}

    def send(self, msg) -> None:
        with self.send_lock:
            self.conn.send(msg)

    def payload(self, data: bytes):
        obj = self.payloads.get(data)
        if obj is None:
            obj = self.payloads[data] = pickle.loads(data)
        return obj

    def input_view(self, name: str, shape, dt: str) -> np.ndarray:
        mapped = self.inputs.get(name)
        if mapped is None:
            mapped = self.inputs[name] = map_shm(name)
        return np.ndarray(shape, np.dtype(dt), buffer=mapped)

    def output_for(self, nbytes: int) -> tuple[str, shared_memory.SharedMemory]:
        with self.out_lock:
            fits = [n for n in self.free if self.outputs[n].size >= nbytes]
            if fits:
                name = min(fits, key=lambda n: self.outputs[n].size)
                self.free.remove(name)
                return name, self.outputs[name]
        name = f"{self.prefix}w{self.number}o{next(self.counter)}"
        shm = create_shm(name, nbytes, "result")
        with self.out_lock:
            self.outputs[name] = shm
        return name, shm

    def release_output(self, name: str) -> None:
        with self.out_lock:
            if name in self.outputs and name not in self.free:
                self.free.append(name)

    def send_error(self, mid: int, k: int, e: BaseException) -> None:
        self.send(("error", mid, k, pack_error(e)))

    def send_result(self, mid: int, k: int, value: np.ndarray, note) -> None:
        value = np.ascontiguousarray(value)
        name, shm = self.output_for(value.nbytes)
        np.copyto(shm_view(shm, value.shape, value.dtype.str), value, casting="no")
        try:
            self.send(("result", mid, k, name, value.shape, value.dtype.str, note))
        except Exception:  # a note that does not pickle
            self.release_output(name)
            raise

    def loop(self) -> None:
        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):  # the parent is gone: nothing is left to do
                return
            op = msg[0]
            if op == "close":
                return
            if op == "map":
                _, mid, payload, loader, depth = msg
                self.runs[mid] = _LocalRun(self, mid, payload, loader, depth)
            elif op == "batch":
                run = self.runs.get(msg[1])
                if run is not None:
                    run.feed(msg[2], msg[3])
            elif op == "cancel":
                run = self.runs.pop(msg[1], None)
                if run is not None:
                    run.end(cancel=True)
            elif op == "free":
                self.release_output(msg[1])
            elif op == "forget":  # unmapped once no batch over it is left
                self.inputs.pop(msg[1], None)

    def shutdown(self) -> None:
        for run in list(self.runs.values()):
            run.end(cancel=True)
        self.runs.clear()
        for shm in list(self.outputs.values()):
            with contextlib.suppress(FileNotFoundError, OSError):
                shm.unlink()
            with contextlib.suppress(BufferError):
                shm.close()
        self.inputs.clear()


class _LocalRun:
    """One map's batches on this worker: a local stream_map over them (loading on threads
    where the batches are items to load), its results sent back in the order they finish."""

    def __init__(self, worker: _Worker, mid: int, payload: bytes, loader: bytes | None,
                 depth: int):
        self.w = worker
        self.mid = mid
        self.feedq: queue.SimpleQueue = queue.SimpleQueue()
        self.gk: dict[int, int] = {}  # the local map's batch j -> the batch's index k
        self.notes: dict[int, object] = {}
        self.pool = None
        self.fatal: BaseException | None = None
        self.map = None
        self.cancelled = False
        try:
            self.load_fn = worker.payload(loader) if loader is not None else None
            if self.load_fn is not None:
                self.pool = ThreadPoolExecutor(self.load_fn.threads,
                                               thread_name_prefix="wgcompute-load")
            self.map = worker.local_map(worker.payload(payload), self._source(), depth,
                                        worker.dev, self.gk.get)
        except BaseException as e:  # noqa: BLE001 - every batch of the run reports it
            self.fatal = e
            return
        self.thread = threading.Thread(target=self._results, daemon=True,
                                       name=f"wgcompute-worker-results-{mid}")
        self.thread.start()

    def feed(self, k: int, data) -> None:
        if self.fatal is not None:
            self.w.send_error(self.mid, k, self.fatal)
            return
        if data[0] == "shm":
            _, name, shape, dt = data
            try:
                arr = self.w.input_view(name, shape, dt)
            except (OSError, ValueError) as e:  # gone: the map was closed meanwhile
                self.w.send_error(self.mid, k, e)
                return
            self.feedq.put((k, arr, None))
        else:
            self.feedq.put((k, None, self.pool.submit(self.load_fn.fn, data[1])))

    def _source(self):
        j = 0
        while True:
            got = self.feedq.get()
            if got is STOP:
                return
            k, arr, fut = got
            if fut is not None:
                arr, note = loaded(fut)
                self.notes[k] = note
            self.gk[j] = k
            j += 1
            yield arr

    def _results(self) -> None:
        j = 0
        while True:
            try:
                value = next(self.map)
            except StopIteration:
                break
            except BaseException as e:  # noqa: BLE001 - batch j failed: reported at its k
                k = self.gk.pop(j)
                j += 1
                self.notes.pop(k, None)
                if not self.cancelled:
                    self.w.send_error(self.mid, k, e)
                continue
            k = self.gk.pop(j)
            j += 1
            note = self.notes.pop(k, NO_NOTE)
            if self.cancelled:
                continue
            try:
                self.w.send_result(self.mid, k, value, note)
            except BaseException as e:  # noqa: BLE001 - no room, or a note that won't pickle
                self.w.send_error(self.mid, k, e)
            del value

    def end(self, cancel: bool) -> None:
        """No more batches: the local map finishes those it has (``cancel``: drops them)."""
        self.cancelled = cancel
        self.feedq.put(STOP)
        if self.fatal is None and cancel:
            self.map.close()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=cancel)


def worker_main(conn, adapter: int, prefix: str, number: int, local_map) -> None:
    """A worker process: open adapter ``adapter`` as this process's device, say so, then run
    what the parent sends until it says close (or is gone)."""
    # The parent handles Ctrl-C and closes its workers: one here would kill them mid-batch.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from .runtime import default_device, default_opened, device, set_default_device

    try:
        if default_opened() and adapter_index(default_device(), "device") == adapter:
            dev = default_device()  # opened already here (GL allows one device a process)
        else:
            dev = device(adapter)
        set_default_device(dev)
    except BaseException as e:  # noqa: BLE001 - told to the parent, which raises it
        conn.send(("fatal", pack_error(e)))
        return
    conn.send(("ready", {"pid": os.getpid(), "name": dev.name, "backend": dev.backend}))
    worker = _Worker(conn, dev, prefix, number, local_map)
    try:
        worker.loop()
    finally:
        worker.shutdown()
        with contextlib.suppress(Exception):
            dev.close()
