"""The GPU memory under a Buffer: its allocation at the adapter's limits, the holds of work in
flight, freeing (deferred while held; pooled memory given back) and the count of live buffers."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING

import wgpu

from .errors import ArgumentError, BufferFreedError, DeviceError

if TYPE_CHECKING:
    from .dtypes import DType
    from .runtime import Device

_USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
_ALIGN = 16  # allocation granularity: lets kernels read vec4 words past a ragged end

# Buffer ids and the live count: itertools counters, whose next() is one C call (atomic under
# the GIL), so creating and freeing a buffer takes no lock; a buffer's __del__ running inside
# another's creation (a collection, a trace hook) cannot deadlock on one. The live count is
# the difference of the creations and frees counted so far.
_ids = itertools.count(1)
_made = itertools.count()
_unmade = itertools.count()


def _counted(counter) -> int:
    """How far an itertools.count has counted, without counting (its repr: count(N))."""
    return int(repr(counter)[6:-1])


def _new_id(live: bool) -> int:
    """A new buffer's id; ``live``: it owns memory, and counts in live_buffers()."""
    if live:
        next(_made)
    return next(_ids)


def _uncount() -> None:
    """One live buffer fewer."""
    next(_unmade)


def live_count() -> int:
    """Buffers that own GPU memory now (what live_buffers() reports)."""
    return _counted(_made) - _counted(_unmade)


def _alloc(dev: Device, shape: tuple, dt: DType, label: str, argument: str = "shape"):
    if label is not None and not isinstance(label, str):
        raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
    nbytes = math.prod(shape) * dt.itemsize
    size = max(_ALIGN, (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN)
    limit = dev.limit("max-buffer-size")
    if size > limit:
        raise DeviceError(f"{argument}: {shape} {dt.name} is {nbytes} bytes, more than this "
                          f"adapter's max-buffer-size ({limit} bytes, {dev.name})")
    try:
        return new_gpu_buffer(dev, label or "wgcompute", size)
    except Exception as e:
        raise dev.wrap(e, f"{argument}: could not allocate {shape} {dt.name} ({nbytes} bytes)") \
            from e


def new_gpu_buffer(dev: Device, label: str, size: int):
    """A new GPU buffer of ``size`` bytes; one the GPU refuses while the device's memory pool
    holds idle memory is asked for again once the pool has given that memory back."""
    dev.check()
    dev.stats["buffers_created"] += 1
    try:
        return dev.gpu_device.create_buffer(label=label, size=size, usage=_USAGE)
    except Exception:
        if not dev.alive or dev.memory_pool.release() == 0:
            raise
    return dev.gpu_device.create_buffer(label=label, size=size, usage=_USAGE)


class BufferMemory:
    """How a Buffer holds, binds and frees its GPU memory: wgc.Buffer inherits this."""

    __slots__ = ()

    def _check(self, argument: str = "buffer") -> None:
        if self._freed or not self._dev.alive:
            self._refuse(argument)

    def _refuse(self, argument: str) -> None:
        dev = self._dev
        if not dev.alive:
            dev.check(argument)
        if self._freed:
            raise BufferFreedError(f"{argument}: {self!r} was freed; it cannot be used any more")

    def _pin(self, argument: str = "buffer", suffix: str = "") -> None:
        """Hold the GPU memory for a use that is about to start, then check the buffer: a
        free() from another thread either sees the hold (and defers) or has already marked
        the buffer freed (and this raises). Checking first and holding after let a free
        destroy the memory in between, and wgpu-native aborts on a destroyed buffer. The
        error names ``argument + suffix`` (joined only when it is raised: hot paths pin
        several buffers per call)."""
        self._holds.append(None)
        if self._freed or not self._dev.alive:
            self._release()
            self._refuse(argument + suffix)

    def _retain(self) -> None:
        """A submitted command uses this buffer: keep the GPU memory until _release()."""
        self._holds.append(None)

    def _release(self) -> None:
        self._holds.pop()
        # free() sets _freed before it looks at _holds, and this pops before it looks at
        # _freed: whichever comes second sees both and destroys (under _lock, once).
        if self._freed and not self._holds:
            self._drop_memory()

    def _drop_memory(self) -> None:
        """Destroy the GPU memory (or give it back to the device's pool), once."""
        with self._lock:
            gpu = self._gpu if not self._holds else None
            if gpu is not None:
                self._gpu = None
        if gpu is not None:
            self._discard(gpu)

    def _discard(self, gpu) -> None:
        if self._pool_serial and self._dev.alive:
            self._dev.memory_pool.give(gpu, self._pool_serial)
        else:
            gpu.destroy()

    def free(self) -> None:
        """Release the GPU memory (deferred while a submitted command still uses it).
        Freeing twice is harmless."""
        with self._lock:
            if self._freed:
                return
            self._freed = True
            destroy = not self._holds
            gpu = self._gpu
            if destroy:
                self._gpu = None
        _uncount()
        if gpu is not None:  # memory_stats' count (never waits)
            self._dev.untrack(gpu.size)
        if destroy and gpu is not None:
            self._discard(gpu)

    def _device_closed(self) -> None:
        """The device closed: the memory goes with it, whatever still refers to the buffer."""
        with self._lock:
            if self._freed:
                return
            self._freed = True
            gpu, self._gpu = self._gpu, None
            # _holds stays: uses in flight in other threads release what they pinned
        _uncount()
        if gpu is not None:
            self._dev.untrack(gpu.size)
            try:
                gpu.destroy()
            except Exception:  # noqa: BLE001 - the device may be gone already
                pass

    def __del__(self):
        try:
            if not self._freed:
                self.free()
        except Exception:  # interpreter shutdown
            pass

    # -- how kernels bind it -----------------------------------------------------------
    def _binding(self, argument: str = "buffer"):
        """(GPUBuffer, byte offset) a kernel binds this buffer's data at."""
        self._check(argument)
        return self._gpu, 0

    def _held_binding(self, argument: str = "buffer"):
        """``_binding`` for work whose Command holds this buffer (a stream's queued work):
        a free() since the Command was made only deferred the memory's release, so the work
        still has it; a closed or lost device has not."""
        gpu = self._gpu
        if gpu is None or not self._dev.alive:
            self._refuse(argument)
        return gpu, 0

    def _bound_bytes(self) -> int:
        """Bytes a kernel binds: the data rounded up to the 16-byte granule kernels read (a
        pooled allocation may be larger; a view's granule lies inside its base)."""
        return max(_ALIGN, -(-self.nbytes // _ALIGN) * _ALIGN)

    def _bindable(self) -> bool:
        """Whether kernels can bind it where it is (a view: at an aligned offset)."""
        return True
