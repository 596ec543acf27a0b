"""The core engine against the same work written by hand in raw wgpu-py, time per call
including Python overhead: a 16M-element f32 add and a 512³ f32 matmul.

    python -m benchmarks.bench_core [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from benchmarks.harness import Results, env_info, gpu_device, max_rel_err, wall_time

ADD = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = g.y * nwg.x * 256u + g.x;
    if (i < arrayLength(&out)) { out[i] = a[i] + b[i]; }
}
"""
MATMUL = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
const N: u32 = NNNu;
@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= N || g.y >= N) { return; }
    var acc = 0.0;
    for (var k = 0u; k < N; k = k + 1u) { acc = acc + a[g.y * N + k] * b[k * N + g.x]; }
    out[g.y * N + g.x] = acc;
}
"""


def raw_runner(dev, src, arrays, out_nbytes, grid):
    """The hand-written wgpu-py program: upload once, then per call encode + submit +
    read_buffer (the obvious way to wait)."""
    import wgpu

    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    bufs = [dev.create_buffer_with_data(data=a, usage=usage) for a in arrays]
    out = dev.create_buffer(size=out_nbytes, usage=usage)
    pipe = dev.create_compute_pipeline(layout="auto", compute={
        "module": dev.create_shader_module(code=src), "entry_point": "main"})
    bg = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": b}} for i, b in enumerate(bufs + [out])])

    def call():
        enc = dev.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pipe)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(*grid)
        p.end()
        dev.queue.submit([enc.finish()])
        dev.queue.read_buffer(out, 0, 4)

    return call, lambda: np.frombuffer(dev.queue.read_buffer(out), np.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--small", action="store_true", help="same sizes, fewer repeats")
    args = ap.parse_args(argv)
    repeat = 3 if args.small else args.repeat

    import wgcompute as wgc

    dev = gpu_device()
    res = Results("core engine vs raw wgpu-py (time per call, Python overhead included)")
    rng = np.random.default_rng(0)

    n = 1 << 24
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    a, b, out = wgc.from_numpy(x), wgc.from_numpy(y), wgc.empty((n,), "f32")
    t = wall_time(lambda: wgc.add(a, b, out), warmup=3, repeat=repeat)
    err = max_rel_err(out.to_numpy(), x + y)
    res.add("f32 add 16M", "wgcompute", t, nbytes=12 * n, max_rel_err=err, note="wgc.add")
    groups = n // 256
    call, read = raw_runner(dev, ADD, [x, y], 4 * n, (65535, -(-groups // 65535), 1))
    t = wall_time(call, warmup=3, repeat=repeat)
    res.add("f32 add 16M", "raw wgpu-py", t, nbytes=12 * n, max_rel_err=max_rel_err(read(), x + y))

    m = 512
    A = rng.standard_normal((m, m), dtype=np.float32)
    B = rng.standard_normal((m, m), dtype=np.float32)
    want = A.astype(np.float64) @ B
    ga, gb, gc = wgc.from_numpy(A), wgc.from_numpy(B), wgc.empty((m, m), "f32")
    t = wall_time(lambda: wgc.matmul(ga, gb, gc), warmup=3, repeat=repeat)
    res.add("f32 matmul 512³", "wgcompute", t, flops=2 * m**3,
            max_rel_err=max_rel_err(gc.to_numpy(), want), note="wgc.matmul")
    call, read = raw_runner(dev, MATMUL.replace("NNN", str(m)), [A, B], 4 * m * m,
                            (m // 16, m // 16, 1))
    t = wall_time(call, warmup=3, repeat=repeat)
    res.add("f32 matmul 512³", "raw wgpu-py", t, flops=2 * m**3,
            max_rel_err=max_rel_err(read().reshape(m, m), want), note="naive, one thread/output")
    print(f"device: {env_info().get('device')}")
    print(res.markdown())
    if args.json:
        res.write_json(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
