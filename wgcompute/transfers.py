"""Every copy between host memory and a device: uploads, downloads and readbacks through the
device's pools of persistent mapped staging (``queue.write_buffer``/``read_buffer`` allocate
and copy per call, 1-5 GB/s; mapped staging refilled while the GPU copies reaches 22/12 GB/s),
the stages a batch pipeline holds, and results leased over readback staging."""

from __future__ import annotations

import numpy as np

from ._pools import CHUNK, LEASE_MIN, Fresh
from ._queue import Fence
from .errors import WgComputeError

_RING = 4  # staging buffers one large upload cycles through (each refilled once it is free)
_READ_DEPTH = 3  # download chunks in flight: the GPU copies ahead while the host copies out

__all__ = ["CHUNK", "LEASE_MIN", "Fresh", "upload", "download", "Readback", "UploadStage",
           "DownloadStage"]


def _as_bytes(data: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


def _wrap(dev, e: BaseException, what: str) -> BaseException:
    if isinstance(e, WgComputeError):
        return e
    if isinstance(e, MemoryError):
        return dev.wrap(e, f"{what}: out of host memory")
    return dev.wrap(e, what)


def _mapped(dev, stage, padded: int, write: bool) -> np.ndarray:
    """The mapped range of a staging buffer, after checking the device is still there: asking
    a destroyed device's buffer for its range makes wgpu-native abort the process. Callers
    hold the device's recording section (``dev.begin_work()``) until they unmapped it: a
    close() in another thread then destroys nothing under the copy."""
    dev.check()
    return dev.link.mapped(stage, padded, write)


def upload(dev, dst, dst_offset: int, data: np.ndarray, fence: bool = True,
           fresh: bool = False) -> Fence | None:
    """Copy the bytes of ``data`` into GPU buffer ``dst`` of ``dev`` at ``dst_offset``.

    Returns once ``data`` has been copied out (it may be reused at once); the GPU copy is
    queued ahead of any later submission. Returns the last chunk's fence (None if empty, or
    with ``fence=False``: later submissions are ordered after the copy anyway). ``fresh``:
    ``dst`` was made for this data (no op held by automatic fusion can touch it: they stay
    held, e.g. the heads of an attention that reads them in place)."""
    dev.check()
    src = _as_bytes(data)
    n = src.nbytes
    staging, link, workers = dev.staging, dev.link, dev.workers
    last = None
    ring: list[list] = []  # [staging buffer, its pending re-map or None]
    try:
        for i, start in enumerate(range(0, n, CHUNK)):
            part = src[start:start + CHUNK]
            size = part.nbytes
            padded = (size + 3) & ~3
            if len(ring) < _RING:
                slot = [staging.up.acquire(padded), None]
                ring.append(slot)
            else:  # the chunk _RING steps back has been copied: its buffer is mapped again
                slot = ring[i % _RING]
                staging.wait_map(slot[1])
                slot[1] = None
            stage = slot[0]
            dev.begin_work()
            try:
                # The copy is recorded and finished BEFORE the mapped range is touched: on a
                # lost device finish() raises, where asking for the range makes wgpu-native
                # abort.
                enc = link.encoder()
                enc.copy(stage, 0, dst, dst_offset + start, padded)
                cb = enc.finish()
                view = _mapped(dev, stage, padded, True)
                workers.copy_bytes(view[:size], part)
                if padded != size:
                    view[size:padded] = 0
                del view
                link.unmap(stage)
                # only the last chunk needs a fence: the others' re-maps say when they are done
                last = dev.submit([cb], fence=fence and start + CHUNK >= n,
                                  upload="fresh" if fresh else True)
                slot[1] = link.map_async(stage, True, stage.size)
            finally:
                dev.end_work()
    except BaseException as e:
        for stage, _ in ring:  # in an unknown map state: not fit for the pool
            stage.destroy()
        if isinstance(e, Exception):
            raise _wrap(dev, e, "upload") from e
        raise
    for stage, request in ring:
        staging.up.release(stage, request)
    return last


def download(dev, src, src_offset: int, nbytes: int, out: np.ndarray | None = None
             ) -> np.ndarray:
    """Copy ``nbytes`` from GPU buffer ``src`` of ``dev`` into a new (or the given) uint8
    array. Blocks until the bytes are here. Large reads go in chunks: the GPU copies chunk i+1
    while this thread copies chunk i out of mapped memory."""
    dev.check()
    try:
        if out is None:
            out = np.empty(nbytes, dtype=np.uint8)
    except MemoryError as e:
        raise _wrap(dev, e, f"reading {nbytes} bytes") from e
    if nbytes == 0:
        return out
    staging, link, workers = dev.staging, dev.link, dev.workers
    starts = list(range(0, nbytes, CHUNK))
    inflight = []

    def issue(start):
        size = min(CHUNK, nbytes - start)
        padded = (size + 3) & ~3
        stage = staging.down.acquire(padded)
        dev.begin_work()
        try:
            enc = link.encoder()
            enc.copy(src, src_offset + start, stage, 0, padded)
            # the map is the completion; queued operators go first (their error raises here)
            dev.submit([enc.finish()], fence=False, poll=False)  # (this thread waits now)
        except BaseException:
            stage.destroy()
            raise
        else:
            return start, size, padded, stage, link.map_async(stage, False, padded)
        finally:
            dev.end_work()

    try:
        for s in starts[:_READ_DEPTH]:
            inflight.append(issue(s))
        nxt = _READ_DEPTH
        while inflight:
            start, size, padded, stage, request = inflight.pop(0)
            # Wait in this thread (its polls fire the map's callback): no hand-off to the
            # poll thread on the latency path of small reads.
            try:
                staging.wait_map(request)
            except BaseException:
                stage.destroy()
                raise
            dev.begin_work()
            try:
                view = _mapped(dev, stage, padded, False)
                workers.copy_bytes(out[start:start + size], view[:size])
                del view
                link.unmap(stage)
            finally:
                dev.end_work()
            staging.down.release(stage)
            if nxt < len(starts):
                inflight.append(issue(starts[nxt]))
                nxt += 1
    except Exception as e:
        for _start, _size, _padded, stage, _request in inflight:
            stage.destroy()
        raise _wrap(dev, e, "download") from e
    return out


def _start_reads(dev, reads) -> None:
    """Record the copies into staging of every ``(Readback, src, src_offset)``, submit them
    together and request the maps (each Readback's parts)."""
    dev.begin_work()
    try:
        dev.check()
        link = dev.link
        enc = link.encoder()
        parts = []
        try:
            for read, src, src_offset in reads:
                for start in range(0, read.nbytes, CHUNK):
                    size = min(CHUNK, read.nbytes - start)
                    padded = (size + 3) & ~3
                    stage = dev.staging.down.acquire(padded)
                    part = [start, size, padded, stage, None]
                    read._parts.append(part)
                    parts.append(part)
                    enc.copy(src, src_offset + start, stage, 0, padded)
            dev.submit([enc.finish()], fence=False)  # the maps complete it
        except Exception as e:
            for p in parts:
                dev.staging.down.release(p[3])
            for read, _, _ in reads:
                read._parts = []
            raise _wrap(dev, e, "read") from e
        for p in parts:
            p[4] = link.map_async(p[3], False, p[2])
    finally:
        dev.end_work()


class Readback:
    """A read of ``nbytes`` of ``src`` whose GPU copies into staging are submitted now, in ONE
    submission (so it sees exactly the work submitted before it); ``finish(out)`` waits for the
    maps and copies out, on whatever thread calls it."""

    def __init__(self, dev, src, src_offset: int, nbytes: int):
        self._dev = dev
        self.nbytes = nbytes
        self._parts: list = []
        _start_reads(dev, [(self, src, src_offset)])

    @classmethod
    def many(cls, dev, regions) -> list[Readback]:
        """Readbacks of several ``(src, src_offset, nbytes)`` regions, their copies in one
        submission (a model's outputs read right behind its work)."""
        reads = []
        for _src, _offset, nbytes in regions:
            read = cls.__new__(cls)
            read._dev, read.nbytes, read._parts = dev, nbytes, []
            reads.append(read)
        _start_reads(dev, [(r, src, offset) for r, (src, offset, _) in zip(reads, regions)])
        return reads

    def finish(self, out: np.ndarray) -> None:
        """Wait for each part and copy it into ``out`` (1-D uint8); every staging buffer goes
        back to the pool (or is destroyed if its map failed)."""
        dev = self._dev
        error = None
        for start, size, padded, stage, request in self._parts:
            if error is not None:
                stage.destroy()
                continue
            try:
                dev.staging.wait_map(request)
                dev.begin_work()
                try:
                    view = _mapped(dev, stage, padded, False)
                    dev.workers.copy_bytes(out[start:start + size], view[:size])
                    del view
                    dev.link.unmap(stage)
                finally:
                    dev.end_work()
                dev.staging.down.release(stage)
            except BaseException as e:
                error = e
                stage.destroy()
        self._parts = []
        if error is not None:
            raise _wrap(dev, error, "read") if isinstance(error, Exception) else error

    def drop(self) -> None:
        """Let the read go unread (an earlier read of the same submission raised): its
        staging buffers are destroyed."""
        for part in self._parts:
            part[3].destroy()
        self._parts = []


class UploadStage:
    """A batch pipeline's upload staging: ``fill(array)`` copies into its mapped memory,
    ``record(enc, dst, padded, dst_offset)`` queues the GPU copy, ``remap()`` (after the
    submit) maps it again for the next fill. Borrowed from the device's pool; ``release()``
    gives it back."""

    def __init__(self, dev, nbytes: int):
        self._dev = dev
        self.nbytes = nbytes
        self.buf = dev.staging.up.acquire(max(4, (nbytes + 3) & ~3))  # mapped for writing
        self._request = None

    def fill(self, data: np.ndarray) -> int:
        """Copy ``data``'s bytes in (waits for the previous copy's re-map); returns the padded
        byte count to record."""
        dev = self._dev
        if self._request is not None:
            dev.staging.wait_map(self._request)  # fails if the device was lost meanwhile
            self._request = None
        else:  # first fill: is the device still there? (a lost device's range would abort)
            dev.probe_native()
        src = _as_bytes(data)
        n = src.nbytes
        padded = (n + 3) & ~3
        dev.begin_work()
        try:
            if padded:
                view = _mapped(dev, self.buf, padded, True)
                dev.workers.copy_bytes(view[:n], src)
                if padded != n:
                    view[n:padded] = 0
                del view
            dev.link.unmap(self.buf)
        finally:
            dev.end_work()
        return padded

    def record(self, enc, dst, padded: int, dst_offset: int = 0) -> None:
        """Queue the copy of the filled bytes into ``dst`` at ``dst_offset`` (a multiple of 4:
        one piece of a larger upload)."""
        if padded:
            enc.copy(self.buf, 0, dst, dst_offset, padded)

    def remap(self) -> None:
        self._request = self._dev.link.map_async(self.buf, True, self.buf.size)

    def release(self, healthy: bool = True) -> None:
        """Back to the pool (or destroyed when a failure left it in an unknown state)."""
        buf, self.buf = self.buf, None
        if buf is None:
            return
        if healthy:
            try:
                if self._request is not None:
                    self._dev.staging.wait_map(self._request)
            except Exception:
                healthy = False
        if healthy:
            self._dev.staging.up.release(buf)
        else:
            buf.destroy()
        self._request = None


class DownloadStage:
    """A batch pipeline's readback staging: ``record(enc, src)`` queues the GPU copy, ``map()``
    (after the submit) requests the map, ``copy_into(out)`` or ``lease()`` delivers it."""

    def __init__(self, dev, nbytes: int, buf=None):
        self._dev = dev
        self.nbytes = nbytes
        self.padded = max(4, (nbytes + 3) & ~3)
        self.buf = buf if buf is not None else dev.staging.down.acquire(self.padded)
        self._request = None

    def record(self, enc, src) -> None:
        if self.nbytes:
            enc.copy(src, 0, self.buf, 0, self.padded)

    def map(self) -> None:
        if self.nbytes:
            self._request = self._dev.link.map_async(self.buf, False, self.padded)

    def wait(self) -> None:
        if self._request is not None:
            self._dev.staging.wait_map(self._request)
            self._request = None

    def copy_into(self, out: np.ndarray) -> None:
        """Copy the mapped bytes into ``out`` (1-D uint8 of nbytes) and unmap."""
        if not self.nbytes:
            return
        dev = self._dev
        dev.begin_work()
        try:
            view = _mapped(dev, self.buf, self.padded, False)
            dev.workers.copy_bytes(out, view[:self.nbytes])
            del view
            dev.link.unmap(self.buf)
        finally:
            dev.end_work()

    def lease(self) -> np.ndarray | None:
        """A uint8 array over the mapped staging itself (no copy) that owns it from now on:
        once the array and all its views are gone, the staging is unmapped and pooled.
        Needs reserve_lease() on the device's staging first; None where the native calls
        cannot lend a mapping (the caller then copies)."""
        staging = self._dev.staging
        self._dev.begin_work()
        try:
            self._dev.check()
            arr = self._dev.link.lease(self.buf, self.nbytes, staging.end_lease)
        finally:
            self._dev.end_work()
        if arr is None:
            return None
        self.buf = None
        return arr

    def release(self, healthy: bool = True) -> None:
        buf, self.buf = self.buf, None
        if buf is None:
            return
        if healthy:
            self._dev.staging.down.release(buf)
        else:
            buf.destroy()
