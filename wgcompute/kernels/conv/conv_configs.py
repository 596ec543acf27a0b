"""Which kernel and tiling runs a convolution's implicit GEMM: matmul's TileConfig (shared-memory
tiles) or a SkinnyConfig (few output columns, long K: split K inside the workgroup), by shape,
or tuned per layer shape on a GPU (core/tuning.py times the candidates on the layer itself).

Terms: the GEMM of a convolution has M rows (output channels of a group), N columns (output
pixels of the whole batch) and K = input channels of a group × kernel height × width."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ...errors import ArgumentError
from ..core import tuning
from ..core.tuning import TuneProblem
from ..matmul.matmul import CANDIDATES, TileConfig

# Tiled: the default tile by output size (rows × columns of the GEMM): small outputs need
# small tiles to give the GPU enough workgroups.
_TILED_DEFAULTS = (("large", "64x128x16_4x8"), ("medium", "64x64x16_4x4"),
                   ("small", "32x64x16_4x4"), ("tiny", "32x32x16_4x4"))
_TILED_TUNE = {"large": ("64x128x8_8x8_u", "128x128x8_8x8_u", "64x128x16_4x8", "64x128x16_4x8_u",
                         "128x128x16_8x8", "128x64x16_8x4", "128x64x16_8x4_u", "64x64x16_4x4",
                         "64x64x16_4x4_u", "32x64x16_4x4", "32x64x16_4x4_u",
                         "32x128x16_4x8_u"),
               "medium": ("64x64x16_4x4", "64x64x16_4x4_u", "32x64x16_4x4", "32x64x16_4x4_u",
                          "64x128x16_4x8", "128x64x16_8x4", "64x128x8_8x8_u",
                          "32x128x16_4x8_u"),
               "small": ("32x64x16_4x4", "32x64x16_4x4_u", "32x32x16_4x4", "64x64x16_4x4"),
               "tiny": ("32x32x16_4x4", "32x64x16_4x4")}
# Tiles the convolutions' tuner times besides matmul's candidates: 32-row blocks for layers of
# few output channels (a 64-row tile spends 62% of its multiply-adds on the padding past 24
# channels), and unrolled forms of the 4×4 and 4×8 per-invocation tiles. In a sweep of
# MobileNetV2's layers at batch 256 on an H200 (docs/performance.md), these were the fastest
# on 16 of the 21 layer shapes in f16 "mixed" (its 16- to 32-channel layers in 0.56-0.60 of
# the best 64-row tile's time) and on 8 of 21 in f32.
CONV_EXTRA = (TileConfig(32, 128, 16, 4, 8, unroll=True), TileConfig(32, 64, 16, 4, 4, unroll=True),
              TileConfig(64, 64, 16, 4, 4, unroll=True), TileConfig(64, 128, 16, 4, 8, unroll=True),
              TileConfig(128, 64, 16, 8, 4, unroll=True))
# Bumped when candidates or kernels change, so that choices cached by an earlier version are
# tuned again.
TUNE_REVISION = 3
# Columns at most that a layer is tuned on (a larger batch is tuned on fewer images: by then
# every candidate fills the GPU many times over and ranks the same), and the column count
# above which layers share one tuned choice per shape of the rest.
TUNE_MAX_N = 1 << 17
# The skinny kernel is a candidate up to this many columns (beyond, every workgroup would
# re-read too much of x through the cache, and the tiled kernel has workgroups enough).
SKINNY_MAX_N = 8192
# Fewer workgroups than this in the tiled kernel, and K at least SKINNY_MIN_K: the skinny
# kernel is the untuned default (a GPU has on the order of a hundred compute units; a tiled
# workgroup walks K in BK steps, one barrier-bound step after another).
SKINNY_BELOW_WORKGROUPS = 128
SKINNY_MIN_K = 64
SKINNY_THREADS = 256
# K at most this: the skinny kernel with one slice and up to DIRECT_MAX_ROWS rows per
# workgroup ("direct": each workgroup reads its columns of x once and writes every output
# channel of them, no workgroup memory, no barrier) is a candidate at any N; for pointwise
# convolutions up to DIRECT_DEFAULT_K it is the untuned default (a memory-bound layer).
DIRECT_MAX_K = 64
DIRECT_DEFAULT_K = 32
DIRECT_MAX_ROWS = 192
SKINNY_TARGET_WORKGROUPS = 200


@dataclass(frozen=True)
class SkinnyConfig:
    """The skinny kernel's shape: a workgroup owns ``ry·tr`` rows × ``4·cx`` columns of the
    output; its ``cx·s·ry`` invocations each sum ``tr`` rows × 4 columns over one of ``s``
    interleaved slices of K, reading w and x straight from memory (no workgroup tiles, no
    barrier in the k loop); the ``s`` partial sums meet in workgroup memory at the end.

    Its name, e.g. "sk16x16x1_4" (cx x s x ry _ tr), is what the autotuner caches."""

    cx: int
    s: int
    ry: int
    tr: int

    def __post_init__(self):
        for field in ("cx", "s", "ry", "tr"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ArgumentError(f"conv2d: SkinnyConfig {field} must be a positive int, "
                                    f"got {value!r}")

    @property
    def name(self) -> str:
        return f"sk{self.cx}x{self.s}x{self.ry}_{self.tr}"

    @classmethod
    def parse(cls, name: str) -> SkinnyConfig:
        try:
            if not name.startswith("sk"):
                raise ValueError(name)
            dims, tr = name[2:].split("_")
            cx, s, ry = (int(v) for v in dims.split("x"))
            return cls(cx, s, ry, int(tr))
        except (ValueError, AttributeError):
            raise ArgumentError(f"conv2d: skinny config name {name!r} is not "
                                f"skCXxSxRY_TR") from None

    @property
    def threads(self) -> int:
        return self.cx * self.s * self.ry

    @property
    def rows(self) -> int:
        return self.ry * self.tr

    @property
    def cols(self) -> int:
        return 4 * self.cx

    def workgroup_bytes(self) -> int:
        """The partial sums' workgroup memory (none with one slice)."""
        return self.s * self.rows * self.cx * 16 if self.s > 1 else 0

    def fits(self, device, elem_bytes: int = 4) -> bool:
        t = self.threads
        return (t <= device.limit("max-compute-invocations-per-workgroup")
                and t <= device.limit("max-compute-workgroup-size-x")
                and self.workgroup_bytes() <= device.limit("max-compute-workgroup-storage-size"))


def parse_config(name: str) -> TileConfig | SkinnyConfig:
    return SkinnyConfig.parse(name) if name.startswith("sk") else TileConfig.parse(name)


def _pow2_at_least(v: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(v, 1))))


def gemm_class(m: int, n: int) -> str:
    tiles = m * n
    if tiles >= 1 << 21:
        return "large"
    if tiles >= 1 << 18:
        return "medium"
    if tiles >= 1 << 15:
        return "small"
    return "tiny"


def tiled_choices(device, elem_bytes: int = 4) -> dict[str, TileConfig]:
    """The whole-K tile configurations (the fused epilogue needs every k) that fit."""
    return {c.name: c for c in (*CANDIDATES, *CONV_EXTRA)
            if c.split == 1 and c.fits(device, elem_bytes)}


def tiled_default(m: int, n: int, fits: dict) -> str:
    cls = gemm_class(m, n)
    default = dict(_TILED_DEFAULTS)[cls]
    if default in fits:
        return default
    names = [nm for nm in _TILED_TUNE[cls] if nm in fits] or sorted(fits)
    return names[0]


def _pow2_at_most(v: int) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(v, 1)))))


def skinny_default(m: int, n: int, k: int) -> SkinnyConfig:
    """The untuned skinny shape: columns per workgroup to cover n (up to 64); then as many
    rows per workgroup as keep ~SKINNY_TARGET_WORKGROUPS workgroups (each row block re-reads
    its columns of x through the cache); K in slices of at least 8."""
    cx = min(16, _pow2_at_least(-(-n // 4)))
    col_blocks = -(-n // (4 * cx))
    # rows per invocation share each x load; a matrix-vector product (cx 1) has no x to
    # share and wants its rows (w's traffic) spread over many workgroups
    tr = 4 if m >= 16 and cx > 1 else 1
    per = SKINNY_THREADS // cx
    ry = 1
    while ry * 2 <= per // 2 and col_blocks * -(-m // (2 * ry * tr)) >= SKINNY_TARGET_WORKGROUPS:
        ry *= 2
    if cx == 1 and ry == 1:  # a matrix-vector product: several rows per workgroup anyway
        ry = 4
    s = min(per // ry, _pow2_at_most(k // 8))
    return SkinnyConfig(cx, s, ry, tr)


def direct_default(m: int, n: int) -> SkinnyConfig:
    """The one-slice skinny shape for a short K: 4·cx columns (up to 64) × up to
    DIRECT_MAX_ROWS rows per workgroup (fewer while that leaves fewer than
    SKINNY_TARGET_WORKGROUPS workgroups), ~6 rows per invocation."""
    cx = min(16, _pow2_at_least(-(-n // 4)))
    col_blocks = -(-n // (4 * cx))
    rows = min(m, DIRECT_MAX_ROWS)
    while rows > 4 and col_blocks * -(-m // rows) < SKINNY_TARGET_WORKGROUPS:
        rows = -(-rows // 2)
    ry = max(1, min(SKINNY_THREADS // cx, 16, _pow2_at_least(-(-rows // 6))))
    return SkinnyConfig(cx, 1, ry, -(-rows // ry))


def skinny_alternatives(m: int, n: int, k: int) -> list[SkinnyConfig]:
    """The default and its neighbours (twice or half the rows per workgroup, other rows per
    invocation, half the columns): what the autotuner times besides the tiled configs."""
    base = skinny_default(m, n, k)
    out = [base]

    def add(cx, s, ry, tr):
        if min(cx, s, ry, tr) >= 1 and cx * s * ry <= SKINNY_THREADS:
            c = SkinnyConfig(cx, s, ry, tr)
            if c not in out:
                out.append(c)

    cx, s, ry, tr = base.cx, base.s, base.ry, base.tr
    if s >= 2:
        add(cx, s // 2, ry * 2, tr)
    if ry >= 2:
        add(cx, s * 2, ry // 2, tr)
    add(cx, s, ry, 1 if tr > 1 else 4)
    if cx >= 8:
        add(cx // 2, s * 2, ry, tr)
    return out[:4]


def tiled_workgroups(cfg: TileConfig, m: int, n: int) -> int:
    return -(-m // cfg.bm) * -(-n // cfg.bn)


def skinny_workgroups(cfg: SkinnyConfig, m: int, n: int) -> int:
    return -(-m // cfg.rows) * -(-n // cfg.cols)


@dataclass(frozen=True)
class ConvProblem:
    """What a convolution's tuned choice depends on: the GEMM's dims, pixels per image (a
    batch of small images is not one large image), kernel geometry and dtype."""

    dtype: str
    m: int
    n: int
    k: int
    pixels: int
    geometry: tuple  # (kh, kw, sh, sw, dh, dw)

    @property
    def key(self) -> str:
        n = self.n if self.n <= TUNE_MAX_N else "big"
        kh, kw, sh, sw, dh, dw = self.geometry
        return (f"conv2d {self.dtype} M{self.m} N{n} K{self.k} P{self.pixels} "
                f"{kh}x{kw}s{sh}x{sw}d{dh}x{dw} r{TUNE_REVISION}")


def default_config(problem: ConvProblem, device, skinny_ok: bool = True):
    """The untuned choice: the tiled default, unless it leaves the GPU mostly idle on a long
    K, where the skinny kernel runs."""
    fits = tiled_choices(device)
    if not fits:
        raise ArgumentError(f"conv2d: no tile configuration fits this adapter's limits "
                            f"({device.name})")
    m, n, k = problem.m, problem.n, problem.k
    tiled = fits[tiled_default(m, n, fits)]
    pointwise = problem.geometry == (1, 1, 1, 1, 1, 1)
    if skinny_ok and pointwise and k <= DIRECT_DEFAULT_K:
        direct = direct_default(m, n)
        if direct.fits(device):
            return direct
    if skinny_ok and n <= SKINNY_MAX_N and k >= SKINNY_MIN_K \
            and tiled_workgroups(tiled, m, n) < SKINNY_BELOW_WORKGROUPS:
        sk = skinny_default(m, n, k)
        if sk.fits(device):
            return sk
    return tiled


def candidates(problem: ConvProblem, device, skinny_ok: bool = True) -> list[str]:
    """Names of the configurations the autotuner times for ``problem``: tiled ones for the
    output's size class, and the skinny kernel's when there are few columns."""
    fits = tiled_choices(device)
    m, n, k = problem.m, problem.n, problem.k
    names = [nm for nm in _TILED_TUNE[gemm_class(m, n)] if nm in fits]
    if skinny_ok and n <= SKINNY_MAX_N:
        names += [c.name for c in skinny_alternatives(m, n, k) if c.fits(device)]
    if skinny_ok and k <= DIRECT_MAX_K:
        direct = direct_default(m, n)
        if direct.fits(device) and direct.name not in names:
            names.append(direct.name)
    default = default_config(problem, device, skinny_ok).name
    if default not in names:
        names.insert(0, default)
    return names


def tune_problem(problem: ConvProblem, device, measure, skinny_ok: bool = True) -> TuneProblem:
    """The tuner's problem for a convolution layer; ``measure(config) -> seconds`` times one
    configuration on the layer."""
    return TuneProblem("conv2d", problem.key, tuple(candidates(problem, device, skinny_ok)),
                       default_config(problem, device, skinny_ok).name,
                       lambda name: measure(parse_config(name)))


def choose(problem: ConvProblem, device, skinny_ok: bool = True):
    """The configuration for ``problem`` on ``device``: remembered (tuned before binding, on
    GPUs) or the default. Looks up only."""
    return parse_config(tuning.choice(device, tune_problem(problem, device, None, skinny_ok)))


def time_calls(device, calls, target_s: float = 2e-3) -> float:
    """Seconds per run of ``calls``: recorded ``repeat`` times into one pass, ``repeat`` set
    by a first (warm-up) submission so that a pass lasts ~``target_s`` (the round trip,
    spread over the repeats, then ranks small kernels the same); the median of 3 passes."""
    import numpy as np

    from ... import _queue

    def run(repeat: int) -> float:
        enc = device.link.encoder()
        enc.record_calls(calls * repeat)
        t0 = time.perf_counter()
        _queue.wait(device.submit([enc.finish()]))
        return (time.perf_counter() - t0) / repeat

    first = run(4)
    repeat = int(min(200, max(4, target_s / max(first, 1e-7))))
    return float(np.median([run(repeat) for _ in range(3)]))
