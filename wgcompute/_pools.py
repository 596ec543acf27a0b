"""What a device keeps for its transfers and temporaries: pools of mapped staging buffers by
size class (given back by a timer once idle), the count of staging lent to result arrays, the
host threads that copy large transfers and fault in new arrays, and the memory pool of freed
operator results. Owned by a runtime Device, closed with it."""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import wgpu

from ._queue import wait_event
from .errors import DeviceError

CHUNK = 32 << 20  # bytes per staging buffer for large transfers
MIN_SIZE = 64 << 10
_PARALLEL_COPY = 8 << 20  # copies larger than this are split over threads
_KEEP_PER_CLASS = 4
# Full chunks kept per direction: read_async of 256 MB stages all 8 chunks at once, and
# creating 4 new 32 MB buffers per call held it to 3.6 GB/s on the H200.
_KEEP_CHUNKS = 8
_KEEP_BYTES = 512 << 20  # per size class, for classes of 64 MB and less
LEASE_MIN = 1 << 20  # smaller results are copied: cheap, and no staging held per result
_LEASE_MAX = 256  # staging buffers lent to result arrays at once; past it results are copied
# Free staging of 1 MB or more that no transfer took for this long is given back (pinned host
# memory on a discrete GPU): WGCOMPUTE_STAGING_IDLE_S seconds, default 30.
_IDLE_MIN_SIZE = 1 << 20
_CPUS = max(1, os.cpu_count() or 1)
SPLIT = min(8, _CPUS)  # threads one large copy is split over
_FAULTERS = max(1, min(4, _CPUS // 4))  # threads faulting in new result arrays


def _keep(size: int) -> int:
    """Free buffers a pool keeps of one size class: up to 512 MB of each class (stream_map's
    leased results circulate depth + 4 buffers of their class), at least 4."""
    return max(_KEEP_PER_CLASS, min(_KEEP_CHUNKS if size == CHUNK else 16,
                                    _KEEP_BYTES // max(size, 1)))


def idle_seconds() -> float:
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


def size_class(n: int) -> int:
    c = MIN_SIZE
    while c < n:
        c <<= 1
    return min(c, CHUNK) if n <= CHUNK else c


class Workers:
    """A device's host threads, made on first use: copy threads (enough for two large copies
    at once, a stream's upload of one batch beside the download of another), fault-in threads
    (a new 64 MB array costs its first writer ~3 ms of page faults), and one readback thread
    that finishes asynchronous reads in submission order."""

    def __init__(self, label: str):
        self._label = label
        self._lock = threading.Lock()
        self._copy: ThreadPoolExecutor | None = None
        self._fault: ThreadPoolExecutor | None = None
        self._readback: ThreadPoolExecutor | None = None
        self.closed = False

    def _pool(self, attr: str, n: int, name: str) -> ThreadPoolExecutor:
        with self._lock:
            if self.closed:
                raise DeviceError(f"{self._label} is closed")
            pool = getattr(self, attr)
            if pool is None:
                pool = ThreadPoolExecutor(n, thread_name_prefix=f"wgcompute-{name}")
                setattr(self, attr, pool)
            return pool

    def copy(self) -> ThreadPoolExecutor:
        return self._pool("_copy", min(2 * SPLIT, max(_CPUS, SPLIT)), "copy")

    def fault(self) -> ThreadPoolExecutor:
        return self._pool("_fault", _FAULTERS, "fault")

    def readback(self) -> ThreadPoolExecutor:
        return self._pool("_readback", 1, "readback")

    def close(self) -> None:
        with self._lock:
            self.closed = True
            pools = [p for p in (self._copy, self._fault, self._readback) if p is not None]
            self._copy = self._fault = self._readback = None
        for p in pools:
            p.shutdown(wait=True, cancel_futures=False)

    def copy_bytes(self, dst: np.ndarray, src: np.ndarray) -> None:
        """memcpy between two 1-D uint8 arrays of equal length, in parallel when large."""
        n = dst.nbytes
        if n < _PARALLEL_COPY or SPLIT == 1:
            np.copyto(dst, src)
            return
        step = -(-n // SPLIT)
        step = (step + 4095) & ~4095
        pool = self.copy()
        futures = [pool.submit(np.copyto, dst[i:i + step], src[i:i + step])
                   for i in range(0, n, step)]
        for f in futures:
            f.result()


def _touch(pages: np.ndarray) -> None:
    pages[::4096] = 0


class Fresh:
    """A new array whose memory is faulted in by the fault threads in the background: made
    when a batch is submitted, it is ready by the time the batch's readback needs it (copying
    a mapped download into a new 64 MB array took 5.2 ms against 2.2 ms into touched memory
    on the H200 host). ``get()`` waits for the touching and returns the array."""

    def __init__(self, shape, dtype, workers: Workers):
        self.array = np.empty(shape, dtype=dtype)
        flat = self.array.reshape(-1).view(np.uint8)
        n = flat.nbytes
        self._futures = []
        if n >= _PARALLEL_COPY and SPLIT > 1:
            step = (-(-n // _FAULTERS) + 4095) & ~4095
            pool = workers.fault()
            self._futures = [pool.submit(_touch, flat[i:i + step]) for i in range(0, n, step)]

    def get(self) -> np.ndarray:
        for f in self._futures:
            f.result()
        self._futures = []
        return self.array


class Pool:
    """Free staging buffers of one direction, by size class: (buffer, its pending re-map or
    None, when it was freed) entries."""

    def __init__(self, owner: StagingPools, mode: str):
        self._owner = owner
        self.mode = mode  # "upload" or "download"
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()
        self.created = 0

    def acquire(self, nbytes: int):
        """A staging buffer of at least ``nbytes``, mapped for writing (upload) or unmapped
        (download)."""
        size = size_class(nbytes)
        alive = self._owner.link.alive
        while True:
            with self._lock:
                free = self._free.get(size)
                entry = free.pop() if free else None
            if entry is None:
                return self._create(size)
            if alive(entry[0]):  # see release()
                break
        buf, request, _since = entry
        if request is not None:  # upload buffer re-mapping after its last copy
            self._owner.wait_map(request)
        return buf

    def take_free(self, nbytes: int):
        """A free download buffer of ``nbytes``' size class, or None: never creates one."""
        alive = self._owner.link.alive
        with self._lock:
            free = self._free.get(size_class(nbytes))
            while free:
                buf = free.pop()[0]
                if alive(buf):
                    return buf
            return None

    def ensure_free(self, nbytes: int, count: int) -> None:
        """Make sure at least ``count`` free buffers of ``nbytes``' class are in the pool."""
        size = size_class(nbytes)
        with self._lock:
            missing = count - len(self._free.get(size, ()))
        for _ in range(max(0, missing)):
            self.release(self._create(size))

    def _create(self, size: int):
        owner = self._owner
        owner.check_alive()
        try:
            try:
                buf = self._new(size)
            except Exception:  # out of memory (another try once the pool gave back), lost
                if owner.make_room is None or owner.make_room() == 0:
                    raise
                buf = self._new(size)
        except Exception as e:
            raise owner.wrap(e, f"could not create {size} bytes of {self.mode} staging") from e
        with self._lock:
            self.created += 1
        return buf

    def _new(self, size: int):
        dev = self._owner.gpu_device
        if self.mode == "upload":
            return dev.create_buffer(
                label="wgcompute-staging-up", size=size, mapped_at_creation=True,
                usage=wgpu.BufferUsage.MAP_WRITE | wgpu.BufferUsage.COPY_SRC)
        return dev.create_buffer(label="wgcompute-staging-down", size=size,
                                 usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)

    def release(self, buf, request=None) -> None:
        """Keep ``buf`` for reuse (or destroy it if the pool is full or closed). A buffer whose
        wgpu-py object was already released (by the garbage collector, finalizing a reference
        cycle that held it) is dropped here and skipped by acquire()."""
        owner = self._owner
        if not owner.link.alive(buf):
            return
        kept = False
        if not owner.closed:
            with self._lock:
                free = self._free.setdefault(buf.size, [])
                if len(free) < _keep(buf.size):
                    free.append((buf, request, time.monotonic()))
                    kept = True
        if kept:
            if buf.size >= _IDLE_MIN_SIZE:
                owner.schedule_trim(owner.idle_s)
            return
        if request is not None and owner.dead is None:
            try:
                owner.wait_map(request)
                owner.link.unmap(buf)
            except Exception:
                pass
        buf.destroy()

    def drain(self) -> list:
        with self._lock:
            entries = [entry for free in self._free.values() for entry in free]
            self._free.clear()
        return entries


class StagingPools:
    """A device's upload and download staging pools, the idle-trim timer and the lease count."""

    def __init__(self, gpu_device, link, submitter, label: str, wrap=None):
        self.gpu_device = gpu_device
        self._wrap = wrap  # the device's: native error -> the WgComputeError users see
        self.link = link
        self.submitter = submitter
        self.label = label
        self.up = Pool(self, "upload")
        self.down = Pool(self, "download")
        self.idle_s = idle_seconds()
        self.closed = False
        self._trim_timer: threading.Timer | None = None
        self._trim_due = 0.0
        self._trim_lock = threading.Lock()
        self._leases = 0
        self._lease_lock = threading.Lock()
        # () -> bytes given back: the device's memory pool's release, tried when the GPU
        # refuses a staging buffer
        self.make_room = None

    @property
    def dead(self):
        return self.submitter.dead

    def check_alive(self) -> None:
        if self.submitter.dead is not None:
            raise self.submitter.dead

    def wrap(self, error: BaseException, what: str) -> BaseException:
        """A native error as the WgComputeError a user should see."""
        if self._wrap is not None:
            return self._wrap(error, what)
        if self.submitter.dead is not None:
            return self.submitter.dead
        return DeviceError(f"{what} on {self.label}: {error}")

    def wait_map(self, request) -> None:
        """Poll until ``request`` (a buffer map) resolved; raise its error."""
        wait_event(request, self.submitter)
        if request.error is not None:
            raise self.wrap(request.error, "a staging buffer could not be mapped")

    # -- leases ---------------------------------------------------------------------------------
    def reserve_lease(self) -> bool:
        """Count one more lent staging buffer, if fewer than _LEASE_MAX are out."""
        with self._lease_lock:
            if self._leases >= _LEASE_MAX:
                return False
            self._leases += 1
            return True

    def cancel_lease(self) -> None:
        with self._lease_lock:
            self._leases -= 1

    def leases_out(self) -> int:
        return self._leases

    def end_lease(self, buf) -> None:
        """A leased result array is gone: unmap its staging and pool it."""
        try:
            if self.dead is None:
                self.link.unmap(buf)
                self.down.release(buf)
        except BaseException:  # noqa: BLE001 - a finalizer (maybe at interpreter exit)
            pass
        finally:
            self.cancel_lease()

    # -- giving memory back -----------------------------------------------------------------------
    def release_free(self) -> int:
        """Destroy every free buffer of both pools; returns the bytes given back."""
        dead = [entry for pool in (self.up, self.down) for entry in pool.drain()]
        self._destroy(dead)
        return sum(buf.size for buf, _request, _since in dead)

    def _destroy(self, entries) -> None:
        """Destroy staging buffers between submits, never during one: on wgpu's GL backend a
        destroy from the trim timer's thread while another thread submits aborts the process
        (one EGL context); the submitter's lock costs nothing elsewhere (a trim is rare)."""
        if not entries:
            return
        with self.submitter._lock:
            for buf, _request, _since in entries:
                try:
                    buf.destroy()
                except Exception:  # the device is gone
                    pass

    def free_bytes(self) -> int:
        total = 0
        for pool in (self.up, self.down):
            with pool._lock:
                total += sum(e[0].size for free in pool._free.values() for e in free)
        return total

    def created(self) -> int:
        return self.up.created + self.down.created

    def schedule_trim(self, delay: float) -> None:
        """Run trim_idle in ``delay`` seconds on a daemon timer thread, unless one is due
        sooner (one timer at a time)."""
        due = time.monotonic() + delay
        with self._trim_lock:
            if self.closed:
                return
            if self._trim_timer is not None:
                if self._trim_due <= due:
                    return
                self._trim_timer.cancel()
            self._trim_timer = threading.Timer(delay, self.trim_idle)
            self._trim_timer.daemon = True
            self._trim_due = due
            self._trim_timer.start()

    def trim_idle(self) -> None:
        """Destroy the free staging of 1 MB or more that has been free for idle_s; come back
        when the next one will have been."""
        with self._trim_lock:
            if self._trim_timer is not None and self._trim_timer is not threading.current_thread():
                return  # replaced by a sooner one
            self._trim_timer = None
        now = time.monotonic()
        dead, next_due = [], None
        for pool in (self.up, self.down):
            with pool._lock:
                for size, free in pool._free.items():
                    if size < _IDLE_MIN_SIZE:
                        continue
                    keep = []
                    for entry in free:
                        if now - entry[2] >= self.idle_s:
                            dead.append(entry)
                        else:
                            keep.append(entry)
                            due = entry[2] + self.idle_s
                            next_due = due if next_due is None else min(next_due, due)
                    free[:] = keep
        self._destroy(dead)
        if next_due is not None:
            self.schedule_trim(max(0.0, next_due - now) + 0.01)

    def close(self) -> None:
        """Stop the timer and destroy every free buffer (buffers in use go with the device)."""
        with self._trim_lock:
            self.closed = True
            timer, self._trim_timer = self._trim_timer, None
        if timer is not None:
            timer.cancel()
        self.release_free()


# -- the memory pool of array results ------------------------------------------------------------
POOL_BYTES = 1 << 30  # default bound of the memory held idle per device (WGCOMPUTE_POOL_BYTES)
# ... on a discrete GPU: its own memory, which nothing else of the host's needs, and a fresh
# allocation there is slow (an H200 took ~7 ms to make each 256 MiB result, so ten queued
# relu(x + b) of 64M f32 in a loop ran 143 ms with a 1 GiB bound, 4.2 ms with all of them
# pooled). An allocation the GPU refuses gives the pool's memory back and tries once more.
POOL_BYTES_DISCRETE = 8 << 30


def pool_bytes(adapter_type: str = "") -> int:
    """WGCOMPUTE_POOL_BYTES: how much freed result memory a device keeps for reuse (0: none);
    unset, POOL_BYTES_DISCRETE on a discrete GPU and POOL_BYTES elsewhere."""
    raw = os.environ.get("WGCOMPUTE_POOL_BYTES", "").strip()
    if not raw:
        return POOL_BYTES_DISCRETE if adapter_type == "DiscreteGPU" else POOL_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        warnings.warn(f"WGCOMPUTE_POOL_BYTES={raw!r} is not a byte count; using {POOL_BYTES}",
                      stacklevel=2)
        return POOL_BYTES
    return value


def result_class(nbytes: int) -> int:
    """The allocation a request of ``nbytes`` gets from the memory pool: a power of two up to 1 MiB,
    then a multiple of a quarter of the power of two below (at most 25% more than asked)."""
    n = max(16, (nbytes + 15) // 16 * 16)
    if n <= 1 << 20:
        return 1 << (n - 1).bit_length()
    step = 1 << (n.bit_length() - 3)
    return -(-n // step) * step


# The garbage collector runs the finalizer of every object in a garbage cycle, those another
# finalizer resurrects included: a result dying in a cycle gave the pool its GPUBuffer while
# wgpu-py released that same buffer, and the next result of its size bound a released buffer
# (a DeviceError on lavapipe; wgpu-native aborted the process on its GL backend). Memory
# handed back while a collection runs is destroyed instead.
_collecting = False


def _on_gc(phase: str, _info) -> None:
    global _collecting
    _collecting = phase == "start"


gc.callbacks.append(_on_gc)


class MemoryPool:
    """GPU buffers of freed array results, kept by size class and handed to the next result
    of that class: a fresh WebGPU buffer is zero-filled by the GPU before its first use, which
    costs a 64M-element add a quarter of its time. Holds at most ``limit`` bytes idle (past it
    freed memory is destroyed); ``release()`` gives everything idle back."""

    def __init__(self, gpu_device, label: str, limit: int | None = None,
                 adapter_type: str = ""):
        self.gpu_device = gpu_device
        self.label = label
        self.limit = pool_bytes(adapter_type) if limit is None else limit
        self.held = 0  # bytes idle in the pool
        self.hits = 0
        self.misses = 0
        self.closed = False
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()
        self._serials = iter(range(1, 1 << 62))
        self.on_release = None  # called by release(): cached binds may name the memory

    def take(self, nbytes: int, cls: int = 0):
        """(GPUBuffer of result_class(nbytes) bytes, its serial) from the pool, or (None,
        0). ``cls``: that class, when the caller knows it."""
        if not cls:
            cls = result_class(nbytes)
        with self._lock:
            free = self._free.get(cls)
            if free:
                gpu, serial = free.pop()
                self.held -= cls
                self.hits += 1
                return gpu, serial
            self.misses += 1
        return None, 0

    def serial(self) -> int:
        return next(self._serials)

    def give(self, gpu, serial: int) -> None:
        """Keep a freed result's memory for reuse, or destroy it past the bound."""
        size = gpu.size
        # Never wait here: a result's __del__ calls this, and may run inside this pool's own
        # locked section on the same thread (a collection there); taken, the memory goes.
        keep = False
        if self._lock.acquire(blocking=False):
            try:
                keep = not self.closed and not _collecting and self.held + size <= self.limit
                if keep:
                    self._free.setdefault(size, []).append((gpu, serial))
                    self.held += size
            finally:
                self._lock.release()
        if not keep:
            gpu.destroy()

    def release(self) -> int:
        """Destroy every idle buffer; returns the bytes given back."""
        if self.on_release is not None:  # first: the bindings it lets go of give back memory
            self.on_release()  # (temporaries a bound multi-pass kernel shares)
        with self._lock:
            idle = [g for lst in self._free.values() for g, _ in lst]
            self._free.clear()
            released, self.held = self.held, 0
        for gpu in idle:
            try:
                gpu.destroy()
            except Exception:  # noqa: BLE001 - the device may be gone already
                pass
        return released

    def close(self) -> None:
        with self._lock:
            self.closed = True
        self.release()

    def stats(self) -> dict:
        with self._lock:
            return {"held_bytes": self.held, "limit_bytes": self.limit, "hits": self.hits,
                    "misses": self.misses,
                    "buffers": sum(len(v) for v in self._free.values())}
