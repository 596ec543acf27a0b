"""Where stream_map's host time goes: the memcpy of a batch into mapped upload staging and out
of mapped download staging, each alone, both at once (two batches in flight, as triple
buffering runs them), and both at once while the GPU copies a third buffer over PCIe. Also
what a result array costs when it is new (page faults) and what new staging costs (create,
first map), against reusing both.

    python -m benchmarks.probe_copies [--mb 64] [--repeat 7]

Prints one line per measurement: median ms and GB/s of the bytes copied."""

from __future__ import annotations

import argparse
import threading

import numpy as np

from benchmarks.harness import wall_time


def median_ms(fn, repeat: int) -> float:
    return wall_time(fn, warmup=1, repeat=repeat) * 1e3


def both(f, g) -> None:
    t = threading.Thread(target=g)
    t.start()
    f()
    t.join()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=64, help="MB per batch (64: 16M f32)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    import wgcompute as wgc
    from wgcompute import _queue, _staging
    from wgcompute._encode import Encoder
    from wgcompute.device import get_device

    n = args.mb << 20
    r = args.repeat
    print(f"# {wgc.device_info()['name']}: {args.mb} MB per copy, median of {r}, "
          f"{_staging._SPLIT} threads per large copy")
    src = np.ones(n, np.uint8)
    dst = np.ones(n, np.uint8)
    up = _staging.up_pool.acquire(n)  # mapped for writing
    down = _staging.down_pool.acquire(n)
    _staging.map_async(down, False, n).wait()
    views = {"w": _staging.mapped_write(up, n), "r": _staging.mapped_read(down, n)}
    gpu = wgc.empty(n // 4, "f32")
    # a third staging pair the GPU copies from and into while the host copies (DMA traffic)
    dma_up = _staging.up_pool.acquire(n)
    _staging.unmap(dma_up)
    dma_down = _staging.down_pool.acquire(n)

    def line(name, ms, nbytes=n):
        print(f"{name:<58} {ms:8.2f} ms  {nbytes / ms / 1e6:6.1f} GB/s")

    def w():
        _staging.copy_bytes(views["w"], src)

    def rd():
        _staging.copy_bytes(dst, views["r"])

    def dma():
        enc = Encoder()
        enc.copy_buffer_to_buffer(dma_up, 0, gpu.gpu_buffer, 0, n)
        enc.copy_buffer_to_buffer(gpu.gpu_buffer, 0, dma_down, 0, n)
        _queue.wait(_queue.submit([enc.finish()]))

    line("plain memcpy, numpy -> numpy (split)", median_ms(
        lambda: _staging.copy_bytes(dst, src), r))
    line("plain memcpy, one thread", median_ms(lambda: np.copyto(dst, src), r))
    line("upload: numpy -> mapped staging", median_ms(w, r))
    line("download: mapped staging -> touched numpy", median_ms(rd, r))
    line("upload and download at once (2 copies)", median_ms(lambda: both(w, rd), r), 2 * n)
    line("GPU: staging -> device -> staging, alone (2 DMA copies)", median_ms(dma, r), 2 * n)
    line("upload + download at once, with the GPU DMA beside", median_ms(
        lambda: both(lambda: both(w, rd), dma), r), 2 * n)
    line("upload alone, with the GPU DMA beside", median_ms(lambda: both(w, dma), r))
    line("download alone, with the GPU DMA beside", median_ms(lambda: both(rd, dma), r))

    split = _staging._SPLIT
    for t in sorted({2, 4, 8, 12, 16} - {split}):
        if t > 2 * split:  # the copy pool has 2 x _SPLIT threads
            continue
        _staging._SPLIT = t
        line(f"upload alone, {t} threads", median_ms(w, r))
        line(f"upload with the GPU DMA beside, {t} threads", median_ms(lambda: both(w, dma), r))
    _staging._SPLIT = split

    def fresh_copy():
        out = np.empty(n, np.uint8)
        _staging.copy_bytes(out, views["r"])

    line("download into a new array (page faults on the copy)", median_ms(fresh_copy, r))

    def fresh_fault():
        f = _staging.Fresh(n, np.uint8)
        f.get()

    line("Fresh(): a new array faulted in by the fault threads", median_ms(fresh_fault, r))
    views.clear()
    _staging.unmap(down)

    import wgpu

    dev = get_device().gpu_device

    def readback(stage, copy_out=True):
        """GPU copy into ``stage``, map it, then copy it out (or touch a byte a page: what a
        consumer reading the result in place starts with)."""
        enc = Encoder()
        enc.copy_buffer_to_buffer(gpu.gpu_buffer, 0, stage, 0, n)
        _queue.submit([enc.finish()], fence=False)
        _staging.map_async(stage, False, n).wait()
        v = _staging.mapped_read(stage, n)
        if copy_out:
            _staging.copy_bytes(dst, v)
        else:
            float(v[::4096].sum())
        del v
        _staging.unmap(stage)

    def new_down():
        b = dev.create_buffer(size=n, usage=wgpu.BufferUsage.MAP_READ |
                              wgpu.BufferUsage.COPY_DST)
        readback(b)
        b.destroy()

    line("readback through NEW staging (create, copy, map, memcpy)", median_ms(new_down, r))
    line("readback through reused staging (copy, map, memcpy)", median_ms(
        lambda: readback(down), r))
    line("readback, reused staging, no memcpy (result viewed in place)", median_ms(
        lambda: readback(down, copy_out=False), r))
    for b in (up, dma_up):
        b.destroy()
    for b in (down, dma_down):
        b.destroy()
    gpu.free()


if __name__ == "__main__":
    main()
