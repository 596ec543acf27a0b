"""wgcompute's kernels side by side with raw wgpu-py written the obvious way, numpy on the CPU,
and torch / CuPy when importable, all in ONE run: elementwise, reductions, softmax, matmul
(f32 and f16), copy / transpose / fill. Prints a markdown table (with the max relative error
of each GPU result against numpy), writes JSON and a PNG of GB/s and TFLOP/s against size.

    python -m benchmarks.bench_kernels [--small] [--only NAME[,NAME]] [--json PATH] [--png PATH]
    python -m benchmarks.bench_kernels --plot-from PATH.json [--png PATH]   # plot elsewhere

--small uses sizes a CPU adapter (lavapipe) finishes in about a minute. NAMEs: elementwise,
reduce, softmax, matmul, copy, sweep. GPU kernel times come from timestamp queries where the
adapter has them (wall time otherwise); torch / CuPy from CUDA events; numpy from wall time.
Beside each GPU time, the wall clock of a user's loop: ten launches queued (wgcompute's
run_kernel_async, raw wgpu-py submits, torch / CuPy calls) and one wait. A raw wgpu-py case
whose buffer exceeds the adapter's storage-binding limit is skipped with a printed reason."""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time

import numpy as np

from benchmarks.harness import (
    CUDA_EVENT,
    WALL,
    Results,
    binding_limit,
    bound,
    cuda_time,
    env_info,
    gpu_device,
    gpu_time,
    max_rel_err,
    peer_wall,
    peers,
    queued_wall,
    raw_launcher,
    wall_time,
)
from wgcompute.errors import WgComputeError

GROUPS = ("elementwise", "reduce", "softmax", "matmul", "copy", "sweep")


class Ctx:
    def __init__(self, small: bool, repeat: int):
        import wgcompute as wgc

        self.wgc = wgc
        self.small = small
        self.repeat = repeat
        self.peers = peers()
        self.dev = gpu_device()
        self.res = Results("wgcompute kernels" + (" (--small)" if small else ""))

    # -- timing helpers --------------------------------------------------------------------
    def gpu(self, record_pass, repeat=None, warmup=2):
        return gpu_time(None, record_pass=record_pass, warmup=warmup,
                        repeat=repeat or self.repeat)

    def gpu_enc(self, record, repeat=None, warmup=2):
        return gpu_time(record, warmup=warmup, repeat=repeat or self.repeat)

    def ours(self, kernel, inputs, out, params=None, repeat=None):
        """wgcompute's launch: (GPU time of its dispatch, how, wall of a user's loop of
        run_kernel_async). Where this version exposes no Dispatch, the GPU time is the wall."""
        wgc = self.wgc
        wall = queued_wall(lambda: wgc.run_kernel_async(kernel, list(inputs), out, params),
                           count=10 if not self.small else 3)
        d = bound(kernel, inputs, out, params)
        if d is None:
            return wall, WALL, wall, None
        t, how = self.gpu(d.encode, repeat=repeat)
        return t, how, wall, d

    def raw_wall(self, record_pass):
        return queued_wall(raw_launcher(record_pass, self.dev),
                           count=10 if not self.small else 3)

    def add(self, case, impl, t, how, got=None, want=None, **kw):
        err = None if got is None or want is None else max_rel_err(got, want)
        self.res.add(case, impl, t, timing=how, max_rel_err=err, **kw)
        extra = "" if err is None else f"  err {err:.1e}"
        if kw.get("wall"):
            extra += f"  (user loop {kw['wall'] * 1e3:.3f} ms)"
        print(f"  {case:<34} {impl:<28} {t * 1e3:10.3f} ms  [{how}]{extra}", flush=True)

    def peer_rows(self, case, fns: dict, want=None, repeat=None, **kw):
        """fns: peer name -> (make() -> state, run(state) -> result tensor)."""
        for name, mod in self.peers.items():
            if name not in fns:
                continue
            make, run = fns[name]
            try:
                state = make(mod)
                t = cuda_time(mod, functools.partial(run, state), repeat=repeat or self.repeat)
                wall = peer_wall(mod, functools.partial(run, state))
                got = run(state)
                got = got.cpu().numpy() if name == "torch" else mod.asnumpy(got)
                self.add(case, f"{name} {mod.__version__}", t, CUDA_EVENT, got, want,
                         wall=wall, **kw)
            except Exception as e:  # a peer failing must not stop the suite
                print(f"  {case}: {name} failed: {e}", file=sys.stderr)

    def numpy_row(self, case, fn, repeat=None, **kw):
        t = wall_time(fn, warmup=1, repeat=repeat or max(2, self.repeat // 3))
        self.add(case, f"numpy {np.__version__} (CPU)", t, WALL, **kw)
        return fn()


class Skip(Exception):
    """A case this adapter cannot run as written (the reason is printed)."""


class Raw:
    """One compute pipeline written the obvious way with raw wgpu-py: layout="auto", one
    bind group, no vectorization, one element per invocation."""

    def __init__(self, dev, wgsl: str, buffers, grid, uniform: bytes | None = None):
        import wgpu

        limit = binding_limit()
        for b in buffers:
            if b.size > limit:
                raise Skip(f"binds a {b.size >> 20} MB buffer whole; this adapter binds at "
                           f"most {limit >> 20} MB")

        module = dev.create_shader_module(label="raw", code=wgsl)
        self.pipeline = dev.create_compute_pipeline(
            label="raw", layout="auto", compute={"module": module, "entry_point": "main"})
        entries = [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers)]
        if uniform is not None:
            ub = dev.create_buffer_with_data(label="raw-u", data=uniform,
                                             usage=wgpu.BufferUsage.UNIFORM)
            entries.append({"binding": len(buffers), "resource": {"buffer": ub}})
        self.bg = dev.create_bind_group(label="raw", entries=entries,
                                        layout=self.pipeline.get_bind_group_layout(0))
        self.grid = grid

    def encode(self, cpass):
        cpass.set_pipeline(self.pipeline)
        cpass.set_bind_group(0, self.bg)
        cpass.dispatch_workgroups(*self.grid)


def grid_1d(n: int, wg: int = 256):
    groups = max(1, math.ceil(n / wg))
    if groups <= 65535:
        return (groups, 1, 1)
    y = math.ceil(groups / 65535)
    return (math.ceil(groups / y), y, 1)


def raw_map(dev, expr: str, bufs, n: int):
    """out[i] = expr(a[i], b[i]) over a 2-D folded grid."""
    decl = "".join(f"@group(0) @binding({i}) var<storage, read> {nm}: array<f32>;\n"
                   for i, nm in enumerate("ab"[:len(bufs) - 1]))
    src = (decl + f"@group(0) @binding({len(bufs) - 1}) var<storage, read_write> "
           "out: array<f32>;\n"
           "@compute @workgroup_size(256)\n"
           "fn main(@builtin(global_invocation_id) g: vec3<u32>, "
           "@builtin(num_workgroups) nwg: vec3<u32>) {\n"
           "    let i = g.y * nwg.x * 256u + g.x;\n"
           f"    if (i < {n}u) {{ out[i] = {expr}; }}\n}}\n")
    return Raw(dev, src, bufs, grid_1d(n))


# -- cases ------------------------------------------------------------------------------------

def bench_elementwise(c: Ctx, n: int, ops=("add", "multiply", "relu"), sweep: bool = False):
    wgc = c.wgc

    rng = np.random.default_rng(0)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    A, B, o = wgc.from_numpy(a), wgc.from_numpy(b), wgc.empty(n, "f32")
    o2 = wgc.empty(n, "f32")
    for op in ops:
        case = ("sweep " if sweep else "") + f"{op} f32 {_count(n)}"
        binary = op != "relu"
        nbytes = (3 if binary else 2) * 4 * n
        kw = {"nbytes": nbytes, "size": n, "group": f"{op} f32" if sweep else ""}
        name = {"add": "elementwise_add", "multiply": "elementwise_multiply"}.get(op, op)
        t, how, wall, _d = c.ours(name, [A, B] if binary else [A], o)
        want = {"add": functools.partial(np.add, a, b),
                "multiply": functools.partial(np.multiply, a, b),
                "relu": functools.partial(np.maximum, a, 0)}[op]
        ref = want() if sweep else c.numpy_row(case, want, **kw)
        c.add(case, "wgcompute", t, how, o.to_numpy(), ref, wall=wall, **kw)
        expr = {"add": "a[i] + b[i]", "multiply": "a[i] * b[i]", "relu": "max(a[i], 0.0)"}[op]
        try:
            raw = raw_map(c.dev, expr, [A.gpu_buffer, B.gpu_buffer, o2.gpu_buffer] if binary
                          else [A.gpu_buffer, o2.gpu_buffer], n)
            t, how = c.gpu(raw.encode)
            c.add(case, "raw wgpu-py (scalar)", t, how, o2.to_numpy(), ref,
                  wall=c.raw_wall(raw.encode), **kw)
        except Skip as e:
            print(f"  {case}: raw wgpu-py skipped: {e}")
        tfn = {"add": lambda m, s: m.add(s[0], s[1], out=s[2]),
               "multiply": lambda m, s: m.mul(s[0], s[1], out=s[2]),
               "relu": lambda m, s: m.relu(s[0])}[op]
        cfn = {"add": lambda m, s: m.add(s[0], s[1], out=s[2]),
               "multiply": lambda m, s: m.multiply(s[0], s[1], out=s[2]),
               "relu": lambda m, s: m.maximum(s[0], 0, out=s[2])}[op]
        c.peer_rows(case, {
            "torch": (lambda m: (m.from_numpy(a).cuda(), m.from_numpy(b).cuda(),
                                 m.empty(n, device="cuda")),
                      functools.partial(_with, _torch, tfn)),
            "cupy": (lambda m: (m.asarray(a), m.asarray(b), m.empty(n, dtype=m.float32)),
                     functools.partial(_with, _cupy, cfn)),
        }, ref, **kw)
    for x in (A, B, o, o2):
        x.free()


def _with(module, fn, state):
    return fn(module(), state)


def _torch():
    import torch

    return torch


def _cupy():
    import cupy

    return cupy


def _count(n: int) -> str:
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def bench_reduce(c: Ctx, n: int, rows: int):
    wgc = c.wgc

    rng = np.random.default_rng(1)
    a = rng.standard_normal(n, dtype=np.float32)
    A = wgc.from_numpy(a)
    cols = n // rows
    A2 = wgc.from_numpy(a.reshape(rows, cols))
    for op, axis in (("sum", None), ("sum", -1), ("max", None), ("max", -1), ("argmax", -1)):
        x, arr = (A, a) if axis is None else (A2, a.reshape(rows, cols))
        case = f"{op} f32 {_count(n)}" + (" all" if axis is None else f" rows of {cols}")
        kw = {"nbytes": 4 * n}
        shape, dt = wgc.kernel_info(op).output_spec([x], {"axis": axis})
        out = wgc.empty(shape, dt)
        t, how, wall, _d = c.ours(op, [x], out, {"axis": axis})
        npfn = {"sum": functools.partial(np.sum, arr, axis=axis, dtype=np.float64),
                "max": functools.partial(np.max, arr, axis=axis),
                "argmax": functools.partial(np.argmax, arr, axis=axis)}[op]
        ref = c.numpy_row(case, npfn, **kw)
        c.add(case, "wgcompute", t, how, out.to_numpy(), ref, wall=wall, **kw)
        if op == "sum":
            try:
                raw, keep = _raw_sum(c, x, arr.shape, axis)
                t, how = c.gpu(raw)
                c.add(case, "raw wgpu-py (tree / row loop)", t, how, keep[-1].to_numpy().reshape(
                    np.shape(ref)) if axis is not None else keep[-1].to_numpy()[0], ref,
                    wall=c.raw_wall(raw), **kw)
            except Skip as e:
                print(f"  {case}: raw wgpu-py skipped: {e}")
        c.peer_rows(case, {
            "torch": (functools.partial(_to_torch, arr), functools.partial(_reduce_peer, op, axis)),
            "cupy": (functools.partial(_to_cupy, arr), functools.partial(_reduce_peer, op, axis)),
        }, ref, **kw)
        out.free()
    A.free()
    A2.free()


def _to_torch(arr, torch):
    return torch.from_numpy(arr).cuda()


def _to_cupy(arr, cupy):
    return cupy.asarray(arr)


def _reduce_peer(op, axis, s):
    """torch and cupy spell these alike, except torch's per-row max (amax)."""
    if axis is None:
        return getattr(s, op)()
    if op == "max" and hasattr(s, "amax"):
        return s.amax(-1)
    return getattr(s, op)(-1) if hasattr(s, "amax") else getattr(s, op)(axis=-1)


def _raw_sum(c: Ctx, x, shape, axis):
    """Obvious sums: rows -> one invocation loops over its row; everything -> a tree of
    256-to-1 workgroup reductions, one dispatch per level."""
    wgc = c.wgc
    if axis is not None:
        rows, cols = shape
        out = wgc.empty(rows, "f32")
        src = ("@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
               "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
               "@compute @workgroup_size(64)\n"
               "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
               f"    if (g.x >= {rows}u) {{ return; }}\n    var s = 0.0;\n"
               f"    for (var i = 0u; i < {cols}u; i = i + 1u) {{\n"
               f"        s = s + x[g.x * {cols}u + i];\n    }}\n"
               "    out[g.x] = s;\n}\n")
        raw = Raw(c.dev, src, [x.gpu_buffer, out.gpu_buffer], (math.ceil(rows / 64), 1, 1))
        return raw.encode, [out]
    stages, keep, src_buf, n = [], [], x, math.prod(shape)
    while True:
        groups = math.ceil(n / 256)
        out = wgc.empty(max(groups, 1), "f32")
        keep.append(out)
        src = ("@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
               "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
               "var<workgroup> s: array<f32, 256>;\n@compute @workgroup_size(256)\n"
               "fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(num_workgroups) nw: "
               "vec3<u32>, @builtin(local_invocation_index) l: u32) {\n"
               "    let wg = w.y * nw.x + w.x;\n    let i = wg * 256u + l;\n"
               f"    s[l] = select(0.0, x[min(i, {n - 1}u)], i < {n}u);\n"
               "    workgroupBarrier();\n"
               "    for (var h = 128u; h > 0u; h = h >> 1u) {\n"
               "        if (l < h) { s[l] = s[l] + s[l + h]; }\n        workgroupBarrier();\n"
               "    }\n    if (l == 0u) { out[wg] = s[0]; }\n}\n")
        stages.append(Raw(c.dev, src, [src_buf.gpu_buffer, out.gpu_buffer],
                          grid_1d(n)))
        if groups <= 1:
            break
        src_buf, n = out, groups

    def encode(cpass):
        for s in stages:
            s.encode(cpass)
    return encode, keep


def bench_softmax(c: Ctx, rows: int, cols: int):
    wgc = c.wgc

    rng = np.random.default_rng(2)
    a = rng.standard_normal((rows, cols), dtype=np.float32)
    X, o, o2 = wgc.from_numpy(a), wgc.empty((rows, cols)), wgc.empty((rows, cols))
    case = f"softmax f32 {rows}x{cols}"
    kw = {"nbytes": 2 * 4 * a.size}

    def npsoft():
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    ref = c.numpy_row(case, npsoft, **kw)
    t, how, wall, _d = c.ours("softmax", [X], o, {"axis": -1})
    c.add(case, "wgcompute", t, how, o.to_numpy(), ref, wall=wall, **kw)
    src = ("@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
           "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
           "@compute @workgroup_size(64)\n"
           "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
           f"    if (g.x >= {rows}u) {{ return; }}\n    let b = g.x * {cols}u;\n"
           "    var m = x[b];\n"
           f"    for (var i = 1u; i < {cols}u; i = i + 1u) {{ m = max(m, x[b + i]); }}\n"
           "    var s = 0.0;\n"
           f"    for (var i = 0u; i < {cols}u; i = i + 1u) {{ s = s + exp(x[b + i] - m); }}\n"
           f"    for (var i = 0u; i < {cols}u; i = i + 1u) {{\n"
           "        out[b + i] = exp(x[b + i] - m) / s;\n    }\n"
           "}\n")
    try:
        raw = Raw(c.dev, src, [X.gpu_buffer, o2.gpu_buffer], (math.ceil(rows / 64), 1, 1))
        t, how = c.gpu(raw.encode)
        c.add(case, "raw wgpu-py (row per invocation)", t, how, o2.to_numpy(), ref,
              wall=c.raw_wall(raw.encode), **kw)
    except Skip as e:
        print(f"  {case}: raw wgpu-py skipped: {e}")

    def cupy_soft(s):
        import cupyx.scipy.special as sp

        return sp.softmax(s, axis=-1)

    c.peer_rows(case, {
        "torch": (lambda m: m.from_numpy(a).cuda(), lambda s: _torch().softmax(s, -1)),
        "cupy": (lambda m: m.asarray(a), cupy_soft)}, ref, **kw)
    for x in (X, o, o2):
        x.free()


def bench_matmul(c: Ctx, m: int, n: int, k: int, dt: str = "f32", sweep: bool = False,
                 numpy_repeat: int = 2):
    wgc = c.wgc

    npd = np.float16 if dt == "f16" else np.float32
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (m, k)).astype(npd)
    b = rng.uniform(-1, 1, (k, n)).astype(npd)
    A, B, o = wgc.from_numpy(a), wgc.from_numpy(b), wgc.empty((m, n), dt)
    case = ("sweep " if sweep else "") + f"matmul {dt} {m}x{n}x{k}"
    kw = {"flops": 2.0 * m * n * k, "size": float(m) * n * k,
          "group": f"matmul {dt} square" if sweep else ""}
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if sweep:
        ref = a32 @ b32
    else:
        ref = c.numpy_row(case, lambda: a32 @ b32, repeat=numpy_repeat, **kw)
    t0 = time.perf_counter()
    wgc.run_kernel("matmul", [A, B], o)  # tunes the tile config on first use (real GPUs)
    setup = time.perf_counter() - t0
    t, how, wall, d = c.ours("matmul", [A, B], o, repeat=max(3, c.repeat // 2))
    try:
        cfg = dict(d.compiled.key.constants)["config"]
    except (AttributeError, KeyError, TypeError):
        cfg = "?"
    c.add(case, "wgcompute", t, how, o.to_numpy(), ref, note=f"tile {cfg}", wall=wall, **kw)
    if setup > 0.5:
        print(f"    (bind + autotune took {setup:.1f} s)")
    if not sweep:
        T = "f16" if dt == "f16" else "f32"
        src = (("enable f16;\n" if dt == "f16" else "")
               + f"@group(0) @binding(0) var<storage, read> a: array<{T}>;\n"
               f"@group(0) @binding(1) var<storage, read> b: array<{T}>;\n"
               f"@group(0) @binding(2) var<storage, read_write> out: array<{T}>;\n"
               "@compute @workgroup_size(16, 16)\n"
               "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
               f"    if (g.x >= {n}u || g.y >= {m}u) {{ return; }}\n    var s = 0.0;\n"
               f"    for (var i = 0u; i < {k}u; i = i + 1u) {{\n"
               f"        s = s + f32(a[g.y * {k}u + i]) * f32(b[i * {n}u + g.x]);\n    }}\n"
               f"    out[g.y * {n}u + g.x] = {T}(s);\n}}\n")
        o2 = wgc.empty((m, n), dt)
        try:
            raw = Raw(c.dev, src, [A.gpu_buffer, B.gpu_buffer, o2.gpu_buffer],
                      (math.ceil(n / 16), math.ceil(m / 16), 1))
            t, how = c.gpu(raw.encode, repeat=3, warmup=1)
            c.add(case, "raw wgpu-py (naive)", t, how, o2.to_numpy(), ref, **kw)
        except Skip as e:
            print(f"  {case}: raw wgpu-py skipped: {e}")
        o2.free()
    tdt = "float16" if dt == "f16" else "float32"
    c.peer_rows(case, {
        "torch": (lambda mod: (mod.from_numpy(a).cuda(), mod.from_numpy(b).cuda(),
                               mod.empty((m, n), device="cuda", dtype=getattr(mod, tdt))),
                  lambda s: _torch().matmul(s[0], s[1], out=s[2])),
        "cupy": (lambda mod: (mod.asarray(a), mod.asarray(b)),
                 lambda s: _cupy().matmul(s[0], s[1])),
    }, ref, repeat=max(3, c.repeat // 2), **kw)
    for x in (A, B, o):
        x.free()


def bench_copy(c: Ctx, r: int, cols: int):
    wgc = c.wgc

    rng = np.random.default_rng(4)
    a = rng.standard_normal((r, cols), dtype=np.float32)
    A, o, ot, o2 = (wgc.from_numpy(a), wgc.empty((r, cols)), wgc.empty((cols, r)),
                    wgc.empty((r, cols)))
    nb = a.nbytes
    # copy: what a copy_buffer op records (the "copy" kernel from 1 MiB on), and the
    # encoder's copy_buffer_to_buffer for comparison
    case = f"copy f32 {r}x{cols}"
    kw = {"nbytes": 2 * nb}
    c.numpy_row(case, lambda: np.copyto(np.empty_like(a), a), **kw)
    wall = queued_wall(lambda: wgc.submit({"op": "copy_buffer", "inputs": [A], "output": o}),
                       count=10 if not c.small else 3)
    try:  # GPU time of what the copy_buffer op records, where this version exposes it
        from wgcompute.commands import copy_dispatch, encode_copy

        d = copy_dispatch(A, o)
        t, how = c.gpu_enc(lambda enc: encode_copy(enc, A, o, d))
    except (ImportError, TypeError):
        t, how = wall, WALL
    c.add(case, "wgcompute", t, how, o.to_numpy(), a, note="copy_buffer op", wall=wall, **kw)
    o3 = wgc.empty((r, cols))
    t, how = c.gpu_enc(lambda enc: enc.copy_buffer_to_buffer(A.gpu_buffer, 0, o3.gpu_buffer,
                                                              0, nb))
    c.add(case, "wgpu encoder copy_buffer_to_buffer", t, how, o3.to_numpy(), a, **kw)
    try:
        raw = raw_map(c.dev, "a[i]", [A.gpu_buffer, o2.gpu_buffer], a.size)
        t, how = c.gpu(raw.encode)
        c.add(case, "raw wgpu-py (shader copy)", t, how, o2.to_numpy(), a,
              wall=c.raw_wall(raw.encode), **kw)
    except Skip as e:
        print(f"  {case}: raw wgpu-py skipped: {e}")
    c.peer_rows(case, {
        "torch": (lambda m: (m.from_numpy(a).cuda(), m.empty((r, cols), device="cuda")),
                  lambda s: s[1].copy_(s[0])),
        "cupy": (lambda m: (m.asarray(a), m.empty((r, cols), dtype=m.float32)),
                 lambda s: (_cupy().copyto(s[1], s[0]), s[1])[1])}, a, **kw)

    case = f"transpose f32 {r}x{cols}"
    want = np.ascontiguousarray(a.T)
    c.numpy_row(case, lambda: np.ascontiguousarray(a.T), **kw)
    t, how, wall, _d = c.ours("transpose", [A], ot)
    c.add(case, "wgcompute", t, how, ot.to_numpy(), want, wall=wall, **kw)
    src = ("@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
           "@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n"
           "@compute @workgroup_size(16, 16)\n"
           "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
           f"    if (g.x >= {cols}u || g.y >= {r}u) {{ return; }}\n"
           f"    out[g.x * {r}u + g.y] = a[g.y * {cols}u + g.x];\n}}\n")
    ot2 = wgc.empty((cols, r))
    try:
        raw = Raw(c.dev, src, [A.gpu_buffer, ot2.gpu_buffer],
                  (math.ceil(cols / 16), math.ceil(r / 16), 1))
        t, how = c.gpu(raw.encode)
        c.add(case, "raw wgpu-py (naive)", t, how, ot2.to_numpy(), want,
              wall=c.raw_wall(raw.encode), **kw)
    except Skip as e:
        print(f"  {case}: raw wgpu-py skipped: {e}")
    c.peer_rows(case, {
        "torch": (lambda m: (m.from_numpy(a).cuda(), m.empty((cols, r), device="cuda")),
                  lambda s: s[1].copy_(s[0].t())),
        "cupy": (lambda m: (m.asarray(a), m.empty((cols, r), dtype=m.float32)),
                 lambda s: (_cupy().copyto(s[1], s[0].T), s[1])[1])}, want, **kw)

    case = f"fill f32 {r}x{cols}"
    kw = {"nbytes": nb}
    full = np.full((r, cols), 1.5, np.float32)
    c.numpy_row(case, lambda: np.full((r, cols), 1.5, np.float32), **kw)
    t, how, wall, _d = c.ours("fill", [], o, {"value": 1.5})
    c.add(case, "wgcompute", t, how, o.to_numpy(), full, wall=wall, **kw)
    try:
        raw = Raw(c.dev, "@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n"
                  "@compute @workgroup_size(256)\n"
                  "fn main(@builtin(global_invocation_id) g: vec3<u32>, "
                  "@builtin(num_workgroups) nwg: vec3<u32>) {\n"
                  "    let i = g.y * nwg.x * 256u + g.x;\n"
                  f"    if (i < {a.size}u) {{ out[i] = 1.5; }}\n}}\n", [o2.gpu_buffer],
                  grid_1d(a.size))
        t, how = c.gpu(raw.encode)
        c.add(case, "raw wgpu-py (scalar)", t, how, o2.to_numpy(), full,
              wall=c.raw_wall(raw.encode), **kw)
    except Skip as e:
        print(f"  {case}: raw wgpu-py skipped: {e}")
    c.peer_rows(case, {
        "torch": (lambda m: m.empty((r, cols), device="cuda"), lambda s: s.fill_(1.5)),
        "cupy": (lambda m: m.empty((r, cols), dtype=m.float32),
                 lambda s: (s.fill(1.5), s)[1])}, full, **kw)
    for x in (A, o, o3, ot, o2, ot2):
        x.free()


def run(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench_kernels", description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="small sizes (CPU adapters, CI)")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(GROUPS)}")
    p.add_argument("--json", default="", help="write the results as JSON here")
    p.add_argument("--png", default="", help="write the plot here (default: next to --json)")
    p.add_argument("--repeat", type=int, default=0, help="timed repetitions (median)")
    p.add_argument("--plot-from", default="", metavar="JSON",
                   help="only draw --png from an earlier run's JSON (no GPU work)")
    args = p.parse_args(argv)
    if args.plot_from:
        png = args.png or os.path.splitext(args.plot_from)[0] + ".png"
        ok = Results.load(args.plot_from).plot(png)
        print(f"PNG: {png}" if ok else "PNG: matplotlib not installed")
        return 0 if ok else 1
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in GROUPS]
    if bad:
        p.error(f"--only: unknown {', '.join(bad)}; expected {', '.join(GROUPS)}")
    want = set(only or GROUPS)
    small = args.small
    c = Ctx(small, args.repeat or (5 if small else 10))
    env = env_info()
    print(f"device: {env['device']} ({env['backend']}, {env['driver']}); peers: "
          f"{', '.join(env['peers']) or 'none'}; timing: "
          f"{'timestamps' if 'timestamp-query' in env['features'] else 'wall'}", flush=True)
    limit = binding_limit()

    def fit(count: int) -> int:  # elements of one f32 buffer one binding can hold
        while 4 * count > limit:
            count //= 2
        return count

    n = fit(1 << 20 if small else 1 << 26)
    soft = (256, 1024) if small else (fit(16384 * 4096) // 4096, 4096)
    side = 512 if small else 8192
    while 4 * side * side > limit:
        side //= 2
    if (n, soft[0], side) != ((1 << 20, 256, 512) if small else (1 << 26, 16384, 8192)):
        print(f"sizes fitted to this adapter's {limit >> 20} MB storage-binding limit: "
              f"{_count(n)} elements, softmax {soft[0]}x{soft[1]}, copies {side}x{side}")

    def group(name, fn, *a, **kw):
        try:
            fn(*a, **kw)
        except WgComputeError as e:  # what a limit of this adapter refuses: say so, go on
            print(f"  {name}: skipped on this adapter: {e}", flush=True)

    if "elementwise" in want:
        group("elementwise", bench_elementwise, c, n)
    if "reduce" in want:
        group("reduce", bench_reduce, c, n, 256 if small else 4096)
    if "softmax" in want:
        group("softmax", bench_softmax, c, *soft)
    if "matmul" in want:
        shapes = ([(256, 256, 256), (256, 256, 512), (512, 16, 512)] if small else
                  [(4096, 4096, 4096), (4096, 4096, 8192), (8192, 64, 8192)])
        for s_ in shapes:
            group(f"matmul {s_}", bench_matmul, c, *s_)
        if c.wgc.DTYPES["f16"].feature in env["features"]:
            group("matmul f16", bench_matmul, c, *shapes[0], dt="f16")
    if "copy" in want:
        group("copy", bench_copy, c, side, side)
    if "sweep" in want:
        sizes = [1 << 16, 1 << 18, 1 << 20] if small else [1 << 20, 1 << 22, 1 << 24, 1 << 26]
        for s_ in sizes:
            if 4 * s_ <= limit:
                group("sweep add", bench_elementwise, c, s_, ops=("add",), sweep=True)
        for s_ in ([64, 128, 256] if small else [512, 1024, 2048, 4096]):
            group("sweep matmul", bench_matmul, c, s_, s_, s_, sweep=True)
    print()
    print(c.res.markdown())
    if args.json:
        c.res.write_json(args.json)
        print(f"\nJSON: {args.json}")
    png = args.png or (os.path.splitext(args.json)[0] + ".png" if args.json else "")
    if png:
        print(f"PNG: {png}" if c.res.plot(png) else "PNG: matplotlib not installed, skipped")
    return 0


if __name__ == "__main__":
    sys.exit(run())
