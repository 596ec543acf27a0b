"""Persistent mapped staging buffers for uploads and downloads, reused across calls, and
the copies between them and plain numpy memory (several threads for large copies).

``queue.write_buffer``/``read_buffer`` allocate and copy per call (about 1-5 GB/s); a pool
of buffers that stay mapped between uses, refilled while the GPU copies the previous chunk,
is the way past that."""

from __future__ import annotations

import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import wgpu
from wgpu.backends.wgpu_native._api import libf
from wgpu.backends.wgpu_native._ffi import ffi, lib

from . import _queue
from ._encode import Encoder
from .device import get_device
from .errors import DeviceError

CHUNK = 32 << 20  # bytes per staging buffer for large transfers
_RING = 4  # staging buffers one large upload cycles through (each refilled once it is free)
_READ_DEPTH = 3  # download chunks in flight: the GPU copies ahead while the host copies out
MIN_SIZE = 64 << 10
_PARALLEL_COPY = 8 << 20  # copies larger than this are split over threads
_KEEP_PER_CLASS = 4
# Full chunks kept per direction: read_async of 256 MB stages all 8 chunks at once, and
# creating 4 new 32 MB buffers per call held it to 3.6 GB/s on the H200.
_KEEP_CHUNKS = 8
_KEEP_BYTES = 512 << 20  # per size class, for classes of 64 MB and less


def _keep(size: int) -> int:
    """Free buffers a pool keeps of one size class: up to 512 MB of each class (stream_map's
    leased results circulate depth + 4 buffers of their class), at least 4."""
    return max(_KEEP_PER_CLASS, min(_KEEP_CHUNKS if size == CHUNK else 16,
                                    _KEEP_BYTES // max(size, 1)))

# Free staging of 1 MB or more that no transfer took for this long is given back (pinned
# host memory on a discrete GPU): WGCOMPUTE_STAGING_IDLE_S seconds, default 30.
_IDLE_MIN_SIZE = 1 << 20


def _idle_seconds() -> float:
    text = os.environ.get("WGCOMPUTE_STAGING_IDLE_S", "").strip()
    if not text:
        return 30.0
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0 or v == float("inf"):
        warnings.warn(f"WGCOMPUTE_STAGING_IDLE_S={text!r}: expected a positive number of "
                      f"seconds; using 30", stacklevel=2)
        return 30.0
    return v


_IDLE_S = _idle_seconds()

_copy_pool: ThreadPoolExecutor | None = None
_copy_lock = threading.Lock()


_CPUS = max(1, os.cpu_count() or 1)
_SPLIT = min(8, _CPUS)  # threads one large copy is split over


def _threads() -> int:
    return _SPLIT


def _executor() -> ThreadPoolExecutor:
    """The copy threads: enough for two large copies at once (a stream's upload of one
    batch and download of another; sharing 8 threads serialized them)."""
    global _copy_pool
    with _copy_lock:
        if _copy_pool is None:
            _copy_pool = ThreadPoolExecutor(min(2 * _SPLIT, max(_CPUS, _SPLIT)),
                                            thread_name_prefix="wgcompute-copy")
        return _copy_pool


def copy_bytes(dst: np.ndarray, src: np.ndarray) -> None:
    """memcpy between two 1-D uint8 arrays of equal length, in parallel when large."""
    n = dst.nbytes
    workers = _threads()
    if n < _PARALLEL_COPY or workers == 1:
        np.copyto(dst, src)
        return
    step = -(-n // workers)
    step = (step + 4095) & ~4095
    futures = [_executor().submit(np.copyto, dst[i:i + step], src[i:i + step])
               for i in range(0, n, step)]
    for f in futures:
        f.result()


_FAULTERS = max(1, min(4, _CPUS // 4))  # threads faulting in Fresh arrays
_fault_pool: ThreadPoolExecutor | None = None


def _fault_executor() -> ThreadPoolExecutor:
    """Threads of their own, so that faulting in a result never queues ahead of a copy."""
    global _fault_pool
    with _copy_lock:
        if _fault_pool is None:
            _fault_pool = ThreadPoolExecutor(_FAULTERS, thread_name_prefix="wgcompute-fault")
        return _fault_pool


def _touch(pages: np.ndarray) -> None:
    pages[::4096] = 0


class Fresh:
    """A new array whose memory is faulted in by the copy threads in the background.

    A new 64 MB array costs its first writer a page fault and a page of kernel zeroing per
    4 KB: on the H200 host, copying a mapped download into a new array took 5.2 ms against
    2.2 ms into touched memory. Made when a batch is submitted, it is ready by the time the
    batch's readback needs it. ``get()`` waits for the touching and returns the array."""

    def __init__(self, shape, dtype):
        self.array = np.empty(shape, dtype=dtype)
        flat = self.array.reshape(-1).view(np.uint8)
        n = flat.nbytes
        self._futures = []
        if n >= _PARALLEL_COPY and _SPLIT > 1:
            step = (-(-n // _FAULTERS) + 4095) & ~4095
            self._futures = [_fault_executor().submit(_touch, flat[i:i + step])
                             for i in range(0, n, step)]

    def get(self) -> np.ndarray:
        for f in self._futures:
            f.result()
        self._futures = []
        return self.array


def mapped_write(buf, size: int) -> np.ndarray:
    """A writable uint8 view of a mapped buffer's first ``size`` bytes (valid until unmap)."""
    ptr = libf.wgpuBufferGetMappedRange(buf._internal, 0, size)
    return np.frombuffer(ffi.buffer(ptr, size), dtype=np.uint8)


def mapped_read(buf, size: int) -> np.ndarray:
    """A uint8 view of a buffer mapped for reading, first ``size`` bytes (valid until unmap)."""
    ptr = lib.wgpuBufferGetConstMappedRange(buf._internal, 0, size)
    return np.frombuffer(ffi.buffer(ptr, size), dtype=np.uint8)


# -- results viewing staging ------------------------------------------------------------------
# A large readback copied out of mapped staging into a new array costs the host a page fault
# and zeroing per 4 KB of the new array plus the memcpy: 3-3.6 ms per 64 MB on the H200 host
# while uploads run beside it, the bottleneck of stream_map. A leased result is a numpy array
# over the mapped staging itself: no copy. The staging is the array's until the array and
# every view of it are gone; then it is unmapped and goes back to the pool.

LEASE_MIN = 1 << 20  # smaller results are copied: cheap, and no staging held per result
_LEASE_MAX = 256  # staging buffers lent to result arrays at once; past it results are copied
_leases = 0
_lease_lock = threading.Lock()


def reserve_lease() -> bool:
    """Count one more lent staging buffer, if fewer than _LEASE_MAX are out."""
    global _leases
    with _lease_lock:
        if _leases >= _LEASE_MAX:
            return False
        _leases += 1
        return True


def cancel_lease() -> None:
    global _leases
    with _lease_lock:
        _leases -= 1


def leases_out() -> int:
    return _leases


def _end_lease(buf) -> None:
    try:
        unmap(buf)
        down_pool.release(buf)
    except BaseException:  # noqa: BLE001 - a finalizer (maybe at interpreter exit) must not raise
        pass
    finally:
        cancel_lease()


def lease_read(buf, nbytes: int) -> np.ndarray:
    """A writable uint8 array over the first ``nbytes`` of download staging ``buf``, whose
    map has resolved; reserve_lease() must have counted it. The array owns ``buf`` from now
    on: once it and all its views are gone, ``buf`` is unmapped and released to the pool."""
    ptr = lib.wgpuBufferGetConstMappedRange(buf._internal, 0, (nbytes + 3) & ~3)
    if ptr == ffi.NULL:
        cancel_lease()
        raise DeviceError("a mapped staging buffer has no mapped range")
    owner = ffi.gc(ffi.cast("char *", ptr), lambda _p, b=buf: _end_lease(b))
    return np.frombuffer(ffi.buffer(owner, nbytes), dtype=np.uint8)


# -- buffer maps ----------------------------------------------------------------------------
# Staging buffers are mapped and unmapped through wgpu-native directly. wgpu-py's map_async
# builds a C callback and a promise per call and wakes its poll thread, which then polls
# beside the thread waiting for the map: 20-30 µs per map, and half of a 4 KB read on
# lavapipe (154 -> 62 µs without it). wgpu-py's own map state of these buffers is never
# used (upload buffers stay "mapped" to it, download buffers "unmapped").

class MapRequest:
    """A pending map of a staging buffer; ``wait()`` polls the device until it is mapped."""

    __slots__ = ("event", "error")

    def __init__(self):
        self.event = _queue.Flag()
        self.error: BaseException | None = None

    def wait(self) -> None:
        _queue.wait_event(self.event)
        if self.error is not None:
            raise self.error


_maps: dict[int, MapRequest] = {}
_maps_lock = threading.Lock()
_map_ids = iter(range(1, 1 << 62))


@ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
def _on_mapped(status, message, userdata1, _userdata2):  # one C callback for the process
    with _maps_lock:
        req = _maps.pop(int(ffi.cast("uintptr_t", userdata1)), None)
    if req is None:
        return
    if status != lib.WGPUMapAsyncStatus_Success:
        text = ffi.string(message.data, message.length).decode("utf-8", "replace") \
            if message.data else ""
        req.error = DeviceError(f"could not map a staging buffer (status {status}): {text}")
    req.event.set()


def map_async(buf, write: bool, size: int) -> MapRequest:
    """Request a map of ``buf``'s first ``size`` bytes (for writing, or reading); resolves
    once the GPU is done with every submitted use of the buffer."""
    req = MapRequest()
    with _maps_lock:
        key = next(_map_ids)
        _maps[key] = req
    info = ffi.new("WGPUBufferMapCallbackInfo *")
    info.mode = lib.WGPUCallbackMode_AllowProcessEvents
    info.callback = _on_mapped
    info.userdata1 = ffi.cast("void *", key)
    lib.wgpuBufferMapAsync(buf._internal, lib.WGPUMapMode_Write if write else
                           lib.WGPUMapMode_Read, 0, size, info[0])
    return req


def unmap(buf) -> None:
    lib.wgpuBufferUnmap(buf._internal)


def _size_class(n: int) -> int:
    c = MIN_SIZE
    while c < n:
        c <<= 1
    return min(c, CHUNK) if n <= CHUNK else c


class _Pool:
    """Free staging buffers of one direction, by size class: (buffer, its pending re-map or
    None, when it was freed) entries."""

    def __init__(self, mode: str):
        self.mode = mode  # "upload" or "download"
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()
        self.created = 0

    def acquire(self, nbytes: int):
        """A staging buffer of at least ``nbytes``, mapped for writing (upload) or unmapped
        (download)."""
        size = _size_class(nbytes)
        while True:
            with self._lock:
                free = self._free.get(size)
                entry = free.pop() if free else None
            if entry is None:
                return self._create(size)
            if entry[0]._internal is not None:  # see release()
                break
        buf, promise, _since = entry
        if promise is not None:  # upload buffer re-mapping after its last copy
            promise.wait()
        return buf

    def take_free(self, nbytes: int):
        """A free download buffer of ``nbytes``' size class, or None: never creates one."""
        with self._lock:
            free = self._free.get(_size_class(nbytes))
            while free:
                buf = free.pop()[0]
                if buf._internal is not None:  # see release()
                    return buf
            return None

    def ensure_free(self, nbytes: int, count: int) -> None:
        """Make sure at least ``count`` free buffers of ``nbytes``' class are in the pool."""
        size = _size_class(nbytes)
        with self._lock:
            missing = count - len(self._free.get(size, ()))
        for _ in range(max(0, missing)):
            self.release(self._create(size))

    def _create(self, size: int):
        dev = get_device().gpu_device
        if self.mode == "upload":
            buf = dev.create_buffer(
                label="wgcompute-staging-up", size=size, mapped_at_creation=True,
                usage=wgpu.BufferUsage.MAP_WRITE | wgpu.BufferUsage.COPY_SRC)
        else:
            buf = dev.create_buffer(label="wgcompute-staging-down", size=size,
                                    usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        with self._lock:
            self.created += 1
        return buf

    def release(self, buf, promise=None) -> None:
        """Keep ``buf`` for reuse (or destroy it if the pool is full). A buffer whose wgpu-py
        object was already released (by the garbage collector, finalizing a reference cycle
        that held it) is dropped here and skipped by acquire(): stream_map's iterator closes
        through a weakref finalizer so that its staging is never in such a cycle, and this
        keeps any other holder from handing the next transfer a dead buffer."""
        if buf._internal is None:
            return
        with self._lock:
            free = self._free.setdefault(buf.size, [])
            if len(free) < _keep(buf.size):
                free.append((buf, promise, time.monotonic()))
                kept = True
            else:
                kept = False
        if kept:
            if buf.size >= _IDLE_MIN_SIZE:
                _schedule_trim(_IDLE_S)
            return
        if promise is not None:
            promise.wait()
            unmap(buf)
        buf.destroy()


up_pool = _Pool("upload")
down_pool = _Pool("download")


def release_free() -> int:
    """Destroy every free buffer of both pools (staging in use, or held by a result, stays);
    returns the bytes given back. The next transfer makes new staging as needed."""
    total = 0
    for pool in (up_pool, down_pool):
        with pool._lock:
            entries = [entry for free in pool._free.values() for entry in free]
            pool._free.clear()
        for buf, _promise, _since in entries:  # a pending re-map ends with an error, unread
            total += buf.size
            buf.destroy()
    return total


_trim_timer: threading.Timer | None = None
_trim_due = 0.0  # when the pending timer fires (time.monotonic())
_trim_lock = threading.Lock()


def _schedule_trim(delay: float) -> None:
    """Run _trim_idle in ``delay`` seconds on a daemon timer thread, unless one is due
    sooner (one timer at a time)."""
    global _trim_timer, _trim_due
    due = time.monotonic() + delay
    with _trim_lock:
        if _trim_timer is not None:
            if _trim_due <= due:
                return
            _trim_timer.cancel()
        _trim_timer = threading.Timer(delay, _trim_idle)
        _trim_timer.daemon = True
        _trim_due = due
        _trim_timer.start()


def _trim_idle() -> None:
    """Destroy the free staging of 1 MB or more that has been free for _IDLE_S; come back
    when the next one will have been."""
    global _trim_timer
    with _trim_lock:
        if _trim_timer is not None and _trim_timer is not threading.current_thread():
            return  # replaced by a sooner one
        _trim_timer = None
    now = time.monotonic()
    dead, next_due = [], None
    for pool in (up_pool, down_pool):
        with pool._lock:
            for size, free in pool._free.items():
                if size < _IDLE_MIN_SIZE:
                    continue
                keep = []
                for entry in free:
                    if now - entry[2] >= _IDLE_S:
                        dead.append(entry)
                    else:
                        keep.append(entry)
                        due = entry[2] + _IDLE_S
                        next_due = due if next_due is None else min(next_due, due)
                free[:] = keep
    for buf, _promise, _since in dead:
        try:
            buf.destroy()
        except Exception:  # the device is gone (interpreter exit)
            pass
    if next_due is not None:
        _schedule_trim(max(0.0, next_due - now) + 0.01)


def free_bytes() -> int:
    """Bytes of staging the pools hold free for the next transfers."""
    total = 0
    for pool in (up_pool, down_pool):
        with pool._lock:
            total += sum(entry[0].size for free in pool._free.values() for entry in free)
    return total


def staging_buffers_created() -> int:
    return up_pool.created + down_pool.created


def upload(dst, dst_offset: int, data: np.ndarray, fence: bool = True) -> _queue.Fence | None:
    """Copy the bytes of ``data`` into GPU buffer ``dst`` at ``dst_offset``.

    Returns once ``data`` has been copied out (it may be reused at once); the GPU copy is
    queued ahead of any later submission. Returns the last chunk's fence (None if empty, or
    with ``fence=False``: later submissions are ordered after the copy anyway)."""
    want_fence = fence
    src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    n = src.nbytes
    fence = None
    ring: list[list] = []  # [staging buffer, its pending re-map or None]
    try:
        for i, start in enumerate(range(0, n, CHUNK)):
            part = src[start:start + CHUNK]
            size = part.nbytes
            padded = (size + 3) & ~3
            if len(ring) < _RING:
                slot = [up_pool.acquire(padded), None]
                ring.append(slot)
            else:  # the chunk RING steps back has been copied: its buffer is mapped again
                slot = ring[i % _RING]
                slot[1].wait()
                slot[1] = None
            stage = slot[0]
            view = mapped_write(stage, padded)
            copy_bytes(view[:size], part)
            if padded != size:
                view[size:padded] = 0
            del view
            unmap(stage)
            enc = Encoder()
            enc.copy_buffer_to_buffer(stage, 0, dst, dst_offset + start, padded)
            # only the last chunk needs a fence: the others' re-maps say when they are done
            fence = _queue.submit([enc.finish()], fence=want_fence and start + CHUNK >= n)
            slot[1] = map_async(stage, True, stage.size)
    except BaseException:
        for stage, _ in ring:  # in an unknown map state: not fit for the pool
            stage.destroy()
        raise
    for stage, promise in ring:
        up_pool.release(stage, promise)
    return fence


def download(src, src_offset: int, nbytes: int, out: np.ndarray | None = None) -> np.ndarray:
    """Copy ``nbytes`` from GPU buffer ``src`` into a new (or the given) uint8 array.

    Blocks until the bytes are here. Large reads go in chunks: the GPU copies chunk i+1
    while this thread copies chunk i out of mapped memory."""
    if out is None:
        out = np.empty(nbytes, dtype=np.uint8)
    if nbytes == 0:
        return out
    starts = list(range(0, nbytes, CHUNK))
    inflight = []

    def issue(start):
        size = min(CHUNK, nbytes - start)
        padded = (size + 3) & ~3
        stage = down_pool.acquire(padded)
        enc = Encoder()
        enc.copy_buffer_to_buffer(src, src_offset + start, stage, 0, padded)
        _queue.submit([enc.finish()], fence=False)  # the map is the completion
        return start, size, padded, stage, map_async(stage, False, padded)

    depth = _READ_DEPTH
    for s in starts[:depth]:
        inflight.append(issue(s))
    nxt = depth
    while inflight:
        start, size, padded, stage, promise = inflight.pop(0)
        # Wait in this thread (its polls fire the map's callback): no hand-off to the poll
        # thread on the latency path of small reads. The map resolves only after the copy.
        try:
            promise.wait()
        except BaseException:
            stage.destroy()
            raise
        view = mapped_read(stage, padded)
        copy_bytes(out[start:start + size], view[:size])
        del view
        unmap(stage)
        down_pool.release(stage)
        if nxt < len(starts):
            inflight.append(issue(starts[nxt]))
            nxt += 1
    return out


def submit_download(src, src_offset: int, nbytes: int) -> list:
    """Queue GPU copies of ``nbytes`` of ``src`` into download staging, all in ONE
    submission now (so the read sees exactly what was submitted before it), and request
    their maps. Returns the parts that ``finish_download`` copies out."""
    enc = Encoder()
    parts = []
    try:
        for start in range(0, nbytes, CHUNK):
            size = min(CHUNK, nbytes - start)
            padded = (size + 3) & ~3
            stage = down_pool.acquire(padded)
            parts.append([start, size, padded, stage, None])
            enc.copy_buffer_to_buffer(src, src_offset + start, stage, 0, padded)
        _queue.submit([enc.finish()], fence=False)  # the maps are the completion
    except BaseException:
        for p in parts:
            down_pool.release(p[3])
        raise
    for p in parts:
        p[4] = map_async(p[3], False, p[2])
    return parts


def finish_download(parts: list, out: np.ndarray) -> None:
    """Wait for each part's map and copy it into ``out`` (a 1-D uint8 array); every
    staging buffer goes back to the pool (or is destroyed if its map failed)."""
    error = None
    for start, size, padded, stage, promise in parts:
        if error is not None:
            stage.destroy()
            continue
        try:
            promise.wait()
        except BaseException as e:
            error = e
            stage.destroy()
            continue
        view = mapped_read(stage, padded)
        copy_bytes(out[start:start + size], view[:size])
        del view
        unmap(stage)
        down_pool.release(stage)
    if error is not None:
        raise error
