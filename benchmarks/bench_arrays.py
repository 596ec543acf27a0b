"""Buffers as arrays, in ONE run: the operator path (``c = a + b``, as a user writes it in a
loop) against ``wgc.add(a, b, out)`` (the goal: within 10%), the same without the memory
pool and with ``wgc.add(a, b)`` (a new, zero-filled output each call) to show what the pool
saves; broadcasting and batched matmul beside their plain forms (GPU time); an unaligned
view; torch / CuPy operators when importable. Wall times are of the user's call (median),
launched as the docs tell users to.

    python -m benchmarks.bench_arrays [--small] [--n ELEMENTS] [--json PATH]

--small: 4M elements (lavapipe finishes in about a minute); default 64M. With $OUT set the
JSON also goes to $OUT/bench_arrays.json."""

from __future__ import annotations

import argparse
import gc
import sys

import numpy as np

from benchmarks.harness import (
    CUDA_EVENT,
    WALL,
    Results,
    cuda_time,
    gpu_time,
    max_rel_err,
    peers,
    wall_time,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--n", type=int, default=None, help="elements (a multiple of 1024)")
    args = ap.parse_args(argv)

    import wgcompute as wgc
    from wgcompute.kernels import bind, get

    n = args.n or ((4 << 20) if args.small else (64 << 20))
    repeat = args.repeat or (5 if args.small else 20)
    dev = wgc.current_device()
    res = Results("wgcompute arrays" + (" (--small)" if args.small else ""),
                  reference="wgc.add(a, b, out)")
    print(f"{dev.name} ({dev.backend}); n = {n}", flush=True)

    def row(case, impl, t, how, got=None, want=None, **kw):
        err = None if got is None or want is None else max_rel_err(got, want)
        res.add(case, impl, t, timing=how, max_rel_err=err, **kw)
        print(f"  {case:<30} {impl:<34} {t * 1e3:9.3f} ms  [{how}]", flush=True)

    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(n, dtype=np.float32)
    b_np = rng.standard_normal(n, dtype=np.float32)
    want = a_np + b_np
    a, b, out = wgc.from_numpy(a_np), wgc.from_numpy(b_np), wgc.empty(n, "f32")
    case = f"a + b f32 {n >> 20}M"
    kw = {"nbytes": 3 * 4 * n, "size": n}

    # the reference and the operator, alternated so that drift hits both alike
    holder = {}

    def operator():
        holder["c"] = a + b  # the previous result is alive until replaced, as in a loop

    def functional():
        wgc.add(a, b, out)

    def fresh():
        wgc.add(a, b).free()

    times = {"ref": [], "op": []}
    for _ in range(3):
        times["ref"].append(wall_time(functional, warmup=2, repeat=repeat))
        times["op"].append(wall_time(operator, warmup=2, repeat=repeat))
    t_ref, t_op = min(times["ref"]), min(times["op"])
    row(case, "wgc.add(a, b, out)", t_ref, WALL, out.to_numpy(), want, **kw)
    row(case, "c = a + b", t_op, WALL, holder["c"].to_numpy(), want, **kw)
    holder.clear()
    limit = dev.memory_pool.limit
    dev.release_memory_pool()
    dev.memory_pool.limit = 0
    try:
        t = wall_time(operator, warmup=2, repeat=repeat)
        row(case, "c = a + b, no memory pool", t, WALL, **kw)
    finally:
        holder.clear()
        dev.memory_pool.limit = limit
    row(case, "wgc.add(a, b) (new output)", wall_time(fresh, warmup=2, repeat=repeat), WALL,
        **kw)
    ratio = t_op / t_ref
    print(f"  operator / wgc.add(out): {ratio:.3f} (goal <= 1.10): "
          f"{'met' if ratio <= 1.10 else 'MISSED'}", flush=True)
    for name, mod in peers().items():
        try:
            if name == "torch":
                ta, tb = mod.from_numpy(a_np).cuda(), mod.from_numpy(b_np).cuda()
            else:
                ta, tb = mod.asarray(a_np), mod.asarray(b_np)
            keep = {}

            def peer_op(ta=ta, tb=tb, keep=keep, mod=mod, name=name):
                keep["c"] = ta + tb
                (mod.cuda.synchronize() if name == "torch"
                 else mod.cuda.runtime.deviceSynchronize())

            row(case, f"{name} a + b (wall, synchronized)",
                wall_time(peer_op, warmup=2, repeat=repeat), WALL, **kw)
            row(case, f"{name} a + b", cuda_time(mod, lambda ta=ta, tb=tb: ta + tb,
                                                 repeat=repeat), CUDA_EVENT, **kw)
        except Exception as e:  # a peer failing must not stop the run
            print(f"  {name} failed: {e}", file=sys.stderr)

    # -- GPU time: broadcasting and batched matmul beside their plain forms ---------------
    m = 1024
    cols = n // m
    x = wgc.from_numpy(a_np.reshape(m, cols))
    row_b = wgc.from_numpy(b_np[:cols].copy())
    full = wgc.from_numpy(b_np.reshape(m, cols))
    o2 = wgc.empty((m, cols), "f32")
    bcase = f"add f32 ({m}, {cols})"
    bkw = {"nbytes": 3 * 4 * n, "size": n}
    for impl, other in (("same shapes (vec4 path)", full), ("+ (cols,) broadcast", row_b)):
        d = bind(get("elementwise_add"), [x, other], o2, None)
        t, how = gpu_time(None, record_pass=d.encode, repeat=repeat)
        ref = a_np.reshape(m, cols) + (b_np.reshape(m, cols) if other is full
                                       else b_np[:cols])
        row(bcase, impl, t, how, o2.to_numpy(), ref, **bkw)
    for buf in (x, row_b, full, o2):
        buf.free()

    size = 256 if args.small else 1024
    batch = 8 if args.small else 16
    flops = 2.0 * batch * size ** 3
    aa = wgc.from_numpy(rng.standard_normal((batch, size, size), dtype=np.float32))
    bb = wgc.from_numpy(rng.standard_normal((batch, size, size), dtype=np.float32))
    b2 = wgc.from_numpy(rng.standard_normal((size, size), dtype=np.float32))
    mcase = f"matmul f32 {batch}x{size}^3"
    for impl, rhs, shape in (("batched (a, b both 3-D)", bb, (batch, size, size)),
                             ("b shared (folded into 2-D)", b2, (batch, size, size))):
        o3 = wgc.empty(shape, "f32")
        d = bind(get("matmul"), [aa, rhs], o3, None)
        t, how = gpu_time(None, record_pass=d.encode, repeat=max(3, repeat // 2))
        row(mcase, impl, t, how, flops=flops, size=flops)
        o3.free()
    for buf in (aa, bb, b2):
        buf.free()

    # an unaligned view (x[1:]) goes through a GPU copy before the kernel
    vcase = f"x[1:] + x[:-1] f32 {n >> 20}M"

    def views():
        holder["v"] = a[1:] + a[:-1]

    row(vcase, "c = x[1:] + x[:-1]", wall_time(views, warmup=2, repeat=repeat), WALL,
        nbytes=3 * 4 * (n - 1), size=n)
    holder.clear()
    gc.collect()
    for buf in (a, b, out):
        buf.free()

    res.report(args.json, "bench_arrays.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
