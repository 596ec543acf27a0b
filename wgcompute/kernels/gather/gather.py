"""Gathers along an axis (take, take_along_axis: gather.wgsl), the check of their indices,
and the compaction of nonzero elements into their flat positions (compact.wgsl).

Elements move as bits, so every dtype gathers without its adapter feature. Indices are s32,
u32 or s64 (read as two words); a negative index counts from the end of the axis. The gather
clamps an index out of range (it never reads outside x); ``index_check`` finds the first such
index so that the caller refuses it."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Kernel, Launch, Param, PipelineKey, fold_grid

INDEX_DTYPES = ("s32", "u32", "s64")
WG = 256
COMPACT_ITEMS = 8
COMPACT_TILE = WG * COMPACT_ITEMS
_WORD = {1: "u32", 2: "u32", 4: "u32", 8: "vec2<u32>", 16: "vec4<u32>"}


def _bits(item: int) -> dict:
    """The template values that move an item of ``item`` bytes as bits."""
    packed = item < 4
    return {"T": _WORD[item], "PACKED": packed, "LANES": 4 // item if packed else 1,
            "BITS": 8 * item, "MASK": (1 << (8 * item)) - 1 if packed else 0}


def _nonzero_mask(dt: str) -> str:
    """WGSL bit masks under which a nonzero element of ``dt`` has a set bit (floats: all
    but the sign bits of each part)."""
    d = DTYPES[dt]
    words = max(1, d.itemsize // 4)
    if d.kind not in "fc":
        return "0xffffffffu" if words == 1 else f"{_WORD[d.itemsize]}(0xffffffffu)"
    if d.itemsize < 4:
        return "0x7fffu"
    part = d.itemsize // (2 if d.kind == "c" else 1)  # bytes per float part
    mask = []
    for w in range(words):
        last_of_part = (w * 4 + 4) % part == 0
        mask.append("0x7fffffffu" if last_of_part else "0xffffffffu")
    return mask[0] if words == 1 else f"{_WORD[d.itemsize]}({', '.join(mask)})"


def _u32_sized(where: str, *named) -> None:
    for name, n in named:
        if n >= 2**32:
            raise ShapeError(f"{where}: {name} has {n} elements; gathers address at most "
                             f"2**32 - 1")


_FIELDS = tuple((n, "u32") for n in ("total", "n", "m", "inner", "off", "vscalar"))


def _uniform(total: int, n: int, m: int = 0, inner: int = 1, off: int = 0,
             vscalar: int = 0) -> dict:
    return {"total": total, "n": n, "m": m, "inner": inner, "off": off, "vscalar": vscalar}


class Take(BuiltinKernel):
    """out (outer, m, inner) = x (outer, n, inner) at idx along the middle axis; with
    ``along`` idx has out's shape (take_along_axis), else it is 1-D (take)."""

    inputs = ("x", "idx")
    workgroup_size = WG
    not_in_place = "a gather reads other elements of x than the one it writes"

    def __init__(self, along: bool):
        self.along = along
        self.name = "take_along_axis" if along else "take"
        self.dtypes = tuple(DTYPES)
        self.params = tuple(Param(n, "u32", doc=doc) for n, doc in (
            ("outer", "x's size before the axis"), ("n", "x's axis length"),
            ("inner", "x's size after the axis")))
        self.description = ("out[o, j, c] = x[o, idx[o, j, c], c]" if along else
                            "out[o, j, c] = x[o, idx[j], c]")

    def _m(self, idx, params) -> int:
        outer, inner = params["outer"], params["inner"]
        if not self.along:
            return idx.size
        return idx.size // (outer * inner) if outer * inner else 0

    def output_spec(self, inputs, params):
        x, idx = inputs
        return (params["outer"], self._m(idx, params), params["inner"]), x.dtype

    def check(self, inputs, output, params) -> None:
        x, idx = inputs
        outer, n, inner = params["outer"], params["n"], params["inner"]
        if idx.dtype not in INDEX_DTYPES:
            raise DtypeError(f"{self.name}: idx is {idx.dtype}; expected one of "
                             f"{', '.join(INDEX_DTYPES)}")
        if output.dtype != x.dtype:
            raise DtypeError(f"{self.name}: out is {output.dtype} and x is {x.dtype}; dtypes "
                             f"must match")
        if outer * n * inner != x.size:
            raise ShapeError(f"{self.name}: outer {outer} · n {n} · inner {inner} is not x's "
                             f"{x.size} elements")
        m = self._m(idx, params)
        if output.size != outer * m * inner or (self.along and idx.size != output.size):
            raise ShapeError(f"{self.name}: out {output.shape} is not ({outer}, {m}, {inner})")
        _u32_sized(self.name, ("x", x.size), ("out", output.size))

    def key(self, inputs, output, params) -> PipelineKey:
        x, idx = inputs
        return PipelineKey(self.name, (idx.dtype,),
                           (("itemsize", DTYPES[x.dtype].itemsize),))

    def render(self, key: PipelineKey):
        item = dict(key.constants)["itemsize"]
        src = shaders.render(shaders.load("gather/gather.wgsl"), dict(
            _bits(item), IT=key.dtypes[0], MODE="take", ALONG=self.along, WG=WG),
            name="gather/gather.wgsl")
        return src, _FIELDS

    def launches(self, inputs, output, params, device):
        x, idx = inputs
        total = output.size
        if total == 0 or params["n"] == 0:
            return []
        lanes = max(1, 4 // DTYPES[x.dtype].itemsize)
        return [Launch(fold_grid(-(-total // (lanes * WG)), device, self.name),
                       _uniform(total=total, n=params["n"], m=self._m(idx, params),
                                inner=max(params["inner"], 1)))]


class IndexCheck(BuiltinKernel):
    """out[0] = min(out[0], the first i whose idx[i] is outside -n..n-1)."""

    name = "index_check"
    inputs = ("idx",)
    dtypes = ("u32",)
    workgroup_size = WG
    not_in_place = "the check writes one word"
    params = (Param("n", "u32", doc="the axis length the indices select along"),)
    description = "the first index out of range into out[0] (atomicMin)"

    def check(self, inputs, output, params) -> None:
        (idx,) = inputs
        if idx.dtype not in INDEX_DTYPES:
            raise DtypeError(f"index_check: idx is {idx.dtype}; expected one of "
                             f"{', '.join(INDEX_DTYPES)}")
        _u32_sized(self.name, ("idx", idx.size))

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (inputs[0].dtype,), ())

    def render(self, key: PipelineKey):
        src = shaders.render(shaders.load("gather/gather.wgsl"), dict(
            _bits(4), IT=key.dtypes[0], MODE="check", ALONG=False, WG=WG),
            name="gather/gather.wgsl")
        return src, _FIELDS

    def launches(self, inputs, output, params, device):
        total = inputs[0].size
        if total == 0:
            return []
        return [Launch(fold_grid(-(-total // WG), device, self.name),
                       _uniform(total=total, n=params["n"]))]


class Scatter(BuiltinKernel):
    """out[off + idx[j]·inner + c] = v[j, c] (v[0] with ``vscalar``) for a (m, inner) v:
    rows of a (n, inner) region of out written from v; the rest of out is left as it is.
    Indices must be in range (index_check them first)."""

    name = "scatter_rows"
    inputs = ("x", "idx")  # the rows written (named as in its WGSL), their indices
    workgroup_size = WG
    not_in_place = "a scatter writes other places of out than it reads of v"
    description = "out[off + idx[j]·inner + c] = v[j, c]: rows of a region written"

    def __init__(self):
        self.dtypes = tuple(DTYPES)
        self.params = (Param("n", "u32", doc="the region's rows"),
                       Param("inner", "u32", doc="elements per row"),
                       Param("off", "u32", 0, "the element of out the region starts at"),
                       Param("vscalar", "bool", False, "v is one value written everywhere"))

    def check(self, inputs, output, params) -> None:
        v, idx = inputs
        if idx.dtype not in INDEX_DTYPES:
            raise DtypeError(f"{self.name}: idx is {idx.dtype}; expected one of "
                             f"{', '.join(INDEX_DTYPES)}")
        if DTYPES[v.dtype].itemsize != DTYPES[output.dtype].itemsize:
            raise DtypeError(f"{self.name}: v is {v.dtype} and out is {output.dtype}; their "
                             f"items must be the same size")
        n, inner = params["n"], params["inner"]
        if params["off"] + n * inner > output.size:
            raise ShapeError(f"{self.name}: the region of {n}·{inner} elements from "
                             f"{params['off']} passes out's {output.size}")
        need = 1 if params["vscalar"] else idx.size * inner
        if v.size != need:
            raise ShapeError(f"{self.name}: v has {v.size} elements, expected {need}")
        _u32_sized(self.name, ("out", output.size), ("v", idx.size * inner))

    def key(self, inputs, output, params) -> PipelineKey:
        v, idx = inputs
        return PipelineKey(self.name, (idx.dtype,), (("itemsize", DTYPES[v.dtype].itemsize),))

    def render(self, key: PipelineKey):
        item = dict(key.constants)["itemsize"]
        src = shaders.render(shaders.load("gather/gather.wgsl"), dict(
            _bits(item), IT=key.dtypes[0], MODE="scatter", ALONG=False, WG=WG),
            name="gather/gather.wgsl")
        return src, _FIELDS

    def launches(self, inputs, output, params, device):
        v, idx = inputs
        total = idx.size * params["inner"]
        if total == 0:
            return []
        return [Launch(fold_grid(-(-total // WG), device, self.name),
                       _uniform(total=total, n=params["n"], m=idx.size,
                                inner=params["inner"], off=params["off"],
                                vscalar=int(params["vscalar"])))]


class Compact(BuiltinKernel):
    """"count": out[t] = the nonzero elements of tile t (COMPACT_TILE elements) of x;
    "compact": out = the flat positions of x's nonzero elements, in order, from the tiles'
    exclusive prefixes ``off``; "unravel": out[j] = (x[j] // stride) % size."""

    workgroup_size = WG
    not_in_place = "a compaction writes other places than it reads"

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"nonzero.{mode}"
        self.inputs = ("x", "off") if mode == "compact" else ("x",)
        self.dtypes = ("u32", "s32")
        self.params = (Param("stride", "u32", 1), Param("size", "u32", 1))
        self.description = f"{mode} step of a compaction"

    def check(self, inputs, output, params) -> None:
        _u32_sized(self.name, ("x", inputs[0].size))

    def output_spec(self, inputs, params):
        x = inputs[0]
        if self.mode == "count":
            return (max(1, -(-x.size // COMPACT_TILE)),), "u32"
        raise ShapeError(f"{self.name}: needs an output buffer (its size is the count)")

    def key(self, inputs, output, params) -> PipelineKey:
        x = inputs[0]
        return PipelineKey(self.name, (x.dtype,), (("mode", self.mode),))

    def render(self, key: PipelineKey):
        dt = key.dtypes[0]
        src = shaders.render(shaders.load("gather/compact.wgsl"), dict(
            _bits(DTYPES[dt].itemsize), NZ=_nonzero_mask(dt), MODE=self.mode, WG=WG,
            ITEMS=COMPACT_ITEMS), name="gather/compact.wgsl")
        return src, (("total", "u32"), ("stride", "u32"), ("size", "u32"))

    def launches(self, inputs, output, params, device):
        x = inputs[0]
        if x.size == 0 or output.size == 0:
            return []
        per = WG if self.mode == "unravel" else COMPACT_TILE
        return [Launch(fold_grid(-(-x.size // per), device, self.name),
                       {"total": x.size, "stride": params["stride"], "size": params["size"]})]


TAKE = Take(False)
TAKE_ALONG = Take(True)
INDEX_CHECK = IndexCheck()
SCATTER = Scatter()
COMPACT = {m: Compact(m) for m in ("count", "compact", "unravel")}


def gather_kernels() -> list[Kernel]:
    return [TAKE, TAKE_ALONG, INDEX_CHECK, SCATTER]


def compact_tiles(size: int) -> int:
    return max(1, math.ceil(size / COMPACT_TILE))
