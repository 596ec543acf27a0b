"""Transfers from and into plain (pageable) numpy arrays, side by side in one run: a 256 MB
upload and download with wgcompute (mapped staging ring, parallel memcpy) vs raw wgpu-py
queue.write_buffer / read_buffer vs raw wgpu-py with a hand-written persistent mapped staging
ring vs torch (pageable and pinned) when importable; plus the round trip of a 4 KB read.
Goals: >= 10 GB/s each way for 256 MB, <= 100 us for the 4 KB read.

    python -m benchmarks.bench_transfers [--small] [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.harness import Results, env_info, gpu_device, peers, wall_time

CHUNK = 64 << 20


def median_s(fn, repeat: int, warmup: int = 2) -> float:
    return wall_time(fn, warmup=warmup, repeat=repeat)


class RawStaging:
    """What a careful raw wgpu-py program does: persistent staging buffers (kept mapped for
    writing between uses), plain np.copyto into them, a copy command per 64 MB chunk."""

    def __init__(self, dev, nbytes: int):
        import wgpu

        self.dev = dev
        self.wgpu = wgpu
        n = -(-nbytes // CHUNK)
        size = min(CHUNK, nbytes)
        self.up = [dev.create_buffer(label="raw-up", size=size, mapped_at_creation=True,
                                     usage=wgpu.BufferUsage.MAP_WRITE |
                                     wgpu.BufferUsage.COPY_SRC) for _ in range(n)]
        self.up_promise = [None] * n
        self.down = [dev.create_buffer(label="raw-down", size=size,
                                       usage=wgpu.BufferUsage.MAP_READ |
                                       wgpu.BufferUsage.COPY_DST) for _ in range(n)]

    def upload(self, dst, src: np.ndarray) -> None:
        raw = src.reshape(-1).view(np.uint8)
        for i, start in enumerate(range(0, raw.nbytes, CHUNK)):
            part = raw[start:start + CHUNK]
            st = self.up[i]
            if self.up_promise[i] is not None:
                self.up_promise[i].sync_wait()
            st.write_mapped(part, 0)
            st.unmap()
            enc = self.dev.create_command_encoder()
            enc.copy_buffer_to_buffer(st, 0, dst, start, part.nbytes)
            self.dev.queue.submit([enc.finish()])
            self.up_promise[i] = st.map_async("WRITE")
        self.up_promise[-1].sync_wait()  # the last chunk's copy is done

    def download(self, src, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, np.uint8)
        enc = self.dev.create_command_encoder()
        starts = list(range(0, nbytes, CHUNK))
        for i, start in enumerate(starts):
            enc.copy_buffer_to_buffer(src, start, self.down[i], 0, min(CHUNK, nbytes - start))
        self.dev.queue.submit([enc.finish()])
        for i, start in enumerate(starts):
            size = min(CHUNK, nbytes - start)
            self.down[i].map_async("READ", 0, size).sync_wait()
            np.copyto(out[start:start + size],
                      np.frombuffer(self.down[i].read_mapped(0, size, copy=False), np.uint8))
            self.down[i].unmap()
        return out


def torch_rows(res, torch, host, nbytes, repeat, reps, cases) -> None:
    up_case, down_case, rt = cases
    src = torch.from_numpy(host)
    gpu = src.cuda()
    pinned = torch.empty_like(src).pin_memory()

    def t_up():
        torch.from_numpy(host).to("cuda")
        torch.cuda.synchronize()

    def t_up_pinned():
        pinned.copy_(src)  # the host copy into pinned memory counts: data starts in numpy
        gpu.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize()

    res.add(up_case, "torch (pageable)", median_s(t_up, repeat), nbytes=nbytes)
    res.add(up_case, "torch (numpy → pinned → GPU)", median_s(t_up_pinned, repeat),
            nbytes=nbytes)
    res.add(down_case, "torch (pageable)", median_s(lambda: gpu.cpu().numpy(), repeat),
            nbytes=nbytes)
    t4 = torch.arange(1024, dtype=torch.float32, device="cuda")
    res.add(rt, "torch .cpu().numpy()", median_s(lambda: t4.cpu().numpy(), reps, 20),
            nbytes=4096)


def main(argv=None) -> Results:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10, help="timed repetitions (10)")
    ap.add_argument("--mb", type=int, default=256, help="transfer size in MB (256)")
    ap.add_argument("--small", action="store_true", help="32 MB and fewer repeats (lavapipe)")
    ap.add_argument("--json", help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.small:
        args.mb, args.repeat = 32, 5
    import wgpu

    import wgcompute as wgc

    dev = gpu_device()
    nbytes = args.mb << 20
    host = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
    res = Results(f"transfers: {args.mb} MB from/into numpy, 4 KB read round trip")
    up_case, down_case = f"upload {args.mb} MB", f"download {args.mb} MB"
    print(f"# {env_info()['device']}: {args.mb} MB, median of {args.repeat}", file=sys.stderr)

    # -- wgcompute --------------------------------------------------------------------------
    buf = wgc.upload(host)
    t = median_s(lambda: buf.write_async(host).wait(), args.repeat)
    res.add(up_case, "wgcompute", t, nbytes=nbytes, note="buf.write_async().wait()")
    got = buf.to_numpy()
    err = float(np.abs(got - host).max())
    t = median_s(buf.to_numpy, args.repeat)
    res.add(down_case, "wgcompute", t, nbytes=nbytes, note="buf.to_numpy()", max_rel_err=err)
    t = median_s(lambda: buf.read_async().wait(), args.repeat)
    res.add(down_case, "wgcompute read_async", t, nbytes=nbytes,
            note="buf.read_async().wait()")

    # -- raw wgpu-py ----------------------------------------------------------------------------
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    raw = dev.create_buffer(label="raw", size=nbytes, usage=usage)
    tiny = dev.create_buffer(label="raw-tiny", size=4, usage=usage)

    def write_buffer():
        dev.queue.write_buffer(raw, 0, host)
        dev.queue.read_buffer(tiny, 0, 4)  # waits for everything queued before it

    res.add(up_case, "raw wgpu-py write_buffer", median_s(write_buffer, args.repeat),
            nbytes=nbytes)
    res.add(down_case, "raw wgpu-py read_buffer",
            median_s(lambda: np.frombuffer(dev.queue.read_buffer(raw), np.uint8),
                     args.repeat), nbytes=nbytes)
    ring = RawStaging(dev, nbytes)
    res.add(up_case, "raw wgpu-py mapped staging",
            median_s(lambda: ring.upload(raw, host), args.repeat), nbytes=nbytes)
    got = ring.download(raw, nbytes).view(np.float32)
    res.add(down_case, "raw wgpu-py mapped staging",
            median_s(lambda: ring.download(raw, nbytes), args.repeat), nbytes=nbytes,
            max_rel_err=float(np.abs(got - host).max()))

    # -- 4 KB read round trip -----------------------------------------------------------------
    small = wgc.upload(np.arange(1024, dtype=np.float32))
    rt = "read 4 KB round trip"
    reps = 50 if args.small else 500
    res.add(rt, "wgcompute", median_s(small.to_numpy, reps, 20), nbytes=4096,
            note="buf.to_numpy()")
    res.add(rt, "wgcompute read_async", median_s(lambda: small.read_async().wait(), reps, 20),
            nbytes=4096)
    res.add(rt, "raw wgpu-py read_buffer",
            median_s(lambda: dev.queue.read_buffer(small.gpu_buffer, 0, 4096), reps, 20),
            nbytes=4096)

    # -- peers --------------------------------------------------------------------------------
    torch = peers().get("torch")
    if torch is not None:
        torch_rows(res, torch, host, nbytes, args.repeat, reps, (up_case, down_case, rt))
    print(res.markdown())
    if args.json:
        res.write_json(args.json)
    return res


if __name__ == "__main__":
    main()
