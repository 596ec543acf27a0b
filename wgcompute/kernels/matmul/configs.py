"""Matmul's tile configurations: ``TileConfig`` (a block tiling and its options, named for the
autotune cache) and the candidate tables the tuner times, per problem class."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...errors import ArgumentError
from ...runtime import Device


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
        """The config named ``name`` (options in any order; unknown ones are refused); each
        name parsed once (a binding asks for its config by name several times)."""
        if type(name) is str:
            return _parsed(cls, name)
        return cls._parse(name)

    @classmethod
    def _parse(cls, name: str) -> TileConfig:
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
    # 128-thread workgroups: more of them per SM (128x64 led every linear layer of ViT-B/16
    # and BERT-base at batch 32 on an H200: 32.6-36.3 TFLOP/s where the tuned choices of
    # revision 4 ran 24-34; benchmarks/results/h200/2026-11-27i/sweep_transformer_shapes.txt)
    _C(64, 128, 8, 8, 8, unroll=True),
    _C(128, 64, 8, 8, 8, unroll=True),
    _C(64, 128, 8, 8, 8, unroll=True, early=True),
    # one tile stage: half the memory, a longer k step between barriers
    _C(128, 128, 16, 8, 8, unroll=True, stages=1),
    _C(128, 128, 32, 8, 8, unroll=True, stages=1),
    # skinny outputs: 8×8 per invocation with split-K to fill the GPU
    _C(128, 64, 16, 8, 8, unroll=True, split=8),
    _C(64, 64, 16, 8, 8, unroll=True, split=16),
    _C(128, 64, 16, 8, 8, unroll=True, split=4),
    _C(128, 64, 16, 8, 8, unroll=True, split=16),
    # products between the classes (a transformer's at batch 1): small tiles, split K
    _C(32, 32, 16, 4, 4, split=2),
    _C(32, 32, 16, 4, 4, split=4),
    _C(32, 32, 16, 4, 4, split=8),
    _C(32, 64, 16, 4, 4, split=2),
    _C(32, 64, 16, 4, 4, split=4),
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
              "64x128x8_8x8_u", "128x64x8_8x8_u", "64x128x8_8x8_u_e", "128x64x16_8x4",
              "64x64x16_4x4"),
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
_TUNE_REVISION = 5
# The problem each class is tuned on (M, N, K): big enough to rank configs, quick to run.
_TUNE_SHAPES = {"large": (2048, 2048, 2048), "skinny": (8192, 64, 8192),
                "small": (256, 256, 256)}


# Products of at least BUCKET_MACS multiply-adds that are not "large" (a transformer's at batch
# 1: 128 x 768 x 3072) are tuned on their own shape, each size rounded up to a sixteenth of its
# power of two (197 -> 208, 768 -> 768, 6304 -> 6656): the class's tuning shape ranked tiles
# that leave most of a big GPU idle for them (64 x 64 tiles give 2 x 12 workgroups for
# 128 x 768), and whole powers of two ranked tiles by a wave count the product does not have
# (ViT-B/16's 6304 x 768 x 3072 tuned as 8192 x 1024 x 4096 picked a tile 11% slower on it).
# Their default launches at least BUSY workgroups where it can (two per SM of a large GPU),
# splitting K where the output alone is too small.
BUCKET_MACS = 1 << 22
# "large" f32 products up to this many multiply-adds are timed on their own rounded shape (a
# transformer's linear layers at batch 32), bigger ones on the class's 2048³ (their many
# waves make the tile's wave count matter less, and timing them would take seconds)
OWN_SHAPE_MACS = 1 << 35
BUSY = 264
_BUCKET_SET = ("64x64x16_4x4", "32x64x16_4x4", "32x32x16_4x4", "32x32x16_4x4_s2",
               "32x32x16_4x4_s4", "32x32x16_4x4_s8", "32x64x16_4x4_s2", "32x64x16_4x4_s4",
               "32x64x16_4x4_s8", "64x64x16_4x4_s4", "64x128x16_4x8", "64x128x8_8x8_u",
               "128x64x8_8x8_u", "64x128x8_8x8_u_e", "128x64x16_8x8_u_s4")


@functools.lru_cache(maxsize=1024)
def _parsed(cls, name: str) -> TileConfig:  # (a refused name raises: never cached)
    return cls._parse(name)


def _pow2(x: int) -> int:
    return 1 << max(int(x) - 1, 15).bit_length()


def _bucket(x: int) -> int:
    step = max(_pow2(x) // 16, 16)
    return -(-int(x) // step) * step


def bucket_class(m: int, n: int, k: int) -> str:
    return f"m{_bucket(m)} n{_bucket(n)} k{_bucket(k)}"


def is_bucket(cls: str) -> bool:
    return cls.startswith("m")


def tune_shape(cls: str) -> tuple[int, int, int]:
    """The (M, N, K) a class is tuned on ("large m.. n.. k..": a large product's own)."""
    if cls.startswith("large m"):
        cls = cls[len("large "):]
    if is_bucket(cls):
        m, n, k = (int(part[1:]) for part in cls.split())
        return m, n, k
    return _TUNE_SHAPES[cls]


def _blocks(name: str, m: int, n: int) -> int:
    c = TileConfig.parse(name)
    return -(-m // c.bm) * -(-n // c.bn)


def bucket_default(m: int, n: int, k: int, fits: set[str]) -> str:
    """A bucket's default tile: the largest of 64x64, 32x64, 32x32 that launches BUSY
    workgroups, else 32x32 with the smallest split of K (2, 4, 8) that does while each split
    keeps 128 of K (the largest such split if none does)."""
    for name in ("64x64x16_4x4", "32x64x16_4x4", "32x32x16_4x4"):
        if name in fits and _blocks(name, m, n) >= BUSY:
            return name
    splits = [s for s in (2, 4, 8) if f"32x32x16_4x4_s{s}" in fits and k // s >= 128]
    for s in splits:
        if _blocks("32x32x16_4x4", m, n) * s >= BUSY:
            return f"32x32x16_4x4_s{s}"
    if splits:
        return f"32x32x16_4x4_s{splits[-1]}"
    return "32x32x16_4x4" if "32x32x16_4x4" in fits else sorted(fits)[0]


def bucket_set() -> tuple[str, ...]:
    return _BUCKET_SET
