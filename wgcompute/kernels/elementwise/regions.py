"""region_copy (regions.wgsl): a strided read of one array into a strided place of another,
the one program behind the array namespace's concat, stack, roll, flip and the like; and
repeat_gather (repeat.wgsl): an axis with each element repeated its own number of times."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import (
    MAX_DIMS,
    check_u32_index,
    coalesce,
    index_wgsl,
    step_values,
    uniform_fields,
    uniform_values,
)
from .elementwise import stepped_index

# the WGSL element a copy moves for each item size: bits only, so that no dtype's feature
# (shader-f16, shader-f64, shader-int64) is needed to move it; 1- and 2-byte items share
# u32 words (lanes)
_WORD = {1: "u32", 2: "u32", 4: "u32", 8: "vec2<u32>", 16: "vec4<u32>"}


def _check_ints(value) -> str | None:
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return f"expected a tuple of ints, got {value!r}"
    return None


def _check_offset(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        return f"expected a non-negative int (an element index), got {value!r}"
    return None


def _reach(shape, strides, offset) -> tuple[int, int]:
    """The lowest and highest element a region of ``shape`` reaches through ``strides``."""
    lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return lo, hi


class RegionCopy(BuiltinKernel):
    """out[out_offset + Σ i·out_strides] = a[a_offset + Σ i·a_strides] for every index i of
    ``shape``; the rest of out is left as it is. Any dtype: the bits move (1- and 2-byte
    items as lanes of u32 words, written atomically lane by lane)."""

    name = "region_copy"
    inputs = ("a",)
    dtypes = tuple(DTYPES)  # every dtype: the bits move
    workgroup_size = 256
    per_invocation = 4  # items per invocation: the index decoded once for them
    description = ("out[out_offset + i·out_strides] = a[a_offset + i·a_strides] over a "
                   "region (the rest of out unchanged)")
    not_in_place = "region_copy reads other elements of a than the one it writes"
    params = (
        Param("shape", "shape", doc="the region's shape", check=_check_ints),
        Param("a_strides", "strides", doc="a's element stride along each region dimension",
              check=_check_ints),
        Param("a_offset", "offset", 0, "the element of a the region's first element reads",
              check=_check_offset),
        Param("out_strides", "strides", doc="out's element stride along each region "
              "dimension", check=_check_ints),
        Param("out_offset", "offset", 0, "the element of out the region's first element "
              "writes", check=_check_offset))

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if DTYPES[a.dtype].itemsize != DTYPES[output.dtype].itemsize:
            raise DtypeError(f"region_copy: a is {a.dtype} and out is {output.dtype}; their "
                             f"items must be the same size")
        shape = tuple(int(v) for v in params["shape"])
        if any(n < 0 for n in shape):
            raise ShapeError(f"region_copy: shape {shape} has a negative size")
        for name, buf in (("a", a), ("out", output)):
            strides = tuple(params[f"{name}_strides"])
            if len(strides) != len(shape):
                raise ShapeError(f"region_copy: {name}_strides {strides} has {len(strides)} "
                                 f"entries; the region {shape} has {len(shape)} dimensions")
            if math.prod(shape):
                lo, hi = _reach(shape, strides, int(params[f"{name}_offset"]))
                if lo < 0 or hi >= buf.size:
                    raise ShapeError(f"region_copy: the region {shape} through {name}_strides "
                                     f"{strides} from {name}_offset "
                                     f"{params[f'{name}_offset']} reaches elements {lo}..{hi}; "
                                     f"{name} {buf.shape} has {buf.size}")
        self._plan(params)

    def output_spec(self, inputs, params):
        raise ShapeError("region_copy: needs an output buffer (it writes a region of it)")

    def _plan(self, params):
        shape = tuple(int(v) for v in params["shape"])
        check_u32_index(self.name, shape)
        sizes, (sa, so) = coalesce(shape, (tuple(int(v) for v in params["a_strides"]),
                                           tuple(int(v) for v in params["out_strides"])))
        if len(sizes) > MAX_DIMS:
            raise ShapeError(f"region_copy: the region {shape} needs {len(sizes)} dimensions; "
                             f"at most {MAX_DIMS} are supported")
        return sizes, sa, so

    def _words(self, params, item: int):
        """(word size in bytes, sizes, a strides, out strides, a offset, out offset) in
        words: where both sides step by one element along the innermost coalesced
        dimension and every size, stride and offset there allows, runs of 16 (8, 4) bytes
        move as one vec4<u32> (vec2, u32) item: one index decode per run, and one- and
        two-byte dtypes without atomics."""
        sizes, sa, so = self._plan(params)
        ao, oo = int(params["a_offset"]), int(params["out_offset"])
        if not sizes or sa[-1] != 1 or so[-1] != 1:
            return item, sizes, sa, so, ao, oo
        for word in (16, 8, 4):
            v = word // item
            if word <= item or any(x % v for x in (sizes[-1], ao, oo, *sa[:-1], *so[:-1])):
                continue
            return (word, sizes[:-1] + (sizes[-1] // v,), tuple(x // v for x in sa[:-1]) + (1,),
                    tuple(x // v for x in so[:-1]) + (1,), ao // v, oo // v)
        return item, sizes, sa, so, ao, oo

    def key(self, inputs, output, params) -> PipelineKey:
        word, sizes, *_ = self._words(params, DTYPES[output.dtype].itemsize)
        return PipelineKey(self.name, ("u32",), (("itemsize", word), ("dims", len(sizes))))

    def render(self, key: PipelineKey):
        c = dict(key.constants)
        ndim, item = c["dims"], c["itemsize"]
        fields = (("n", "u32"), *uniform_fields(ndim, ("a", "o")))
        head, index = [], index_wgsl(ndim, ("a", "o"), "i").split("\n")
        stepped = stepped_index(fields, ndim, ("a", "o"), "base")
        if stepped is not None:  # one decode per invocation, a carry per item
            fields, head, index, advance = stepped
            index = index + advance
        src = shaders.render(shaders.load("elementwise/regions.wgsl"), {
            "T": _WORD[item], "WG": self.workgroup_size, "U": self.per_invocation,
            "PACKED": item < 4, "LANES": 4 // item if item < 4 else 1, "BITS": 8 * item,
            "MASK": (1 << (8 * item)) - 1 if item < 4 else 0,
            "DIMS": "\n".join(f"    {n}: {t}," for n, t in fields[1:]),
            "HEAD": head, "INDEX": index})
        return src, fields

    def launches(self, inputs, output, params, device):
        n = math.prod(int(v) for v in params["shape"])
        if n == 0:
            return []
        _, sizes, sa, so, ao, oo = self._words(params, DTYPES[output.dtype].itemsize)
        u = uniform_values(sizes, {"a": (sa, ao), "o": (so, oo)})
        u.update(step_values(sizes, self.workgroup_size), n=math.prod(sizes))
        groups = -(-u["n"] // (self.workgroup_size * self.per_invocation))
        return [Launch(fold_grid(groups, device, self.name), u)]


REGION_COPY = RegionCopy()


class RepeatGather(BuiltinKernel):
    """out (outer × total × inner) = x (outer × n × inner) with element i of its middle axis
    repeated counts[i] times, given ``offsets`` (u32, n + 1: the counts' running sums from
    0). Any dtype: the bits move (1- and 2-byte items a u32 word per invocation)."""

    name = "repeat_gather"
    inputs = ("x", "offsets")
    dtypes = tuple(DTYPES)
    workgroup_size = 256
    description = "x's middle axis with element i repeated offsets[i + 1] - offsets[i] times"
    not_in_place = "repeat_gather writes each element of x to other places in out"
    params = (Param("outer", "u32", doc="x's elements before the repeated axis"),
              Param("inner", "u32", doc="x's elements after the repeated axis"))

    def check(self, inputs, output, params) -> None:
        x, offsets = inputs
        if DTYPES[x.dtype].itemsize != DTYPES[output.dtype].itemsize:
            raise DtypeError(f"repeat_gather: x is {x.dtype} and out is {output.dtype}; "
                             f"their items must be the same size")
        if offsets.dtype != "u32" or offsets.ndim != 1 or offsets.size < 2:
            raise DtypeError(f"repeat_gather: offsets is {offsets.shape} {offsets.dtype}; "
                             f"expected u32 running sums of at least one count")
        outer, inner = params["outer"], params["inner"]
        n = offsets.size - 1
        if outer * n * inner != x.size or output.size % max(outer * inner, 1):
            raise ShapeError(f"repeat_gather: x {x.shape} is not {outer} × {n} × {inner}, or "
                             f"out {output.shape} is not {outer} × total × {inner}")
        check_u32_index(self.name, output.shape)

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, ("u32",), (("itemsize", DTYPES[output.dtype].itemsize),))

    def render(self, key: PipelineKey):
        item = dict(key.constants)["itemsize"]
        src = shaders.render(shaders.load("elementwise/repeat.wgsl"), {
            "T": _WORD[item], "WG": self.workgroup_size, "PACKED": item < 4,
            "LANES": 4 // item if item < 4 else 1, "BITS": 8 * item,
            "MASK": (1 << (8 * item)) - 1 if item < 4 else 0})
        return src, (("size", "u32"), ("n", "u32"), ("total", "u32"), ("inner", "u32"))

    def launches(self, inputs, output, params, device):
        size = output.size
        if size == 0:
            return []
        item = DTYPES[output.dtype].itemsize
        lanes = 4 // item if item < 4 else 1
        outer, inner = params["outer"], params["inner"]
        words = -(-size // lanes)
        return [Launch(fold_grid(-(-words // self.workgroup_size), device, self.name),
                       {"size": size, "n": inputs[1].size - 1,
                        "total": size // (outer * inner), "inner": inner})]


REPEAT_GATHER = RepeatGather()
