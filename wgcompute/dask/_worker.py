"""The worker side: which adapter a worker process computes on (pin_device, WorkerSetup),
and lanes: one stream_map per kind of work, fed by every task that runs on the worker."""

from __future__ import annotations

import os
import queue
import re
import threading
from collections import OrderedDict, deque
from concurrent.futures import Future

import numpy as np

import wgcompute as wgc

from .._multiproc_common import usable_adapters
from ._work import Work

__all__ = ["usable_adapters", "pin_device", "pinned_adapter", "WorkerSetup", "worker_setup",
           "run_chunk", "close_lanes", "stats", "ADAPTER_ENV"]

ADAPTER_ENV = "WGCOMPUTE_DASK_ADAPTER"  # a worker's adapter: its index in wgc.adapters()

_pinned: int | None = None
_pin_lock = threading.Lock()


def pin_device(index: int) -> dict:
    """Make adapter ``index`` of wgc.adapters() this process's device (a worker process
    computes on one adapter); returns that adapter's summary. Must run before the process's
    first GPU work."""
    global _pinned
    found = wgc.adapters()
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(found):
        raise wgc.ArgumentError(f"adapter: expected an index in 0..{len(found) - 1} of "
                                f"wgc.adapters(), got {index!r}")
    chosen = found[index]
    with _pin_lock:
        if _pinned == index:
            return chosen
        # The one place a worker picks its device: its adapter by index, opened as the
        # process's default device (wgc.device(index) tells identical GPUs apart, which a
        # name could not).
        previous = wgc.default_device() if wgc.runtime.default_opened() else None
        dev = wgc.device(index)  # the default device itself when that is on this adapter
        wgc.set_default_device(dev)
        if previous is not None and previous is not dev:
            previous.close()
        _pinned = index
    return chosen


def pinned_adapter() -> int | None:
    """The adapter index this process was pinned to, or None."""
    return _pinned


def _index_for(adapter, worker_name) -> int:
    usable = usable_adapters()
    if not usable:
        raise wgc.DeviceError("no WebGPU adapter on this worker's machine")
    if adapter is None:
        env = os.environ.get(ADAPTER_ENV, "").strip()
        if env:
            return int(env)
        m = re.search(r"(\d+)$", str(worker_name))
        # `dask worker --nworkers N --name gpu` names them gpu-0 .. gpu-(N-1)
        return usable[int(m.group(1)) % len(usable) if m else 0]
    if isinstance(adapter, int) and not isinstance(adapter, bool):
        return adapter
    if isinstance(adapter, str):
        found = wgc.adapters()
        hits = [i for i in usable if adapter.lower() in found[i]["name"].lower()]
        if not hits:
            names = ", ".join(found[i]["name"] for i in usable)
            raise wgc.DeviceError(f"adapter: no usable adapter's name contains {adapter!r} "
                                  f"(usable: {names})")
        return hits[0]
    raise wgc.ArgumentError(f"adapter: expected an index, a name or None, got {adapter!r}")


try:
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # pragma: no cover - wgcompute[dask] installs distributed
    _WorkerPlugin = object


class WorkerSetup(_WorkerPlugin):
    """A Dask worker plugin pinning each worker process to one adapter and giving it a
    ``GPU=1`` resource. The adapter: ``adapter`` (an index of wgc.adapters() or part of a
    name) if given; else the one wgc.dask.LocalCluster chose for the worker; else the
    worker's number at the end of its name (``dask worker --nworkers N --name gpu`` gives
    gpu-0, gpu-1, ...) among the usable adapters, taken in turn."""

    name = "wgcompute-setup"
    idempotent = True

    def __init__(self, adapter=None):
        self.adapter = adapter

    async def setup(self, worker):
        info = pin_device(_index_for(self.adapter, worker.name))
        worker.wgcompute_adapter = info
        if "GPU" not in worker.state.total_resources:
            await worker.set_resources(GPU=1)


def worker_setup(adapter=None) -> WorkerSetup:
    """The plugin that sets up a worker of a remote cluster as wgc.dask.LocalCluster sets up
    its own: ``client.register_plugin(wgc.dask.worker_setup())``."""
    return WorkerSetup(adapter)


# -- lanes -----------------------------------------------------------------------------------
_STOP = object()
_LANES_MAX = 4  # stream_maps kept per worker; each holds depth slots of GPU memory
DEPTH = 3


class LaneClosed(Exception):
    pass


class WorkerLane:
    """One stream_map over a queue: every task of this work on the worker hands its chunk
    in and waits for its result, so chunks that are on a worker at once overlap (upload of
    one, GPU work on another, download of a third) as in a single stream_map."""

    def __init__(self, args: dict):
        self._feed: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting: deque[Future] = deque()
        self._lock = threading.Lock()
        self._closed = False
        args = dict(args)
        fn = args.pop("work")
        args = {k: v for k, v in args.items() if v is not None}
        self._results = wgc.stream_map(fn, self._chunks(), depth=DEPTH, **args)
        self._thread = threading.Thread(target=self._deliver, daemon=True,
                                        name="wgcompute-dask-lane")
        self._thread.start()

    def _chunks(self):
        while True:
            item = self._feed.get()
            if item is _STOP:
                return
            yield item

    def run(self, chunk: np.ndarray) -> np.ndarray:
        fut: Future = Future()
        with self._lock:  # _waiting must be in the order of _feed
            if self._closed:
                raise LaneClosed
            self._waiting.append(fut)
            self._feed.put(chunk)
        return fut.result()

    def _deliver(self) -> None:
        it = self._results
        while True:
            try:
                value = next(it)
            except StopIteration:
                break
            except BaseException as e:  # batch k failed: it is raised at position k
                value = e
            with self._lock:
                fut = self._waiting.popleft()
            if isinstance(value, BaseException):
                fut.set_exception(value)
            else:
                fut.set_result(value)
        with self._lock:
            self._closed = True
            left = list(self._waiting)
            self._waiting.clear()
        for fut in left:
            fut.set_exception(LaneClosed())

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._feed.put(_STOP)  # after the chunks already given: they still finish


_lanes: OrderedDict = OrderedDict()
_lanes_lock = threading.Lock()
_stats = {"chunks": 0, "lanes_created": 0}


def _lane(w: Work, shape, dtype) -> WorkerLane:
    key = w.lane_key(shape, dtype)
    with _lanes_lock:
        lane = _lanes.get(key)
        if lane is not None and not lane._closed:
            _lanes.move_to_end(key)
            return lane
        lane = _lanes[key] = WorkerLane(w.stream_args(shape, dtype))
        _stats["lanes_created"] += 1
        while len(_lanes) > _LANES_MAX:
            _lanes.popitem(last=False)[1].close()
        return lane


def run_chunk(w: Work, chunk) -> np.ndarray:
    """Upload ``chunk``, run ``w`` on it on this process's device, download the result
    (through this worker's lane for ``w``)."""
    chunk = np.asarray(chunk)
    while True:
        lane = _lane(w, chunk.shape, chunk.dtype)
        try:
            out = lane.run(chunk)
        except LaneClosed:
            continue  # closed while we were handing it in: a new lane takes it
        with _lanes_lock:
            _stats["chunks"] += 1
        return out


def close_lanes() -> int:
    """Close this process's lanes (their GPU memory is freed once their chunks finish);
    returns how many there were."""
    with _lanes_lock:
        lanes = list(_lanes.values())
        _lanes.clear()
    for lane in lanes:
        lane.close()
    return len(lanes)


def stats() -> dict:
    """Chunks run and lanes created in this process, and the adapter it was pinned to."""
    return dict(_stats, adapter=_pinned)
