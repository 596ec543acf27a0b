"""The copy kernels: transpose (32×32 tiles in workgroup memory, transpose.wgsl), copy (bit
for bit, copy.wgsl) and strided_copy (a view read through element strides)."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import MAX_DIMS, check_u32_index, coalesce
from .elementwise import Elementwise, linear_launches
from .optable import ALL, OPS


class Transpose(BuiltinKernel):
    """out (C×R) = a (R×C) transposed, through 32×32 tiles in workgroup memory so that both
    the reads and the writes are coalesced."""

    name = "transpose"
    inputs = ("a",)
    dtypes = ("f32", "f64", "f16", "s32", "s64", "u32", "u64")  # (packed lanes share words)
    description = "out = a.T for a 2-D a"
    not_in_place = "transpose writes each element of a to another place in out"
    tile = 32
    rows_per_pass = 8  # a 32×8 workgroup moves a 32×32 tile in four passes

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.ndim != 2:
            raise ShapeError(f"transpose: a must be 2-D, got shape {a.shape}")
        if a.dtype != output.dtype:
            raise DtypeError(f"transpose: a is {a.dtype} and out is {output.dtype}; dtypes "
                             f"must match")
        if output.shape != a.shape[::-1]:
            raise ShapeError(f"transpose: out is {output.shape}, expected {a.shape[::-1]} for "
                             f"a {a.shape}")

    def output_spec(self, inputs, params):
        (a,) = inputs
        if a.ndim != 2:
            raise ShapeError(f"transpose: a must be 2-D, got shape {a.shape}")
        return a.shape[::-1], a.dtype

    def render(self, key: PipelineKey):
        t = DTYPES[key.dtypes[0]].wgsl
        src = shaders.render(shaders.load("elementwise/transpose.wgsl"), {
            "ENABLE": shaders.enable_directives([t]), "T": t, "TILE": self.tile,
            "ROWS": self.rows_per_pass})
        return src, (("R", "u32"), ("C", "u32"), ("TX", "u32"), ("TY", "u32"))

    def launches(self, inputs, output, params, device):
        r, c = inputs[0].shape
        if r == 0 or c == 0:
            return []
        tx, ty = math.ceil(c / self.tile), math.ceil(r / self.tile)
        return [Launch(fold_grid(tx * ty, device, self.name), {"R": r, "C": c, "TX": tx,
                                                               "TY": ty})]


class Copy(BuiltinKernel):
    """out = a bit for bit, as 16-byte words: any dtype, same element count (shapes may
    differ, as with the copy_buffer op)."""

    name = "copy"
    inputs = ("a",)
    dtypes = ALL + ("bool",)  # bool is stored as u8 is
    workgroup_size = 256
    description = "out = a, bit for bit (same dtype and element count)"
    not_in_place = None

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.dtype != output.dtype:
            raise DtypeError(f"copy: input is {a.dtype} and output is {output.dtype}; "
                             f"dtypes must match")
        if a.size != output.size:
            raise ShapeError(f"copy: input {a.shape} has {a.size} elements, output "
                             f"{output.shape} has {output.size}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, ("u32",), ())  # one pipeline moves every dtype

    def render(self, key: PipelineKey):
        src = shaders.render(shaders.load("elementwise/copy.wgsl"), {"WG": self.workgroup_size})
        return src, (("n", "u32"), ("p0", "u32"))

    def launches(self, inputs, output, params, device):
        words = -(-output.size * DTYPES[output.dtype].itemsize // 16)
        return linear_launches(words, 16, 2, self.workgroup_size, device, self.name, {"p0": 0})


def _check_strides(value) -> str | None:
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return f"expected a tuple of ints (element strides), got {value!r}"
    return None


def _check_offset(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        return f"expected a non-negative int (an element index), got {value!r}"
    return None


class StridedCopy(Elementwise):
    """out[i0, i1, ...] = a[offset + i0·strides[0] + i1·strides[1] + ...]: a transposed,
    sliced, reversed or broadcast copy of ``a`` into a contiguous ``out``, for every dtype."""

    vec4_rows = False  # its strides are the caller's: one element at a time
    not_in_place = "strided_copy reads other elements than the one it writes"

    def __init__(self):
        super().__init__("strided_copy", OPS["identity"], ALL + ("bool",), description=(
            "out = a read through element strides from an element offset (a transposed, "
            "sliced or broadcast copy)"))
        self.params = (
            Param("strides", "strides", doc="a's element stride along each out dimension "
                  "(0 repeats, negative walks backwards)", check=_check_strides),
            Param("offset", "offset", 0, "the element of a that out's first element reads",
                  check=_check_offset))

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.dtype != output.dtype:
            raise DtypeError(f"strided_copy: a is {a.dtype} and out is {output.dtype}; dtypes "
                             f"must match")
        strides, offset = tuple(params["strides"]), int(params["offset"])
        if len(strides) != output.ndim:
            raise ShapeError(f"strided_copy: strides {strides} has {len(strides)} entries; out "
                             f"{output.shape} has {output.ndim} dimensions")
        if output.size:
            lo = offset + sum((n - 1) * st for n, st in zip(output.shape, strides) if st < 0)
            hi = offset + sum((n - 1) * st for n, st in zip(output.shape, strides) if st > 0)
            if lo < 0 or hi >= a.size:
                raise ShapeError(f"strided_copy: out {output.shape} read with strides {strides} "
                                 f"from offset {offset} reaches elements {lo}..{hi}; a "
                                 f"{a.shape} has {a.size}")
        self._plan(inputs, output, params)

    def output_spec(self, inputs, params):
        raise ShapeError("strided_copy: needs an output buffer (its shape is not implied by "
                         "a and the strides)")

    def _plan(self, inputs, output, params):
        check_u32_index(self.name, output.shape)
        strides = tuple(int(v) for v in params["strides"])
        sizes, (steps,) = coalesce(output.shape, (strides,))
        if len(sizes) > MAX_DIMS:
            raise ShapeError(f"strided_copy: out {output.shape} with strides {strides} needs "
                             f"{len(sizes)} dimensions; at most {MAX_DIMS} are supported")
        return (False,), sizes, {"a": (steps, int(params["offset"]))}

    def key(self, inputs, output, params) -> PipelineKey:
        _, sizes, _ = self._plan(inputs, output, params)
        return PipelineKey(self.name, (output.dtype,), (("broadcast", len(sizes)),
                                                        ("full", (False,))))

    def launches(self, inputs, output, params, device):
        return self._broadcast_launches(inputs, output, params, device)
