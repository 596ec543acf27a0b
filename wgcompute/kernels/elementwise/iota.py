"""Values made from their index: iota (start + i·step, arange and linspace; iota.wgsl) and
triangle (eye, tril and triu over stacked matrices, as bits; triangle.wgsl)."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid

# an element as bits, by item size
_BITS = {1: "u32", 2: "u32", 4: "u32", 8: "vec2<u32>", 16: "vec4<u32>"}
# one's bits from its first two words: complex128's one has a zero imaginary part
_ONE = {8: "vec2<u32>(p.one0, p.one1)", 16: "vec4<u32>(p.one0, p.one1, 0u, 0u)"}


class Iota(BuiltinKernel):
    """out[i] = start + T(i)·step in out's dtype (numpy's arange fills f32 and f64 this
    way); with ``endpoint``, the last element is ``last`` (linspace's stop, exactly)."""

    name = "iota"
    inputs = ()
    dtypes = ("f32", "f64", "f16", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
    workgroup_size = 256
    description = "out[i] = start + i * step (the last element = last, with endpoint)"
    not_in_place = None
    params = (Param("start", "T", doc="the first value"),
              Param("step", "T", doc="the difference between neighbours"),
              Param("last", "T", 0, "the last element's value, with endpoint"),
              Param("endpoint", "bool", False, "set the last element to last"))

    def output_spec(self, inputs, params):
        raise ShapeError("iota: needs an output buffer (it has no inputs)")

    def check(self, inputs, output, params) -> None:
        if output.size >= 2**32:
            raise ShapeError(f"iota: out {output.shape} holds {output.size} elements; at most "
                             f"2**32 - 1")

    def render(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        t = dt.wgsl
        src = shaders.render(shaders.load("elementwise/iota.wgsl"), {
            "ENABLE": shaders.enable_directives([t]), "T": t, "OT": "u32" if dt.packed else t,
            "WG": self.workgroup_size, "PACKED": dt.packed, "LANES": dt.lanes,
            "BITS": dt.bits})
        return src, (("n", "u32"), ("endpoint", "u32"), ("start", t), ("step", t),
                     ("last", t))

    def launches(self, inputs, output, params, device):
        n = output.size
        if n == 0:
            return []
        items = -(-n // DTYPES[output.dtype].lanes)
        return [Launch(fold_grid(-(-items // self.workgroup_size), device, self.name),
                       {"n": n, "endpoint": int(params["endpoint"]), "start": params["start"],
                        "step": params["step"], "last": params["last"]})]


def _check_k(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            not -2**31 <= value < 2**31:
        return f"expected an int (a diagonal: 0 the main one, > 0 above), got {value!r}"
    return None


class Triangle(BuiltinKernel):
    """``eye`` (no input): one on diagonal k of each matrix, zero elsewhere; ``tril`` /
    ``triu``: x on and below (above) diagonal k, zero elsewhere. Over the last two
    dimensions of out (matrices stacked before them); any dtype: elements move as bits."""

    workgroup_size = 256
    dtypes = tuple(DTYPES)  # every dtype: the bits move
    not_in_place = None  # each invocation reads the word it writes

    def __init__(self, name: str):
        self.name = name
        self.inputs = () if name == "eye" else ("x",)
        self.description = {"eye": "ones on diagonal k, zeros elsewhere",
                            "tril": "x on and below diagonal k, zeros above",
                            "triu": "x on and above diagonal k, zeros below"}[name]
        self.params = (Param("k", "k", 0, "the diagonal (0 the main one, > 0 above it)",
                             check=_check_k),)

    def output_spec(self, inputs, params):
        if not inputs:
            raise ShapeError("eye: needs an output buffer (it has no inputs)")
        return inputs[0].shape, inputs[0].dtype

    def check(self, inputs, output, params) -> None:
        if output.ndim < 2:
            raise ShapeError(f"{self.name}: out {output.shape} must have at least two "
                             f"dimensions (the matrices' rows and columns)")
        if max(output.shape[-2:]) >= 2**31 or output.size >= 2**32:
            raise ShapeError(f"{self.name}: out {output.shape} is too large (rows and columns "
                             f"below 2**31, elements below 2**32)")
        if inputs:
            (x,) = inputs
            if x.shape != output.shape or x.dtype != output.dtype:
                raise DtypeError(f"{self.name}: x is {x.shape} {x.dtype} and out is "
                                 f"{output.shape} {output.dtype}; they must match")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, ("u32",),
                           (("itemsize", DTYPES[output.dtype].itemsize),))

    def render(self, key: PipelineKey):
        item = dict(key.constants)["itemsize"]
        one = _ONE.get(item, "p.one0")
        src = shaders.render(shaders.load("elementwise/triangle.wgsl"), {
            "T": _BITS[item], "HAS_X": bool(self.inputs), "PACKED": item < 4,
            "LANES": 4 // item if item < 4 else 1, "BITS": 8 * item,
            "MASK": (1 << (8 * item)) - 1 if item < 4 else 0, "ONE": one,
            "WG": self.workgroup_size})
        return src, (("n", "u32"), ("rows", "u32"), ("cols", "u32"), ("k", "i32"),
                     ("upper", "u32"), ("one0", "u32"), ("one1", "u32"))

    def launches(self, inputs, output, params, device):
        n = output.size
        if n == 0:
            return []
        dt = DTYPES[output.dtype]
        words = np.zeros(2, np.uint32)  # (a 16-byte one's last 8 bytes are 0: see _ONE)
        words.view(np.uint8)[:min(dt.itemsize, 8)] = np.ones(1, dt.numpy).view(np.uint8)[:8]
        lanes = 4 // dt.itemsize if dt.itemsize < 4 else 1
        rows, cols = output.shape[-2:]
        k = int(params["k"])
        k = max(-rows, min(cols, k))  # every diagonal past the matrix is the same
        return [Launch(fold_grid(math.ceil(n / lanes / self.workgroup_size), device,
                                 self.name),
                       {"n": n, "rows": rows, "cols": cols, "k": k,
                        "upper": int(self.name == "triu"), "one0": int(words[0]),
                        "one1": int(words[1])})]


IOTA = Iota()
EYE, TRIL, TRIU = Triangle("eye"), Triangle("tril"), Triangle("triu")
