"""The matmul kernel: 2-D block tiling with register blocking, vec4 loads and double-buffered
workgroup tiles; tile configurations per adapter chosen by the autotuner (autotune.py).

f16 inputs accumulate in f32. The place where a cooperative-matrix (tensor core) kernel would
plug in is ``_cooperative_matrix_config`` (it returns None today: see its docstring)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .. import autotune, shaders
from ..device import Device, get_device
from ..dtypes import DTYPES
from ..errors import ArgumentError, DtypeError, ShapeError
from .base import Kernel, Launch, PipelineKey, fold_grid

FLOATS = ("f32", "f64", "f16")


@dataclass(frozen=True)
class TileConfig:
    """BM×BN block of out per workgroup, BK k step, TM×TN block per invocation."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    split: int = 1  # split-K factor (f32 only): k ranges summed into out by compare-and-swap

    @property
    def name(self) -> str:
        base = f"{self.bm}x{self.bn}x{self.bk}_{self.tm}x{self.tn}"
        return base + (f"_s{self.split}" if self.split > 1 else "")

    @classmethod
    def parse(cls, name: str) -> TileConfig:
        blocks, thread, *rest = name.split("_")
        bm, bn, bk = (int(v) for v in blocks.split("x"))
        tm, tn = (int(v) for v in thread.split("x"))
        split = int(rest[0][1:]) if rest else 1
        return cls(bm, bn, bk, tm, tn, split)

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def workgroup_bytes(self, acc_bytes: int) -> int:
        return 2 * self.bk * (self.bm + self.bn) * acc_bytes  # two a tiles + two b tiles

    def fits(self, device: Device, acc_bytes: int) -> bool:
        t = self.threads
        shape_ok = (self.bm % self.tm == 0 and self.bn % self.tn == 0 and self.tm % 4 == 0
                    and self.tn % 4 == 0 and self.bk % 4 == 0
                    and (self.bm * self.bk) % (4 * t) == 0 and (self.bk * self.bn) % (4 * t) == 0)
        return (shape_ok
                and t <= device.limit("max-compute-invocations-per-workgroup")
                and t <= device.limit("max-compute-workgroup-size-x")
                and self.workgroup_bytes(acc_bytes)
                <= device.limit("max-compute-workgroup-storage-size"))


# Candidates, best guesses first. 128×128 with 8×8 per invocation is the classic big-matrix
# tile; the smaller ones keep enough workgroups busy for skinny or small outputs.
CANDIDATES = (
    TileConfig(128, 128, 8, 8, 8),
    TileConfig(128, 128, 16, 8, 8),
    TileConfig(128, 64, 16, 8, 4),
    TileConfig(64, 128, 16, 4, 8),
    TileConfig(64, 64, 16, 4, 4),
    TileConfig(32, 64, 16, 4, 4),
    TileConfig(32, 32, 16, 4, 4),
    TileConfig(32, 64, 16, 4, 4, split=8),
    TileConfig(64, 64, 16, 4, 4, split=4),
)
_DEFAULTS = {"large": "128x128x8_8x8", "skinny": "32x64x16_4x4", "small": "64x64x16_4x4"}
# The problem each class is tuned on (M, N, K): big enough to rank configs, quick to run.
_TUNE_SHAPES = {"large": (2048, 2048, 2048), "skinny": (4096, 64, 4096),
                "small": (256, 256, 256)}


def problem_class(m: int, n: int, k: int) -> str:
    if min(m, n) >= 1024:
        return "large"
    if max(m, n) >= 1024 and min(m, n) <= 256:
        return "skinny"
    return "small"


def _cooperative_matrix_config(device: Device, dtype: str):
    """Where a cooperative-matrix (tensor core) matmul would plug in: return its kernel
    config when the device has enabled "cooperative-matrix" for this dtype.

    Today it always returns None: wgpu 0.32 (wgpu-native 29) refuses to enable the
    experimental feature and supports only 8×8 f32 tiles, so no adapter reaches here with
    it enabled. A future kernel lives in shaders/matmul_coop.wgsl and is chosen here."""
    if "cooperative-matrix" not in device.features:
        return None
    return None


def cooperative_matrix_listed() -> bool:
    """True if the adapter lists cooperative-matrix (even though it cannot be enabled)."""
    return "cooperative-matrix" in set(get_device().adapter.features)


class Matmul(Kernel):
    name = "matmul"
    inputs = ("a", "b")
    dtypes = FLOATS
    description = ("out (M×N) = a (M×K) · b (K×N), 2-D row-major, any sizes; f16 accumulates "
                   "in f32")

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        for nm, x in (("a", a), ("b", b), ("out", output)):
            if x.ndim != 2:
                raise ShapeError(f"matmul: {nm} must be 2-D, got shape {x.shape}")
            if x.dtype != output.dtype:
                raise DtypeError(f"matmul: {nm} is {x.dtype}, out is {output.dtype}; "
                                 f"dtypes must match")
        if a.shape[1] != b.shape[0]:
            raise ShapeError(f"matmul: a is {a.shape} and b is {b.shape}; inner dimensions "
                             f"{a.shape[1]} and {b.shape[0]} differ")
        want = (a.shape[0], b.shape[1])
        if output.shape != want:
            raise ShapeError(f"matmul: out is {output.shape}, expected {want} for a {a.shape} "
                             f"· b {b.shape}")
        limit = get_device().limit("max-storage-buffer-binding-size")
        for nm, x in (("a", a), ("b", b), ("out", output)):
            if x.nbytes > limit:
                raise ShapeError(f"matmul: {nm} {x.shape} is {x.nbytes} bytes; this adapter "
                                 f"binds at most {limit} bytes per buffer")

    def output_spec(self, inputs, params):
        a, b = inputs
        if a.ndim != 2 or b.ndim != 2:
            raise ShapeError(f"matmul: a and b must be 2-D, got {a.shape} and {b.shape}")
        return (a.shape[0], b.shape[1]), a.dtype

    def resolve_params(self, params, dt):
        # "_config" (a TileConfig) pins the tile configuration: for the autotuner and tests
        params = dict(params or {}) if isinstance(params, dict) or params is None else params
        cfg = params.pop("_config", None) if isinstance(params, dict) else None
        out = super().resolve_params(params, dt)
        if cfg is not None:
            if not isinstance(cfg, TileConfig):
                raise ArgumentError(f"matmul: param '_config' must be a TileConfig, got "
                                    f"{type(cfg).__name__}")
            if not cfg.fits(get_device(), 8 if dt.name == "f64" else 4):
                raise ArgumentError(f"matmul: tile config {cfg.name} does not fit this "
                                    f"adapter's limits")
            if cfg.split > 1 and dt.name != "f32":
                raise ArgumentError(f"matmul: split-K config {cfg.name} needs f32 (its "
                                    f"partial sums meet by 32-bit compare-and-swap)")
            out["_config"] = cfg
        return out

    # -- configuration ---------------------------------------------------------------------
    @staticmethod
    def candidates(dtype: str, device: Device) -> list[TileConfig]:
        acc = 8 if dtype == "f64" else 4
        return [c for c in CANDIDATES if c.fits(device, acc) and (c.split == 1 or dtype == "f32")]

    def config_for(self, m: int, n: int, k: int, dtype: str) -> TileConfig:
        device = get_device()
        coop = _cooperative_matrix_config(device, dtype)
        if coop is not None:  # pragma: no cover - no adapter can enable it with wgpu 0.32
            return coop
        fits = self.candidates(dtype, device)
        if not fits:
            raise ShapeError(f"matmul: no tile configuration fits this adapter's limits "
                             f"({device.name})")
        names = [c.name for c in fits]
        cls = problem_class(m, n, k)
        problem = f"matmul {dtype} {cls}"
        chosen = autotune.choose(problem, names, _DEFAULTS[cls],
                                 lambda name: _measure(self, TileConfig.parse(name), dtype, cls))
        return TileConfig.parse(chosen)

    def key(self, inputs, output, params) -> PipelineKey:
        a, b = inputs
        m, k = a.shape
        n = b.shape[1]
        cfg = params.get("_config") if isinstance(params, dict) else None
        cfg = cfg or self.config_for(m, n, k, output.dtype)
        # K = 0 leaves a and b empty: their 16-byte allocations are shorter than one vec4<f64>
        return PipelineKey(self.name, (output.dtype,),
                           (("config", cfg.name), ("vec_a", k > 0 and k % 4 == 0),
                            ("vec_b", k > 0 and n % 4 == 0)))

    def render(self, key):
        consts = dict(key.constants)
        return render_tiled(TileConfig.parse(consts["config"]), DTYPES[key.dtypes[0]].wgsl,
                            consts["vec_a"], consts["vec_b"])

    def launches(self, inputs, output, params, device):
        a, b = inputs
        m, k = a.shape
        n = b.shape[1]
        if m == 0 or n == 0:
            return []
        cfg = TileConfig.parse(dict(self.key(inputs, output, params).constants)["config"])
        limit = device.limit("max-compute-workgroups-per-dimension")
        gx, gy = math.ceil(n / cfg.bn), math.ceil(m / cfg.bm)
        if gx > limit or gy > limit:
            raise ShapeError(f"matmul: output {output.shape} needs a {gy}×{gx} grid; this "
                             f"adapter allows {limit} per dimension")
        if cfg.split == 1:
            return [Launch((gx, gy, 1), {"M": m, "N": n, "K": k, "phase": 1, "kchunk": k})]
        per_split = -(-k // cfg.split)  # ceil: each z slice's share of K, in whole BK steps
        kchunk = max(cfg.bk, -(-per_split // cfg.bk) * cfg.bk)
        zero = fold_grid(-(-(m * n) // cfg.threads), device, self.name)
        return [Launch(zero, {"M": m, "N": n, "K": k, "phase": 0, "kchunk": kchunk}),
                Launch((gx, gy, max(1, -(-k // kchunk))),
                       {"M": m, "N": n, "K": k, "phase": 1, "kchunk": kchunk})]


def render_tiled(cfg: TileConfig, t: str, vec_a: bool, vec_b: bool):
    """WGSL for one tile configuration (straight-line register code generated here)."""
    acc = "f32" if t == "f16" else t
    v = f"vec4<{acc}>"
    threads = cfg.threads
    la = cfg.bm * cfg.bk // (4 * threads)  # vec4 loads of a per invocation per k step
    lb = cfg.bk * cfg.bn // (4 * threads)
    decl, load, store, compute, write = [], [], [], [], []
    for i in range(la):
        decl.append(f"var ra{i}: {v};")
        # a tile is BM rows × BK/4 vec4; invocation lid takes vec4 number lid + i·THREADS
        load.append(f"{{ let q = lid + {i * threads}u; let r = row0 + q / {cfg.bk // 4}u; "
                    f"let kk = k0 + (q % {cfg.bk // 4}u) * 4u;")
        if vec_a:  # K % 4 == 0: a vec4 is entirely inside or entirely outside a row
            load.append(f"  if (r < p.M && kk < kend) {{ ra{i} = {v}(a[(r * p.K + kk) / 4u]); }}"
                        f" else {{ ra{i} = {v}(0); }} }}")
        else:
            load.append(f"  ra{i} = {v}(load_a(r, kk, kend), load_a(r, kk + 1u, kend), "
                        f"load_a(r, kk + 2u, kend), load_a(r, kk + 3u, kend)); }}")
        store.append(f"{{ let q = lid + {i * threads}u; let r = q / {cfg.bk // 4}u; "
                     f"let kk = (q % {cfg.bk // 4}u) * 4u;")
        for c in range(4):  # transpose: As[k][m] so the k loop reads rows of m as vec4
            store.append(f"  As[buf * ASZ + (kk + {c}u) * {cfg.bm // 4}u + r / 4u][r % 4u] = "
                         f"ra{i}[{c}];")
        store.append("}")
    for i in range(lb):
        decl.append(f"var rb{i}: {v};")
        load.append(f"{{ let q = lid + {i * threads}u; let kr = k0 + q / {cfg.bn // 4}u; "
                    f"let c = col0 + (q % {cfg.bn // 4}u) * 4u;")
        if vec_b:
            load.append(f"  if (kr < kend && c < p.N) {{ rb{i} = {v}(b[(kr * p.N + c) / 4u]); }}"
                        f" else {{ rb{i} = {v}(0); }} }}")
        else:
            load.append(f"  rb{i} = {v}(load_b(kr, c, kend), load_b(kr, c + 1u, kend), "
                        f"load_b(kr, c + 2u, kend), load_b(kr, c + 3u, kend)); }}")
        store.append(f"Bs[buf * BSZ + lid + {i * threads}u] = rb{i};")
    ta, tb = cfg.tm // 4, cfg.tn // 4
    sa, sb = cfg.bm // cfg.tm, cfg.bn // cfg.tn  # vec4 stride between an invocation's blocks
    for i in range(ta):
        compute.append(f"let a{i} = As[abase + kk * {cfg.bm // 4}u + ty + {i * sa}u];")
    for j in range(tb):
        compute.append(f"let b{j} = Bs[bbase + kk * {cfg.bn // 4}u + tx + {j * sb}u];")
    for i in range(cfg.tm):
        for j in range(tb):
            decl.append(f"var c{i}_{j} = {v}(0);")
            compute.append(f"c{i}_{j} = fma({v}(a{i // 4}[{i % 4}]), b{j}, c{i}_{j});")
    for i in range(cfg.tm):
        # row of accumulator i: vec4 block i//4 (stride BM/TM vec4 = 4·sa rows), lane i%4
        write.append(f"{{ let r = row0 + (ty + {(i // 4) * sa}u) * 4u + {i % 4}u;")
        write.append("  if (r < p.M) {")
        for j in range(tb):
            write.append(f"    {{ let c = col0 + (tx + {j * sb}u) * 4u;")
            if cfg.split > 1:
                for lane in range(4):
                    write.append(f"      if (c + {lane}u < p.N) {{ add_out(r * p.N + c + {lane}u, "
                                 f"c{i}_{j}[{lane}]); }}")
                write.append("    }")
            elif vec_b:
                write.append(f"      if (c < p.N) {{ out[(r * p.N + c) / 4u] = "
                             f"vec4<{t}>(c{i}_{j}); }} }}")
            else:
                for lane in range(4):
                    write.append(f"      if (c + {lane}u < p.N) {{ out[r * p.N + c + {lane}u] = "
                                 f"{t}(c{i}_{j}[{lane}]); }}")
                write.append("    }")
        write.append("  }")
        write.append("}")
    helpers = []
    if not vec_a:
        helpers.append(f"fn load_a(r: u32, k: u32, kend: u32) -> {acc} {{\n"
                       f"    if (r < p.M && k < kend) {{\n"
                       f"        return {acc}(a[r * p.K + k]);\n    }}\n    return {acc}(0);\n}}\n")
    if not vec_b:
        helpers.append(f"fn load_b(k: u32, c: u32, kend: u32) -> {acc} {{\n"
                       f"    if (k < kend && c < p.N) {{\n"
                       f"        return {acc}(b[k * p.N + c]);\n    }}\n    return {acc}(0);\n}}\n")
    phase0 = ""
    if cfg.split > 1:
        helpers.append("fn add_out(i: u32, v: f32) {\n    var old = atomicLoad(&out[i]);\n"
                       "    loop {\n        let res = atomicCompareExchangeWeak(&out[i], old, "
                       "bitcast<u32>(bitcast<f32>(old) + v));\n"
                       "        if (res.exchanged) {\n            break;\n        }\n"
                       "        old = res.old_value;\n    }\n}\n")
        phase0 = (f"if (p.phase == 0u) {{\n        let i = (wid.y * nwg.x + wid.x) * {threads}u + "
                  "lid;\n        if (i < p.M * p.N) {\n            atomicStore(&out[i], 0u);\n"
                  "        }\n        return;\n    }")
    ind = "\n        "
    src = shaders.render(shaders.load("matmul_tiled.wgsl"), {
        "ENABLE": shaders.enable_directives([t]), "T": t, "ACC": acc,
        "AT": f"vec4<{t}>" if vec_a else t, "BT": f"vec4<{t}>" if vec_b else t,
        "OT": "atomic<u32>" if cfg.split > 1 else (f"vec4<{t}>" if vec_b else t),
        "PHASE0": phase0,
        "BM": cfg.bm, "BN": cfg.bn, "BK": cfg.bk, "TM": cfg.tm, "TN": cfg.tn,
        "THREADS": threads, "HELPERS": "\n".join(helpers), "DECLARE": "\n    ".join(decl),
        "LOAD": ind.join(load),
        "STORE": ind.join(store), "COMPUTE": "\n                ".join(compute),
        "WRITE": "\n    ".join(write)})
    return src, (("M", "u32"), ("N", "u32"), ("K", "u32"), ("phase", "u32"), ("kchunk", "u32"))


def _measure(kernel: Matmul, cfg: TileConfig, dtype: str, cls: str) -> float:
    """Seconds of one matmul of the class's tuning shape with ``cfg`` (median of 3 after a
    warm-up; GPU wall time of submit + wait, with several matmuls in one pass)."""
    import numpy as np

    from .. import _queue
    from ..buffer import empty
    from .base import bind

    m, n, k = _TUNE_SHAPES[cls]
    a, b, out = empty((m, k), dtype, "autotune-a"), empty((k, n), dtype, "autotune-b"), \
        empty((m, n), dtype, "autotune-out")
    try:
        d = bind(kernel, [a, b], out, {"_config": cfg})
        dev = get_device().gpu_device
        times = []
        for rep in range(4):
            enc = dev.create_command_encoder(label=f"autotune {cfg.name}")
            cpass = enc.begin_compute_pass(label=f"autotune {cfg.name}")
            for _ in range(3):
                d.encode(cpass)
            cpass.end()
            t0 = time.perf_counter()
            _queue.wait(_queue.submit([enc.finish()]))
            if rep:
                times.append((time.perf_counter() - t0) / 3)
        return float(np.median(times))
    finally:
        for x in (a, b, out):
            x.free()
