"""Streams, side by side in one run: N batches of f32 (default 32 × 16M), each uploaded from
numpy, run through a kernel of 64 fused multiply-adds per element and downloaded into numpy.
wgcompute sequential (blocking calls) and stream_map at depth 1/2/3, vs raw wgpu-py
(sequential with write_buffer/read_buffer, and a hand-written 3-slot mapped staging ring) vs
torch with 3 CUDA streams and pinned memory when importable. Prints the N × max(stage) bound
from stage times measured alone. Goal: triple >= 2.5× sequential, within 15% of
the bound, faster than every peer.

    python -m benchmarks.bench_streams [--small] [--batches N] [--size N] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from benchmarks.harness import Results, env_info, gpu_device, peers

A, B = 0.999, 0.001
FMA_WGSL = """
struct P { n: u32, a: f32, b: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * 256u + lid;
    if (i >= p.n) {
        return;
    }
    var v = x[i];
    for (var k = 0u; k < 64u; k = k + 1u) {
        v = fma(v, p.a, p.b);
    }
    out[i] = v;
}
"""
KERNEL = "bench_fma64"


def fma_ref(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    for _ in range(64):
        v = v * np.float32(A) + np.float32(B)
    return v


def timed(fn, repeat: int) -> tuple[float, object]:
    """Median seconds of fn() over ``repeat`` runs (after one warm-up) and the last result."""
    out = fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


_refs: dict[int, np.ndarray] = {}


def max_err(results, batches) -> float:
    """Relative error of the first and last batch against the float64 host reference."""
    worst = 0.0
    for i in {0, len(batches) - 1}:
        if i not in _refs:
            _refs[i] = fma_ref(batches[i])
        want = _refs[i]
        worst = max(worst, float(np.abs(results[i] - want).max() / np.abs(want).max()))
    return worst


# -- wgcompute --------------------------------------------------------------------------------

def gpu_queue_time(wgc, inp, out) -> float | None:
    """Seconds of one batch's GPU work as stream_map submits it, host copies excluded:
    staging -> input copy, the kernel, output -> staging copy, in one submission. None
    where this wgcompute version lacks the internals it uses (the bound is then left out)."""
    from wgcompute.commands import bound
    from wgcompute.kernels import registry

    d = bound(registry.get(KERNEL), [inp], out, {"a": A, "b": B})
    if getattr(inp, "device", None) is not None:  # the per-device runtime
        from wgcompute import transfers
        from wgcompute._queue import wait

        dev = inp.device
        up = transfers.UploadStage(dev, inp.nbytes)
        padded = up.fill(np.zeros(inp.size, np.float32))  # a copy source must be unmapped
        down = transfers.DownloadStage(dev, out.nbytes)
        calls = d.raw_calls()

        def batch():
            enc = dev.link.encoder()
            up.record(enc, inp.gpu_buffer, padded)
            enc.record_calls(calls)
            down.record(enc, out.gpu_buffer)
            wait(dev.submitter.submit([enc.finish()]))

        def release():
            up.release(False)
            down.release()
    else:  # wgcompute 0.1's module-level staging and queue
        try:
            from wgcompute._encode import Encoder

            from wgcompute import _queue, _staging
        except ImportError:
            return None
        up = _staging.up_pool.acquire(inp.nbytes)
        _staging.unmap(up)  # pool buffers come mapped for writing; a copy source must not be
        down = _staging.down_pool.acquire(out.nbytes)

        def batch():
            enc = Encoder()
            enc.copy_buffer_to_buffer(up, 0, inp.gpu_buffer, 0, inp.nbytes)
            cpass = enc.begin_compute_pass()
            d.encode(cpass)
            cpass.end()
            enc.copy_buffer_to_buffer(out.gpu_buffer, 0, down, 0, out.nbytes)
            _queue.wait(_queue.submit([enc.finish()]))

        def release():
            up.destroy()
            down.destroy()
    try:
        t, _ = timed(batch, 5)
    finally:
        release()
    return t


def wgc_sequential(wgc, batches, inp, out):
    results = []
    for b in batches:
        inp.write(b)
        wgc.run_kernel(KERNEL, [inp], out, {"a": A, "b": B})
        results.append(out.to_numpy())
    return results


def wgc_stream_map(wgc, batches, depth):
    return list(wgc.stream_map(KERNEL, batches, depth=depth, params={"a": A, "b": B}))


def wgc_stream_map_consumed(wgc, batches, depth):
    """The DataLoader way: each result is used as it comes and dropped (only the first and
    last are kept, for the error check), so its staging goes back to the pool."""
    kept = {}
    last = len(batches) - 1
    for i, r in enumerate(wgc.stream_map(KERNEL, batches, depth=depth,
                                         params={"a": A, "b": B})):
        if i in (0, last):
            kept[i] = r
    return kept


# -- raw wgpu-py ---------------------------------------------------------------------------------

class Raw:
    """Raw wgpu-py, written the way a careful user would: one pipeline, a uniform, bind groups
    per buffer pair, 2-D folded grid."""

    def __init__(self, dev, n: int, slots: int):
        import wgpu

        self.wgpu, self.dev, self.n = wgpu, dev, n
        usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        module = dev.create_shader_module(code=FMA_WGSL)
        self.pipe = dev.create_compute_pipeline(layout="auto", compute={"module": module,
                                                                        "entry_point": "main"})
        uni = dev.create_buffer_with_data(
            data=np.array([n], np.uint32).tobytes() + np.array([A, B], np.float32).tobytes()
            + b"\0" * 4, usage=wgpu.BufferUsage.UNIFORM)
        self.ins = [dev.create_buffer(size=4 * n, usage=usage) for _ in range(slots)]
        self.outs = [dev.create_buffer(size=4 * n, usage=usage) for _ in range(slots)]
        layout = self.pipe.get_bind_group_layout(0)
        self.bgs = [dev.create_bind_group(layout=layout, entries=[
            {"binding": 0, "resource": {"buffer": self.ins[s]}},
            {"binding": 1, "resource": {"buffer": self.outs[s]}},
            {"binding": 2, "resource": {"buffer": uni}}]) for s in range(slots)]
        groups = -(-n // 256)
        self.grid = (groups, 1) if groups <= 65535 else (-(-groups // 2), 2)
        self.up = [dev.create_buffer(size=4 * n, mapped_at_creation=True,
                                     usage=wgpu.BufferUsage.MAP_WRITE |
                                     wgpu.BufferUsage.COPY_SRC) for _ in range(slots)]
        self.down = [dev.create_buffer(size=4 * n, usage=wgpu.BufferUsage.MAP_READ |
                                       wgpu.BufferUsage.COPY_DST) for _ in range(slots)]
        self.up_ready = [None] * slots

    def encode_compute(self, enc, s):
        cp = enc.begin_compute_pass()
        cp.set_pipeline(self.pipe)
        cp.set_bind_group(0, self.bgs[s])
        cp.dispatch_workgroups(*self.grid)
        cp.end()

    def sequential(self, batches):
        q = self.dev.queue
        results = []
        for b in batches:
            q.write_buffer(self.ins[0], 0, b)
            enc = self.dev.create_command_encoder()
            self.encode_compute(enc, 0)
            q.submit([enc.finish()])
            results.append(np.frombuffer(q.read_buffer(self.outs[0]), np.float32))
        return results

    def ring(self, batches):
        """Three slots; while the GPU works on batch i, the host copies batch i+1 in and
        batch i-2 out (one host thread, the natural hand-written way)."""
        slots = len(self.up)
        nbytes = 4 * self.n
        up_ready = self.up_ready  # kept across runs: the buffers stay mapping between them
        in_flight = [None] * slots  # (batch index, map promise) of the slot's readback
        results = [None] * len(batches)

        def drain(s):
            i, promise = in_flight[s]
            promise.sync_wait()
            results[i] = np.frombuffer(self.down[s].read_mapped(0, nbytes, copy=True),
                                       np.float32)
            self.down[s].unmap()
            in_flight[s] = None

        for i, b in enumerate(batches):
            s = i % slots
            if in_flight[s] is not None:
                drain(s)
            if up_ready[s] is not None:
                up_ready[s].sync_wait()
            self.up[s].write_mapped(b, 0)
            self.up[s].unmap()
            enc = self.dev.create_command_encoder()
            enc.copy_buffer_to_buffer(self.up[s], 0, self.ins[s], 0, nbytes)
            self.encode_compute(enc, s)
            enc.copy_buffer_to_buffer(self.outs[s], 0, self.down[s], 0, nbytes)
            self.dev.queue.submit([enc.finish()])
            up_ready[s] = self.up[s].map_async("WRITE")
            in_flight[s] = (i, self.down[s].map_async("READ", 0, nbytes))
        for k in range(len(batches)):
            s = k % slots
            if in_flight[s] is not None and in_flight[s][0] == k:
                drain(s)
        return results


# -- torch ------------------------------------------------------------------------------------

def torch_streams(torch, batches, n):
    """3 CUDA streams, pinned staging both ways, a fused 64-FMA kernel (jiterator) if it
    compiles, else 64 addcmul launches (noted)."""
    code = ("template <typename T> T fma64(T x, T a, T b) { "
            "for (int k = 0; k < 64; ++k) { x = x * a + b; } return x; }")
    note = "jiterator fused kernel"
    try:
        fused = torch.cuda.jiterator._create_jit_fn(code, a=A, b=B)
        fused(torch.ones(4, device="cuda"))

        def kernel(x):
            return fused(x, a=A, b=B)
    except Exception:
        note = "64 unfused addcmul launches (jiterator unavailable)"

        def kernel(x):
            bt = torch.full((), B, device="cuda")
            for _ in range(64):
                x = torch.addcmul(bt, x, torch.full((), A, device="cuda"))
            return x

    slots = 3
    streams = [torch.cuda.Stream() for _ in range(slots)]
    pin_in = [torch.empty(n, dtype=torch.float32).pin_memory() for _ in range(slots)]
    pin_out = [torch.empty(n, dtype=torch.float32).pin_memory() for _ in range(slots)]
    gin = [torch.empty(n, dtype=torch.float32, device="cuda") for _ in range(slots)]
    done = [None] * slots

    def run():
        results = [None] * len(batches)
        pending = [None] * slots
        for i, b in enumerate(batches):
            s = i % slots
            if pending[s] is not None:
                done[s].synchronize()
                results[pending[s]] = pin_out[s].numpy().copy()
            pin_in[s].numpy()[:] = b
            with torch.cuda.stream(streams[s]):
                gin[s].copy_(pin_in[s], non_blocking=True)
                y = kernel(gin[s])
                pin_out[s].copy_(y, non_blocking=True)
                done[s] = torch.cuda.Event()
                done[s].record(streams[s])
            pending[s] = i
        for k in range(len(batches)):
            s = k % slots
            if pending[s] == k:
                done[s].synchronize()
                results[k] = pin_out[s].numpy().copy()
        return results

    return run, note


def main(argv=None) -> Results:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=32, help="number of batches (32)")
    ap.add_argument("--size", type=int, default=1 << 24, help="f32 per batch (16M)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per variant (3)")
    ap.add_argument("--small", action="store_true", help="8 batches of 1M (lavapipe)")
    ap.add_argument("--json", help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.small:
        args.batches, args.size, args.repeat = 8, 1 << 20, 2
    import wgcompute as wgc

    n, count = args.size, args.batches
    rng = np.random.default_rng(0)
    base = rng.standard_normal(n).astype(np.float32)
    batches = [base + np.float32(i) for i in range(count)]
    print(f"# {env_info()['device']}: {count} batches of {n:,} f32, median of {args.repeat}",
          file=sys.stderr)
    if KERNEL not in wgc.kernels():
        wgc.register_kernel(KERNEL, FMA_WGSL, bindings=[("x", "read"), ("out", "read_write"),
                                                        ("p", "uniform")],
                            params={"n": "u32", "a": "f32", "b": "f32"})
    case = f"{count} × {n:,} f32: upload → 64 FMA → download"
    moved = 2 * 4 * n * count
    res = Results(f"streams: {case}", reference="wgcompute stream_map depth=3")

    # Stage times, each measured alone (the bound's inputs).
    inp, out = wgc.empty(n, "f32"), wgc.empty(n, "f32")
    t_up, _ = timed(lambda: inp.write_async(batches[0]).wait(), 5)
    t_gpu, _ = timed(lambda: wgc.run_kernel(KERNEL, [inp], out, {"a": A, "b": B}), 5)
    t_new, _ = timed(out.to_numpy, 5)
    # stream_map's readback copies into a result its copy threads faulted in while the GPU
    # worked (a new array's page faults are not on its path): the same download, into
    # touched memory, is the stage's time
    touched = np.ones(n, np.float32).view(np.uint8)
    try:
        if getattr(out, "device", None) is None:
            raise ImportError("wgcompute 0.1: no per-device runtime")
        from wgcompute import transfers

        t_down, _ = timed(lambda: transfers.download(out.device, out.gpu_buffer, 0, out.nbytes,
                                                     touched), 5)
    except ImportError:
        try:  # wgcompute 0.1
            from wgcompute import _staging

            t_down, _ = timed(lambda: _staging.download(out.gpu_buffer, 0, out.nbytes,
                                                        touched), 5)
        except (ImportError, AttributeError):  # another version: the public download instead
            t_down = t_new
    bound = count * max(t_up, t_gpu, t_down)
    t_queue = gpu_queue_time(wgc, inp, out)
    queue_bound = count * max(t_up, t_down, t_queue or 0.0)

    t_seq, r = timed(lambda: wgc_sequential(wgc, batches, inp, out), args.repeat)
    res.add(case, "wgcompute sequential", t_seq, nbytes=moved, max_rel_err=max_err(r, batches),
            note="write, run_kernel, to_numpy per batch")
    times = {}
    for depth in (1, 2, 3):
        times[depth], r = timed(lambda d=depth: wgc_stream_map(wgc, batches, d), args.repeat)
        res.add(case, f"wgcompute stream_map depth={depth}", times[depth], nbytes=moved,
                max_rel_err=max_err(r, batches))

    times["consumed"], r = timed(lambda: wgc_stream_map_consumed(wgc, batches, 3), args.repeat)
    res.add(case, "wgcompute stream_map depth=3, results consumed", times["consumed"],
            nbytes=moved, max_rel_err=max_err(r, batches),
            note="each result dropped after use (first and last kept for the error check)")

    raw = Raw(gpu_device(), n, 3)
    t, r = timed(lambda: raw.sequential(batches), args.repeat)
    res.add(case, "raw wgpu-py sequential", t, nbytes=moved, max_rel_err=max_err(r, batches),
            note="write_buffer, submit, read_buffer")
    t, r = timed(lambda: raw.ring(batches), args.repeat)
    res.add(case, "raw wgpu-py 3-slot mapped ring", t, nbytes=moved,
            max_rel_err=max_err(r, batches))

    torch = peers().get("torch")
    if torch is not None:
        run, note = torch_streams(torch, batches, n)
        t, r = timed(run, args.repeat)
        res.add(case, "torch 3 streams + pinned", t, nbytes=moved,
                max_rel_err=max_err(r, batches), note=note)

    print(res.markdown())
    print()
    print(f"stage times alone: upload {t_up * 1e3:.2f} ms, kernel {t_gpu * 1e3:.2f} ms, "
          f"download {t_down * 1e3:.2f} ms per batch (into touched memory; to_numpy into a "
          f"new array: {t_new * 1e3:.2f} ms)")
    print(f"N × max(stage) bound: {bound * 1e3:.1f} ms; N × sum(stages): "
          f"{count * (t_up + t_gpu + t_down) * 1e3:.1f} ms")
    if t_queue is not None:
        print(f"GPU queue per batch (copy in + kernel + copy out, one submission): "
              f"{t_queue * 1e3:.2f} ms; WebGPU has one queue, so the GPU parts of all stages "
              f"run one after another: N × max(upload, GPU queue, download) = "
              f"{queue_bound * 1e3:.1f} ms; depth 3 is "
              f"{100 * (times[3] / queue_bound - 1):+.0f}% from it")
    print(f"triple buffering (stream_map depth=3): {times[3] * 1e3:.1f} ms = "
          f"{t_seq / times[3]:.2f}× the sequential baseline, "
          f"{100 * (times[3] / bound - 1):+.0f}% from the bound "
          f"(double: {t_seq / times[2]:.2f}×)")
    print(f"triple buffering, results consumed as they come: {times['consumed'] * 1e3:.1f} ms "
          f"= {t_seq / times['consumed']:.2f}× the sequential baseline, "
          f"{100 * (times['consumed'] / bound - 1):+.0f}% from the bound")
    if args.json:
        res.write_json(args.json)
    return res


if __name__ == "__main__":
    main()
