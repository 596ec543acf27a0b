"""The matmul kernel: 2-D block tiling with register blocking, vec4 loads and workgroup tiles
(double-buffered, or single with two barriers); tile configurations per adapter chosen by the
tuner (core/tuning.py, before binding). ``_config`` pins one (tests, benchmarks/sweep_matmul.py).

f16 inputs have two precisions (the ``precision`` param): "f32" converts to f32 on the way
into workgroup memory and accumulates every product in f32; "mixed" keeps f16 tiles and sums
each BK-wide k slice in f16 (packed f16 multiply-adds, twice the FP32 rate on NVIDIA) before
adding the slice into f32 accumulators. The error bound of each is in Matmul's docstring.

Split-K configurations (skinny outputs) add each k slice's block into an f32 output by
32-bit compare-and-swap; an f16 product at precision "f32" does that into an f32 temporary,
which a second step in the same compute pass converts to f16 (``Matmul.passes``).

The place where a cooperative-matrix (tensor core) kernel would plug in is
``_cooperative_matrix_config`` (it returns None today: see its docstring)."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ...runtime import Device
from ..core import shaders, tuning
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import (
    MAX_DIMS,
    broadcast_shapes,
    broadcast_strides,
    coalesce,
    contiguous_strides,
    index_wgsl,
    uniform_fields,
    uniform_values,
)
from ..core.tuning import TuneProblem

FLOATS = ("f32", "f64", "f16")
PRECISIONS = ("f32", "mixed")
# f16 with no precision param. "mixed" is the fast path; the default stays "f32" (every
# product summed in f32) because tests/test_kernels_core.py holds wgc.matmul's f16 results to
# the f32-accumulation bound; flip this once that bound is the mixed one (Matmul docstring).
F16_DEFAULT_PRECISION = "f32"
MIXED_BK = (8, 16)  # "mixed" sums BK products in f16: kept short, the error grows with BK


@dataclass(frozen=True)
class TileConfig:
    """BM×BN block of out per workgroup, BK k step, TM×TN block per invocation, and options:

    split: split-K factor (f32, and f16 at precision "f32" through an f32 temporary): k
      ranges summed into out by compare-and-swap.
    unroll: the BK-long k loop generated straight-line (constant workgroup offsets).
    stages: 2 = double-buffered workgroup tiles, one barrier per k step; 1 = one tile of a
      and b (half the memory: a bigger BK, or more workgroups per SM), two barriers.
    group: grouped rasterization: workgroups walk GROUP block rows column by column, so
      neighbours in launch order share b's columns in L2 (1 = row by row).
    warp: invocations laid out in 8×4 blocks of 32 (one NVIDIA warp each) instead of rows of
      BN/TN: a warp then reads 8 a vectors and 16 b vectors of workgroup memory per k instead
      of 4 and 32 (fewer bytes through shared memory for the same FMAs).
    early: (stages 2) the next tile is stored into the other workgroup buffer as soon as it is
      loaded, before this tile's multiply-adds, so the load registers are not live across
      them (fewer registers per invocation; the load's latency is then covered by other
      workgroups instead of by this one's arithmetic).

    Its name, e.g. "128x128x16_8x8_u_sb_g8_s4" (options omitted at their defaults), is what
    the autotuner caches; ``parse(name)`` gives the config back."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    split: int = 1
    unroll: bool = False
    stages: int = 2
    group: int = 1
    warp: bool = False
    early: bool = False

    def __post_init__(self):
        for field in ("bm", "bn", "bk", "tm", "tn", "split", "group"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ArgumentError(f"matmul: TileConfig {field} must be a positive int, got "
                                    f"{value!r}")
        if self.stages not in (1, 2) or isinstance(self.stages, bool):
            raise ArgumentError(f"matmul: TileConfig stages must be 1 or 2, got {self.stages!r}")
        for field in ("unroll", "warp", "early"):
            if not isinstance(getattr(self, field), bool):
                raise ArgumentError(f"matmul: TileConfig {field} must be a bool, got "
                                    f"{getattr(self, field)!r}")
        if self.early and self.stages != 2:
            raise ArgumentError("matmul: TileConfig early needs stages 2 (a second workgroup "
                                "buffer to store the next tile into)")

    @property
    def name(self) -> str:
        parts = [f"{self.bm}x{self.bn}x{self.bk}", f"{self.tm}x{self.tn}"]
        if self.unroll:
            parts.append("u")
        if self.stages == 1:
            parts.append("sb")
        if self.warp:
            parts.append("w")
        if self.early:
            parts.append("e")
        if self.group > 1:
            parts.append(f"g{self.group}")
        if self.split > 1:
            parts.append(f"s{self.split}")
        return "_".join(parts)

    @classmethod
    def parse(cls, name: str) -> TileConfig:
        """The config named ``name`` (options in any order; unknown ones are refused)."""
        try:
            blocks, thread, *rest = name.split("_")
            bm, bn, bk = (int(v) for v in blocks.split("x"))
            tm, tn = (int(v) for v in thread.split("x"))
            opts: dict = {}
            for tok in rest:
                if tok == "u":
                    opts["unroll"] = True
                elif tok == "sb":
                    opts["stages"] = 1
                elif tok == "w":
                    opts["warp"] = True
                elif tok == "e":
                    opts["early"] = True
                elif tok[:1] in ("g", "s") and tok[1:].isdigit():
                    opts["group" if tok[0] == "g" else "split"] = int(tok[1:])
                else:
                    raise ValueError(tok)
        except (ValueError, AttributeError):
            raise ArgumentError(f"matmul: tile config name {name!r} is not "
                                f"BMxBNxBK_TMxTN[_u][_sb][_w][_e][_gG][_sS]") from None
        return cls(bm, bn, bk, tm, tn, **opts)

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def workgroup_bytes(self, elem_bytes: int) -> int:
        """Workgroup memory: ``stages`` a tiles and b tiles of ``elem_bytes`` elements."""
        return self.stages * self.bk * (self.bm + self.bn) * elem_bytes

    def fits(self, device: Device, elem_bytes: int) -> bool:
        """Whether the shader can be built for ``device`` with tiles of ``elem_bytes``
        elements (8 f64, 4 f32 and f16 at f32 precision, 2 f16 mixed)."""
        t = self.threads
        shape_ok = (self.bm % self.tm == 0 and self.bn % self.tn == 0 and self.tm % 4 == 0
                    and self.tn % 4 == 0 and self.bk % 4 == 0 and t > 0
                    and (self.bm * self.bk) % (4 * t) == 0 and (self.bk * self.bn) % (4 * t) == 0
                    and (not self.warp or (t % 32 == 0 and (self.bn // self.tn) % 8 == 0
                                           and (self.bm // self.tm) % 4 == 0)))
        return (shape_ok
                and t <= device.limit("max-compute-invocations-per-workgroup")
                and t <= device.limit("max-compute-workgroup-size-x")
                and self.workgroup_bytes(elem_bytes)
                <= device.limit("max-compute-workgroup-storage-size"))


_C = TileConfig
# f32 (and f16 at "f32" precision, and f64) candidates, best guesses first; configs that do
# not fit an adapter are dropped there (NVIDIA's Vulkan driver allows 48 KiB of workgroup
# memory, lavapipe 32 KiB). 128×128 with 8×8 per invocation is the classic big-matrix tile;
# the smaller ones keep enough workgroups busy for skinny or small outputs. The names the
# autotune cache of earlier versions holds stay candidates.
CANDIDATES = (
    _C(128, 128, 8, 8, 8),
    _C(128, 128, 16, 8, 8),
    _C(128, 64, 16, 8, 4),
    _C(64, 128, 16, 4, 8),
    _C(64, 64, 16, 4, 4),
    _C(32, 64, 16, 4, 4),
    _C(32, 32, 16, 4, 4),
    _C(32, 64, 16, 4, 4, split=8),
    _C(64, 64, 16, 4, 4, split=4),
    # k loop unrolled: constant workgroup offsets, no loop counter
    _C(128, 128, 8, 8, 8, unroll=True),
    _C(128, 128, 16, 8, 8, unroll=True),
    _C(128, 128, 8, 8, 8, unroll=True, group=8),
    # 8×16 / 16×8 per invocation: more FMAs per workgroup-memory read, fewer workgroups
    _C(128, 256, 8, 8, 16, unroll=True),
    _C(256, 128, 8, 16, 8, unroll=True),
    # 128-thread workgroups: more of them per SM
    _C(64, 128, 8, 8, 8, unroll=True),
    # one tile stage: half the memory, a longer k step between barriers
    _C(128, 128, 16, 8, 8, unroll=True, stages=1),
    _C(128, 128, 32, 8, 8, unroll=True, stages=1),
    # skinny outputs: 8×8 per invocation with split-K to fill the GPU
    _C(128, 64, 16, 8, 8, unroll=True, split=8),
    _C(64, 64, 16, 8, 8, unroll=True, split=16),
    _C(128, 64, 16, 8, 8, unroll=True, split=4),
    _C(128, 64, 16, 8, 8, unroll=True, split=16),
)
# The warp option measured no faster on the H200 (equal, or 10-30% slower with group or one
# stage: docs/performance.md), so no candidate uses it; it stays for other adapters' sweeps.
# f16 "mixed" candidates: f16 tiles take half the workgroup memory; BK is 8 or 16 (MIXED_BK)
MIXED_CANDIDATES = (
    _C(128, 128, 16, 8, 8, unroll=True),
    _C(128, 128, 16, 8, 8),
    _C(128, 128, 8, 8, 8, unroll=True),
    _C(128, 128, 16, 8, 8, unroll=True, group=8),
    _C(128, 128, 16, 8, 8, unroll=True, stages=1),
    _C(128, 256, 16, 8, 16, unroll=True),
    _C(64, 128, 16, 8, 8, unroll=True),
    _C(64, 64, 16, 4, 4),
    _C(32, 64, 16, 4, 4),
)
del _C
_DEFAULTS = {"large": "128x128x8_8x8", "skinny": "32x64x16_4x4", "small": "64x64x16_4x4"}
_MIXED_DEFAULTS = {"large": "128x128x16_8x8", "skinny": "32x64x16_4x4",
                   "small": "64x64x16_4x4"}
# What the autotuner times per problem class (those that fit; all candidates if none does):
# the leaders of the H200 sweep (docs/performance.md, benchmarks/results/h200/sweep_matmul.json) and
# a small tile as a fallback, so that a first matmul on a new adapter tunes in seconds.
_TUNE_SETS = {
    "large": ("64x128x16_4x8", "128x128x16_8x8_u_sb", "128x128x8_8x8_u_g8", "128x128x8_8x8_u",
              "64x128x8_8x8_u", "128x64x16_8x4", "64x64x16_4x4"),
    "skinny": ("128x64x16_8x8_u_s8", "128x64x16_8x8_u_s4", "128x64x16_8x8_u_s16",
               "64x64x16_4x4_s4", "32x64x16_4x4_s8", "64x64x16_4x4", "32x64x16_4x4"),
    "small": ("64x64x16_4x4", "32x64x16_4x4", "32x32x16_4x4", "64x128x8_8x8_u",
              "128x128x8_8x8_u"),
}
_MIXED_TUNE_SETS = {
    "large": ("32x64x16_4x4", "64x64x16_4x4", "64x128x16_8x8_u", "128x256x16_8x16_u"),
    "skinny": ("64x128x16_8x8_u", "64x64x16_4x4", "32x64x16_4x4"),
    "small": ("64x64x16_4x4", "32x64x16_4x4", "64x128x16_8x8_u"),
}
# Bumped when the candidates change, so that choices cached by an earlier set are re-tuned.
_TUNE_REVISION = 4
# The problem each class is tuned on (M, N, K): big enough to rank configs, quick to run.
_TUNE_SHAPES = {"large": (2048, 2048, 2048), "skinny": (8192, 64, 8192),
                "small": (256, 256, 256)}


def problem_class(m: int, n: int, k: int) -> str:
    if min(m, n) >= 1024:
        return "large"
    if max(m, n) >= 1024 and min(m, n) <= 256:
        return "skinny"
    return "small"


def elem_bytes(dtype: str, precision: str) -> int:
    """Bytes of one workgroup tile element for this dtype and precision."""
    if dtype == "f64":
        return 8
    return 2 if precision == "mixed" else 4


def _cooperative_matrix_config(device: Device, dtype: str):
    """Where a cooperative-matrix (tensor core) matmul would plug in: return its kernel
    config when the device has enabled "cooperative-matrix" for this dtype.

    Today it always returns None: wgpu 0.32 (wgpu-native 29) refuses to enable the
    experimental feature and supports only 8×8 f32 tiles, so no adapter reaches here with
    it enabled. A future kernel lives in kernels/matmul/matmul_coop.wgsl and is chosen
    here."""
    if "cooperative-matrix" not in device.features:
        return None
    return None


def cooperative_matrix_listed(device: Device) -> bool:
    """True if the adapter lists cooperative-matrix (even though it cannot be enabled)."""
    return "cooperative-matrix" in set(device.adapter.features)


def _check_precision(value, dt: str) -> str:
    """The precision param resolved for dtype ``dt`` (None -> the dtype's default)."""
    if value is None:
        return F16_DEFAULT_PRECISION if dt == "f16" else "f32"
    if not isinstance(value, str) or value not in PRECISIONS:
        raise ArgumentError(f"matmul: param 'precision' must be one of "
                            f"{', '.join(map(repr, PRECISIONS))}, got {value!r}")
    if value == "mixed" and dt != "f16":
        raise ArgumentError(f"matmul: param 'precision' 'mixed' (f16 sums over each k slice) "
                            f"needs f16 a and b; {dt} accumulates in {dt}: leave precision out "
                            f"or pass 'f32'")
    return value


@dataclass(frozen=True)
class MatmulShape:
    """How a · b runs: numpy's matmul shapes mapped onto the tiled kernel.

    ``out`` is numpy's result shape; m, k, n one product's sizes. A product whose b has no
    batch extent runs as one 2-D product with a's batch dimensions folded into m (``batch``
    is then ()); otherwise ``batch`` holds the coalesced batch sizes and ``a_strides`` /
    ``b_strides`` each operand's element stride along them (0 where it is broadcast)."""

    out: tuple[int, ...]
    m: int
    k: int
    n: int
    batch: tuple[int, ...] = ()
    a_strides: tuple[int, ...] = ()
    b_strides: tuple[int, ...] = ()

    @property
    def nbatch(self) -> int:
        return math.prod(self.batch)


@functools.lru_cache(maxsize=512, typed=True)
def matmul_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> MatmulShape:
    """numpy's matmul rules: (..., m, k) · (..., k, n) with the leading (batch) dimensions
    broadcast; a 1-D a is a row (its m dropped from the result), a 1-D b a column."""
    for nm, s in (("a", a_shape), ("b", b_shape)):
        if not s:
            raise ShapeError(f"matmul: {nm} is 0-d; matmul takes arrays of 1 or more "
                             f"dimensions (multiply scales by a scalar)")
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    if k != k2:
        raise ShapeError(f"matmul: a is {a_shape} and b is {b_shape}; inner dimensions {k} "
                         f"and {k2} differ")
    ba, bb = a2[:-2], b2[:-2]
    batch = broadcast_shapes("matmul", [("a's batch shape", ba), ("b's batch shape", bb)])
    out = batch + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    if math.prod(bb) == 1:  # b is the same matrix for every batch: one (B·m, k) · (k, n)
        return MatmulShape(out, math.prod(ba) * m, k, n)
    sa = broadcast_strides(ba, batch, tuple(s * m * k for s in contiguous_strides(ba)))
    sb = broadcast_strides(bb, batch, tuple(s * k * n for s in contiguous_strides(bb)))
    sizes, (sa, sb) = coalesce(batch, (sa, sb))
    if len(sizes) > MAX_DIMS:
        raise ShapeError(f"matmul: the batch dimensions of a {a_shape} and b {b_shape} "
                         f"alternate over {len(sizes)} dimensions; at most {MAX_DIMS} are "
                         f"supported")
    return MatmulShape(out, m, k, n, sizes, sa, sb)


class Matmul(BuiltinKernel):
    """out = a · b for f32, f64 and f16 buffers of any shape, with numpy's matmul rules:
    2-D products, batches over leading dimensions (broadcast), 1-D operands as vectors.

    Params: ``precision`` (f16 only): "f32" (the default) converts a and b to f32 in
    workgroup memory and sums every product in f32; "mixed" multiplies and adds in f16
    within each BK-wide k slice (BK is 8 or 16) and adds each slice's sum into an f32
    accumulator, about twice as fast where f16 arithmetic is twice the f32 rate (NVIDIA).
    f32 and f64 take only "f32" (or nothing). ``_config`` (a TileConfig) pins the tile
    configuration instead of the tuned one (tests, benchmarks).

    Error bounds, elementwise, with |A|·|B| the product of absolute values and
    γ(n, u) = n·u / (1 − n·u):

    * f32, f64, f16 "f32": |C − A·B| ≤ γ(K, u_acc)·(|A|·|B|) (+ 2^-11·|A·B| for the final
      rounding of an f16 result), u_acc = 2^-24 (f32 accumulator) or 2^-53 (f64).
    * f16 "mixed": |C − A·B| ≤ (γ(2·BK, 2^-11) + γ(⌈K/BK⌉, 2^-24))·(|A|·|B|)
      + 2^-11·|A·B| + 2K·2^-14. The first term is the f16 sum of each slice of BK products
      (two f16 roundings per product: Vulkan lets fma round after the multiply), the second the
      f32 sum of the ⌈K/BK⌉ slices, the third the f16 result, the last f16 subnormals
      (flushed to zero on some drivers). For BK = 16 that is at most about 1.6 % of
      (|A|·|B|); random signs give far less (the errors are ~2^-11·√BK per slice). Each
      slice's partial sum must stay inside f16's range (|sum| < 65504): with BK = 16, inputs
      below 64 in magnitude are always safe.

    The reference for these bounds is the exact product of the (f16-rounded) inputs, e.g.
    numpy's f64 matmul of them."""

    name = "matmul"
    not_in_place = "matmul reads whole rows of a and columns of b for each output element"
    inputs = ("a", "b")
    dtypes = FLOATS
    params = (Param("precision", "str", None,
                    "f16 only: 'f32' (default: every product summed in f32) or 'mixed' (f16 "
                    "sums over each BK-wide k slice, f32 across slices)"),)
    description = ("out = a · b (numpy's matmul: (..., M, K) · (..., K, N), batch dimensions "
                   "broadcast, 1-D operands as vectors); f16 accumulates in f32 "
                   "(precision='mixed': in f16 within each k slice of BK ≤ 16)")

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        # the f32 temporary of an f16 split-K product (see passes) takes f16 a and b
        want_in = "f16" if params.get("_f32_out") else output.dtype
        if params.get("_f32_out") and output.dtype != "f32":
            raise DtypeError(f"matmul: the split-K temporary must be f32, got {output.dtype}")
        for nm, x in (("a", a), ("b", b)):
            if x.dtype != want_in:
                raise DtypeError(f"matmul: {nm} is {x.dtype}, out is {output.dtype}; "
                                 f"dtypes must match")
        want = matmul_shape(a.shape, b.shape).out
        if output.shape != want:
            raise ShapeError(f"matmul: out is {output.shape}, expected {want} for a {a.shape} "
                             f"· b {b.shape}")
        device = output.device
        cfg = params.get("_config")
        if cfg is not None and not cfg.fits(device, elem_bytes(output.dtype,
                                                               params["precision"])):
            raise ArgumentError(f"matmul: tile config {cfg.name} does not fit this adapter's "
                                f"limits ({device.name})")
        limit = device.limit("max-storage-buffer-binding-size")
        for nm, x in (("a", a), ("b", b), ("out", output)):
            if x.nbytes > limit:
                raise ShapeError(f"matmul: {nm} {x.shape} is {x.nbytes} bytes; this adapter "
                                 f"binds at most {limit} bytes per buffer")

    def output_spec(self, inputs, params):
        a, b = inputs
        if a.dtype != b.dtype:
            raise DtypeError(f"matmul: a is {a.dtype} and b is {b.dtype}; dtypes must match")
        return matmul_shape(a.shape, b.shape).out, a.dtype

    def resolve_params(self, params, dt):
        # "_config" (a TileConfig) pins the tile configuration: for the autotuner and tests
        params = dict(params or {}) if isinstance(params, dict) or params is None else params
        cfg = params.pop("_config", None) if isinstance(params, dict) else None
        # "_f32_out": the first step of an f16 split-K product (f16 a and b, f32 temporary)
        f32_out = bool(params.pop("_f32_out", False)) if isinstance(params, dict) else False
        out = super().resolve_params(params, dt)
        out["precision"] = precision = _check_precision(out.get("precision"), dt.name)
        if cfg is not None:
            if not isinstance(cfg, TileConfig):
                raise ArgumentError(f"matmul: param '_config' must be a TileConfig, got "
                                    f"{type(cfg).__name__}")
            if cfg.split > 1 and not (dt.name == "f32" or
                                      (dt.name == "f16" and precision == "f32")):
                raise ArgumentError(f"matmul: split-K config {cfg.name} needs f32 sums (f32, "
                                    f"or f16 at precision 'f32'): its partial sums meet by "
                                    f"32-bit compare-and-swap; {dt.name} at precision "
                                    f"{precision!r} cannot take it")
            if precision == "mixed" and cfg.bk not in MIXED_BK:
                raise ArgumentError(f"matmul: tile config {cfg.name} has BK={cfg.bk}; "
                                    f"precision 'mixed' sums BK products in f16 and takes BK "
                                    f"{' or '.join(map(str, MIXED_BK))}")
            out["_config"] = cfg
        if f32_out:
            if cfg is None or cfg.split == 1:
                raise ArgumentError("matmul: '_f32_out' is the first step of an f16 split-K "
                                    "product and needs a split-K '_config'")
            out["_f32_out"] = True
        return out

    # -- configuration -----------------------------------------------------------------------------
    @staticmethod
    def candidates(dtype: str, device: Device, precision: str = "f32") -> list[TileConfig]:
        """The configs that fit ``device`` for this dtype and precision, best guesses first."""
        size = elem_bytes(dtype, precision)
        if precision == "mixed":
            return [c for c in MIXED_CANDIDATES if c.bk in MIXED_BK and c.fits(device, size)]
        return [c for c in CANDIDATES
                if c.fits(device, size) and (c.split == 1 or dtype in ("f32", "f16"))]

    def tune_problem(self, m: int, n: int, k: int, dtype: str, device: Device,
                     precision: str = "f32") -> TuneProblem | None:
        """The tuner's problem for an m × n × k product (its class's candidates that fit), or
        None where nothing is tuned (a cooperative-matrix config)."""
        if _cooperative_matrix_config(device, dtype) is not None:  # pragma: no cover
            return None
        fits = self.candidates(dtype, device, precision)
        if not fits:
            raise ShapeError(f"matmul: no tile configuration fits this adapter's limits "
                             f"({device.name})")
        cls = problem_class(m, n, k)
        mixed = precision == "mixed"
        default = (_MIXED_DEFAULTS if mixed else _DEFAULTS)[cls]
        wanted = (_MIXED_TUNE_SETS if mixed else _TUNE_SETS)[cls] + (default,)
        names = [c.name for c in fits if c.name in wanted] or [c.name for c in fits]
        return TuneProblem(
            "matmul", f"matmul {dtype}{' mixed' if mixed else ''} {cls} r{_TUNE_REVISION}",
            tuple(names), default,
            lambda name: _measure(self, TileConfig.parse(name), dtype, cls, device, precision))

    def tune_problems(self, inputs, output, params) -> list[TuneProblem]:
        if params.get("_config") is not None:
            return []
        sh = matmul_shape(inputs[0].shape, inputs[1].shape)
        problem = self.tune_problem(sh.m, sh.n, sh.k, output.dtype, output.device,
                                    params.get("precision", "f32"))
        return [problem] if problem is not None else []

    def config_for(self, m: int, n: int, k: int, dtype: str, device: Device,
                   precision: str = "f32") -> TileConfig:
        """The tuned (or default) tile configuration; looks up only (``bind`` tunes first)."""
        coop = _cooperative_matrix_config(device, dtype)
        if coop is not None:  # pragma: no cover - no adapter can enable it with wgpu 0.32
            return coop
        problem = self.tune_problem(m, n, k, dtype, device, precision)
        chosen = TileConfig.parse(tuning.choice(device, problem))
        if (chosen.split > 1 and dtype == "f16"
                and m * n * 4 > device.limit("max-storage-buffer-binding-size")):
            # its f32 temporary (Matmul.passes) would not bind: the class's one-pass default
            chosen = TileConfig.parse(problem.default)
        return chosen

    def key(self, inputs, output, params) -> PipelineKey:
        a, b = inputs
        sh = matmul_shape(a.shape, b.shape)
        m, k, n = sh.m, sh.k, sh.n
        precision = params.get("precision", "f32")
        cfg = params.get("_config")
        cfg = cfg or self.config_for(m, n, k, output.dtype, output.device, precision)
        # K = 0 leaves a and b empty: their 16-byte allocations are shorter than one vec4<f64>
        # The key's dtype is a's and b's: an f16 split-K step writes f32 bits, as f32 does.
        consts = (("config", cfg.name), ("precision", precision),
                  ("vec_a", k > 0 and k % 4 == 0), ("vec_b", k > 0 and n % 4 == 0))
        if sh.batch:  # only batched products carry it: 2-D keys (and shaders) stay as they were
            consts += (("batch", len(sh.batch)),)
        return PipelineKey(self.name, (a.dtype,), consts)

    def passes(self, inputs, output, params):
        """An f16 product whose config splits K runs in two steps of one compute pass: the
        split-K matmul into an f32 temporary (f32 sums, added by compare-and-swap), then
        its conversion to f16. Every other product is one pass (None)."""
        if output.dtype != "f16" or params.get("_f32_out"):
            return None
        a, b = inputs
        sh = matmul_shape(a.shape, b.shape)
        m, k, n = sh.m, sh.k, sh.n
        if output.size == 0 or params["precision"] != "f32":
            return None
        cfg = params.get("_config") or self.config_for(m, n, k, "f16", output.device, "f32")
        if cfg.split == 1:
            return None
        limit = output.device.limit("max-storage-buffer-binding-size")
        if output.size * 4 > limit:
            if "_config" in params:
                raise ShapeError(f"matmul: split-K config {cfg.name} needs an f32 temporary "
                                 f"of {output.size * 4} bytes for out {output.shape}; this "
                                 f"adapter binds at most {limit}")
            return None  # tuned choice: one pass with the class's default tile instead
        first = {"precision": "f32", "_config": cfg, "_f32_out": True}
        return [(output.shape, "f32")], [(self, ["in0", "in1"], "tmp0", first),
                                         (TO_F16, ["tmp0"], "out", {})]

    def render(self, key):
        consts = dict(key.constants)
        return render_tiled(TileConfig.parse(consts["config"]), DTYPES[key.dtypes[0]].wgsl,
                            consts["vec_a"], consts["vec_b"], consts["precision"] == "mixed",
                            consts.get("batch", 0))

    def launches(self, inputs, output, params, device):
        a, b = inputs
        sh = matmul_shape(a.shape, b.shape)
        m, k, n = sh.m, sh.k, sh.n
        if output.size == 0:
            return []
        cfg = TileConfig.parse(dict(self.key(inputs, output, params).constants)["config"])
        limit = device.limit("max-compute-workgroups-per-dimension")
        gx, gy = math.ceil(n / cfg.bn), math.ceil(m / cfg.bm)
        if gx > limit or gy > limit:
            raise ShapeError(f"matmul: output {output.shape} needs a {gy}×{gx} grid; this "
                             f"adapter allows {limit} per dimension")
        u = {"M": m, "N": n, "K": k, "phase": 1, "kchunk": k}
        kslices = 1
        if cfg.split > 1:
            per_split = -(-k // cfg.split)  # ceil: each z slice's share of K, in whole BK steps
            kchunk = max(cfg.bk, -(-per_split // cfg.bk) * cfg.bk)
            kslices = max(1, -(-k // kchunk))
            u["kchunk"] = kchunk
        if sh.batch:
            u.update(uniform_values(sh.batch, {"a": (sh.a_strides, 0), "b": (sh.b_strides, 0)}),
                     kslices=kslices, zbase=0, nbatch=sh.nbatch)
        # split-K adds into out: a first launch zeroes it
        zero = [Launch(fold_grid(-(-output.size // cfg.threads), device, self.name),
                       dict(u, phase=0))] if cfg.split > 1 else []
        if not sh.batch:
            return zero + [Launch((gx, gy, kslices), u)]
        # batched: workgroup z = batch · kslices + k slice, at most `limit` z per launch
        per = max(1, limit // kslices)
        return zero + [Launch((gx, gy, min(per, sh.nbatch - z0) * kslices), dict(u, zbase=z0))
                       for z0 in range(0, sh.nbatch, per)]


class _ToF16(BuiltinKernel):
    """out (f16) = a (f32), elementwise: the last step of an f16 split-K product (internal,
    not in the registry)."""

    name = "matmul_to_f16"
    inputs = ("a",)
    dtypes = ("f16",)
    workgroup_size = 256
    description = "out = f16(a): an f16 split-K product's f32 temporary, converted"

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.dtype != "f32" or output.dtype != "f16" or a.size != output.size:
            raise DtypeError(f"matmul_to_f16: takes an f32 input and an f16 output of the "
                             f"same size, got {a.dtype} {a.shape} and {output.dtype} "
                             f"{output.shape}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, ("f16",), ())

    def render(self, key: PipelineKey):
        # vec4 items: both buffers are allocated in 16-byte multiples, so the last item
        # may run into padding that is never read back
        src = (f"enable f16;\n"
               f"struct Params {{ n: u32, }}\n"
               f"@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;\n"
               f"@group(0) @binding(1) var<storage, read_write> out: array<vec4<f16>>;\n"
               f"@group(0) @binding(2) var<uniform> p: Params;\n"
               f"@compute @workgroup_size({self.workgroup_size})\n"
               f"fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
               f"        @builtin(num_workgroups) nwg: vec3<u32>,\n"
               f"        @builtin(local_invocation_index) lid: u32) {{\n"
               f"    let i = (wid.y * nwg.x + wid.x) * {self.workgroup_size}u + lid;\n"
               f"    if (i < p.n) {{\n"
               f"        out[i] = vec4<f16>(a[i]);\n"
               f"    }}\n"
               f"}}\n")
        return src, (("n", "u32"),)

    def launches(self, inputs, output, params, device):
        items = -(-output.size // 4)
        if items == 0:
            return []
        groups = -(-items // self.workgroup_size)
        return [Launch(fold_grid(groups, device, self.name), {"n": items})]


TO_F16 = _ToF16()


def _txty(cfg: TileConfig) -> str:
    """This invocation's column (tx) and row (ty) in the BM/TM × BN/TN grid of blocks."""
    gx = cfg.bn // cfg.tn
    if not cfg.warp:
        return f"let tx = lid % {gx}u;\n    let ty = lid / {gx}u;"
    # 32 consecutive invocations (a warp) cover 8 columns × 4 rows of blocks
    return (f"let tx = (lid / 32u) % {gx // 8}u * 8u + lid % 8u;\n"
            f"    let ty = (lid / 32u) / {gx // 8}u * 4u + (lid % 32u) / 8u;")


def render_tiled(cfg: TileConfig, t: str, vec_a: bool, vec_b: bool, mixed: bool = False,
                 batch: int = 0):
    """WGSL for one tile configuration (straight-line register code generated here).

    ``t`` is the storage type; ``mixed`` (f16 only) keeps f16 tiles and sums each k step's
    BK products in vec4<f16> partial accumulators that are added into the f32 ones after it.
    ``batch`` > 0: workgroup z also picks the product of a batch of that many (coalesced)
    dimensions, whose element offsets into a, b and out the shader computes from z."""
    subs = tiled_substitutions(cfg, t, vec_a, vec_b, mixed, batch=batch)
    src = shaders.render(shaders.load("matmul/matmul_tiled.wgsl"), subs)
    return src, subs["FIELDS"]


def tiled_substitutions(cfg: TileConfig, t: str, vec_a: bool, vec_b: bool, mixed: bool = False,
                        hooks: bool = False, batch: int = 0) -> dict:
    """The generated parts of matmul_tiled.wgsl's templates for one tile configuration
    (``FIELDS``: the parameter struct's fields, in order).

    ``hooks`` (for kernels built on this tiling with their own template, e.g. convolutions):
    the tiles are filled by WGSL functions the caller defines, ``load_a4(r, k, kend)`` (a's
    row r, columns k..k+3) and ``load_b4(k, c, kend)`` (b's row k, columns c..c+3), each a
    vec4 of the tile element type that is 0 outside the operands; results leave through
    ``store4(r, c, acc)`` (row r < M, columns c..c+3 that may pass N). No split-K then."""
    if hooks and (cfg.split > 1 or batch):
        raise ArgumentError(f"matmul: tile config {cfg.name} splits K or is batched; the hooks "
                            f"take whole-K, unbatched configs only")
    if mixed and t != "f16":
        raise ArgumentError(f"matmul: precision 'mixed' needs f16, got {t}")
    acc = "f32" if t == "f16" else t
    s = "f16" if mixed else acc  # the workgroup tiles' element type
    v, vs = f"vec4<{acc}>", f"vec4<{s}>"
    threads = cfg.threads
    la = cfg.bm * cfg.bk // (4 * threads)  # vec4 loads of a per invocation per k step
    lb = cfg.bk * cfg.bn // (4 * threads)
    asz, bsz = cfg.bk * cfg.bm // 4, cfg.bk * cfg.bn // 4  # one tile, in vec4
    ka, nb = cfg.bk // 4, cfg.bn // 4
    decl, load, write = [], [], []
    # element offsets of this workgroup's product (batched only: 2-D shaders stay as they were)
    ao, bo, oo = ("aoff + ", "boff + ", "ooff + ") if batch else ("", "", "")
    for i in range(la):
        decl.append(f"var ra{i}: {vs};")
        # a tile is BM rows × BK/4 vec4; invocation lid takes vec4 number lid + i·THREADS
        load.append(f"{{ let q = lid + {i * threads}u; let r = row0 + q / {ka}u; "
                    f"let kk = k0 + (q % {ka}u) * 4u;")
        if hooks:
            load.append(f"  ra{i} = load_a4(r, kk, kend); }}")
        elif vec_a:  # K % 4 == 0: a vec4 is entirely inside or entirely outside a row
            load.append(f"  if (r < p.M && kk < kend) {{ ra{i} = "
                        f"{vs}(a[({ao}r * p.K + kk) / 4u]); "
                        f"}} else {{ ra{i} = {vs}(0); }} }}")
        else:
            load.append(f"  ra{i} = {vs}(load_a(r, kk, kend), load_a(r, kk + 1u, kend), "
                        f"load_a(r, kk + 2u, kend), load_a(r, kk + 3u, kend)); }}")
    for i in range(lb):
        decl.append(f"var rb{i}: {vs};")
        load.append(f"{{ let q = lid + {i * threads}u; let kr = k0 + q / {nb}u; "
                    f"let c = col0 + (q % {nb}u) * 4u;")
        if hooks:
            load.append(f"  rb{i} = load_b4(kr, c, kend); }}")
        elif vec_b:
            load.append(f"  if (kr < kend && c < p.N) {{ rb{i} = "
                        f"{vs}(b[({bo}kr * p.N + c) / 4u]); "
                        f"}} else {{ rb{i} = {vs}(0); }} }}")
        else:
            load.append(f"  rb{i} = {vs}(load_b(kr, c, kend), load_b(kr, c + 1u, kend), "
                        f"load_b(kr, c + 2u, kend), load_b(kr, c + 3u, kend)); }}")

    def store(buf: int) -> list[str]:
        """Registers -> workgroup tile ``buf`` (a transposed: As[k][m], so the k loop reads
        rows of m as vec4)."""
        lines = []
        for i in range(la):
            lines.append(f"{{ let q = lid + {i * threads}u; let r = q / {ka}u; "
                         f"let kk = (q % {ka}u) * 4u;")
            for c in range(4):
                lines.append(f"  As[{buf * asz + c * cfg.bm // 4}u + kk * {cfg.bm // 4}u + "
                             f"r / 4u][r % 4u] = ra{i}[{c}];")
            lines.append("}")
        for i in range(lb):
            lines.append(f"Bs[{buf * bsz + i * threads}u + lid] = rb{i};")
        return lines

    ta, tb = cfg.tm // 4, cfg.tn // 4
    sa, sb = cfg.bm // cfg.tm, cfg.bn // cfg.tn  # vec4 stride between an invocation's blocks
    for i in range(cfg.tm):
        for j in range(tb):
            decl.append(f"var c{i}_{j} = {v}(0);")
            if mixed:
                decl.append(f"var h{i}_{j}: {vs};")

    def step(buf: int, kk) -> list[str]:
        """One k of the tile in workgroup buffer ``buf``: kk an int (unrolled) or "kk"."""
        oa, ob = buf * asz, buf * bsz  # constant part of the offsets
        va = vb = ""  # the k loop's variable part
        if isinstance(kk, int):
            oa, ob, first = oa + kk * cfg.bm // 4, ob + kk * nb, kk == 0
        else:
            va, vb, first = f"{kk} * {cfg.bm // 4}u + ", f"{kk} * {nb}u + ", False
        lines = [f"let a{i} = As[{va}{oa + i * sa}u + ty];" for i in range(ta)]
        lines += [f"let b{j} = Bs[{vb}{ob + j * sb}u + tx];" for j in range(tb)]
        for i in range(cfg.tm):
            for j in range(tb):
                x = f"{vs}(a{i // 4}[{i % 4}])"
                if not mixed:
                    lines.append(f"c{i}_{j} = fma({x}, b{j}, c{i}_{j});")
                elif first:  # the slice's first product starts the f16 partial sum
                    lines.append(f"h{i}_{j} = {x} * b{j};")
                else:
                    lines.append(f"h{i}_{j} = fma({x}, b{j}, h{i}_{j});")
        return lines

    def compute(buf: int) -> list[str]:
        """All BK k steps of tile ``buf``, then (mixed) the f16 slice sums into f32."""
        lines = []
        if cfg.unroll:
            for kk in range(cfg.bk):
                lines += ["{"] + ["  " + x for x in step(buf, kk)] + ["}"]
        else:
            if mixed:
                lines += [f"h{i}_{j} = {vs}(0);" for i in range(cfg.tm) for j in range(tb)]
            lines.append(f"for (var kk = 0u; kk < {cfg.bk}u; kk = kk + 1u) {{")
            lines += ["  " + x for x in step(buf, "kk")]
            lines.append("}")
        if mixed:
            lines += [f"c{i}_{j} = c{i}_{j} + {v}(h{i}_{j});"
                      for i in range(cfg.tm) for j in range(tb)]
        return lines

    def indent(lines, n=1):
        return ["    " * n + x for x in lines]

    def prefetch(tile: str) -> list[str]:
        """Global -> registers for tile number ``tile`` (a WGSL u32 expression)."""
        return [f"k0 = kbegin + ({tile}) * {cfg.bk}u;"] + load

    main = ["if (tiles > 0u) {"]
    main += indent(load)
    if cfg.stages == 2:
        # two copies of the step, one per buffer, so each reads and writes constant offsets
        main += indent(store(0) + ["workgroupBarrier();",
                                   "for (var t = 0u; t < tiles; t = t + 2u) {"])
        for buf, tile in ((0, "t"), (1, "t + 1u")):
            if cfg.early:  # the other buffer was last read before the previous barrier
                body = [f"let more = {tile} + 1u < tiles;",
                        "if (more) {", *indent(prefetch(f"{tile} + 1u") + store(1 - buf)), "}",
                        *compute(buf),
                        "workgroupBarrier();"]
            else:
                body = [f"let more = {tile} + 1u < tiles;",
                        "if (more) {", *indent(prefetch(f"{tile} + 1u")), "}",
                        *compute(buf),
                        "if (more) {", *indent(store(1 - buf)), "}",
                        "workgroupBarrier();"]
            if buf == 0:
                main += indent(["{", *indent(body), "}"], 2)
            else:
                main += indent(["if (t + 1u < tiles) {", *indent(body), "}"], 2)
        main += indent(["}"])
    else:
        body = [*store(0), "workgroupBarrier();",
                "if (t + 1u < tiles) {", *indent(prefetch("t + 1u")), "}",
                *compute(0), "workgroupBarrier();"]
        main += indent(["for (var t = 0u; t < tiles; t = t + 1u) {", *indent(body), "}"])
    main.append("}")

    if cfg.group > 1:
        # grouped rasterization: launch order walks GROUP block rows column by column
        block = ["let pid = wid.y * nwg.x + wid.x;",
                 f"let per_group = {cfg.group}u * nwg.x;",
                 f"let first = (pid / per_group) * {cfg.group}u;",
                 f"let rows = min(nwg.y - first, {cfg.group}u);",
                 "let by = first + (pid % per_group) % rows;",
                 "let bx = (pid % per_group) / rows;"]
    else:
        block = ["let bx = wid.x;", "let by = wid.y;"]

    for i in range(cfg.tm):
        # row of accumulator i: vec4 block i//4 (stride BM/TM vec4 = 4·sa rows), lane i%4
        write.append(f"{{ let r = row0 + (ty + {(i // 4) * sa}u) * 4u + {i % 4}u;")
        write.append("  if (r < p.M) {")
        for j in range(tb):
            write.append(f"    {{ let c = col0 + (tx + {j * sb}u) * 4u;")
            if hooks:
                write.append(f"      store4(r, c, c{i}_{j}); }}")
            elif cfg.split > 1:  # a loop, not 4 copies of the compare-and-swap loop
                write.append(f"      let cv = c{i}_{j};")
                write.append("      for (var lane = 0u; lane < 4u; lane = lane + 1u) {")
                write.append(f"        if (c + lane < p.N) {{ add_out({oo}r * p.N + c + lane, "
                             "cv[lane]); }")
                write.append("      }")
                write.append("    }")
            elif vec_b:
                write.append(f"      if (c < p.N) {{ out[({oo}r * p.N + c) / 4u] = "
                             f"vec4<{t}>(c{i}_{j}); }} }}")
            else:
                for lane in range(4):
                    write.append(f"      if (c + {lane}u < p.N) {{ "
                                 f"out[{oo}r * p.N + c + {lane}u] = {t}(c{i}_{j}[{lane}]); }}")
                write.append("    }")
        write.append("  }")
        write.append("}")
    helpers = []
    if not vec_a and not hooks:
        helpers.append(f"fn load_a(r: u32, k: u32, kend: u32) -> {s} {{\n"
                       f"    if (r < p.M && k < kend) {{\n"
                       f"        return {s}(a[{ao}r * p.K + k]);\n    }}\n    return {s}(0);\n}}\n")
    if not vec_b and not hooks:
        helpers.append(f"fn load_b(k: u32, c: u32, kend: u32) -> {s} {{\n"
                       f"    if (k < kend && c < p.N) {{\n"
                       f"        return {s}(b[{bo}k * p.N + c]);\n    }}\n    return {s}(0);\n}}\n")
    phase0 = ""
    if cfg.split > 1:
        helpers.append("fn add_out(i: u32, v: f32) {\n    var old = atomicLoad(&out[i]);\n"
                       "    loop {\n        let res = atomicCompareExchangeWeak(&out[i], old, "
                       "bitcast<u32>(bitcast<f32>(old) + v));\n"
                       "        if (res.exchanged) {\n            break;\n        }\n"
                       "        old = res.old_value;\n    }\n}\n")
        every = "p.M * p.N * p.nbatch" if batch else "p.M * p.N"  # zeroes all the products
        phase0 = (f"if (p.phase == 0u) {{\n        let i = (wid.y * nwg.x + wid.x) * {threads}u + "
                  f"lid;\n        if (i < {every}) {{\n            atomicStore(&out[i], 0u);\n"
                  "        }\n        return;\n    }")
    ind = "\n    "
    fields = (("M", "u32"), ("N", "u32"), ("K", "u32"), ("phase", "u32"), ("kchunk", "u32"))
    kbegin = "let kbegin = wid.z * p.kchunk;"
    if batch:
        fields += (("kslices", "u32"), ("zbase", "u32"), ("nbatch", "u32"),
                   *uniform_fields(batch, ("a", "b")))
        helpers.insert(0, "var<private> aoff: u32;\nvar<private> boff: u32;\n"
                          "var<private> ooff: u32;\n")
        index = index_wgsl(batch, ("a", "b"), "bz")  # WGSL ignores the indentation
        kbegin = ("let bz = p.zbase + wid.z / p.kslices;\n"
                  f"    {{\n        {index}\n        aoff = i_a;\n        boff = i_b;\n    }}\n"
                  "    ooff = bz * p.M * p.N;\n"
                  "    let kbegin = (wid.z % p.kslices) * p.kchunk;")
    return {
        "FIELDS": fields,
        "EXTRA": "".join(f"\n    {nm}: {ft}," for nm, ft in fields[5:]), "KBEGIN": kbegin,
        "ENABLE": shaders.enable_directives([t]), "T": t, "ACC": acc, "S": s,
        "AT": f"vec4<{t}>" if vec_a else t, "BT": f"vec4<{t}>" if vec_b else t,
        "OT": "atomic<u32>" if cfg.split > 1 else (f"vec4<{t}>" if vec_b else t),
        "PHASE0": phase0, "BLOCK": ind.join(block), "STAGES": cfg.stages,
        "BM": cfg.bm, "BN": cfg.bn, "BK": cfg.bk, "TM": cfg.tm, "TN": cfg.tn,
        "THREADS": threads, "HELPERS": "\n".join(helpers), "DECLARE": ind.join(decl),
        "TXTY": _txty(cfg),
        "MAIN": ind.join(main), "WRITE": ind.join(write)}


def _measure(kernel: Matmul, cfg: TileConfig, dtype: str, cls: str, device: Device,
             precision: str = "f32") -> float:
    """Seconds of one matmul of the class's tuning shape with ``cfg`` (median of 3 after a
    warm-up; GPU wall time of submit + wait, with several matmuls in one pass)."""
    import numpy as np

    from ... import _queue
    from ...buffer import empty
    from ..core.base import bind

    m, n, k = _TUNE_SHAPES[cls]
    a, b, out = (empty((m, k), dtype, "autotune-a", device=device),
                 empty((k, n), dtype, "autotune-b", device=device),
                 empty((m, n), dtype, "autotune-out", device=device))
    try:
        d = bind(kernel, [a, b], out, {"_config": cfg, "precision": precision})
        calls = d.raw_calls() * 3
        times = []
        for rep in range(4):
            enc = device.link.encoder()
            enc.record_calls(calls)
            t0 = time.perf_counter()
            _queue.wait(device.submitter.submit([enc.finish()]))
            if rep:
                times.append((time.perf_counter() - t0) / 3)
        return float(np.median(times))
    finally:
        for x in (a, b, out):
            x.free()
