"""Scatters that combine (ONNX's ScatterND and ScatterElements with a reduction): rows of
updates added, multiplied, maxed or mined into rows of an array in order (scatter_reduce.wgsl).
Repeated indices combine one after another, as ONNX defines them."""

from __future__ import annotations

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid

WG = 64
# op -> the WGSL of op(a, b); max and min of a nan give nan (as numpy's maximum, minimum)
COMBINE = {"add": "a + b", "mul": "a * b", "max": "select(max(a, b), a + b, a != a || b != b)",
           "min": "select(min(a, b), a + b, a != a || b != b)"}
INT_COMBINE = {"add": "a + b", "mul": "a * b", "max": "max(a, b)", "min": "min(a, b)"}
DTYPE_NAMES = ("f32", "f16", "f64", "s32", "u32", "s64")


class ScatterReduce(BuiltinKernel):
    """out[idx[j]·inner + c] = op(that, v[j, c]) for each row j of a (m, inner) v, in order."""

    inputs = ("v", "idx")
    workgroup_size = WG
    dtypes = DTYPE_NAMES
    not_in_place = "out is combined with v, read as it is before"
    description = "out[idx[j], c] = op(out[idx[j], c], v[j, c]), rows in order"

    def __init__(self, op: str):
        self.op = op
        self.name = f"scatter_{op}"
        self.params = (Param("inner", "u32", doc="elements per row"),)

    def check(self, inputs, output, params) -> None:
        v, idx = inputs
        if idx.dtype not in ("s32", "s64"):
            raise DtypeError(f"{self.name}: idx is {idx.dtype}; expected s32 or s64")
        if v.dtype != output.dtype:
            raise DtypeError(f"{self.name}: v is {v.dtype} and out is {output.dtype}; they "
                             f"must match")
        if v.size != idx.size * params["inner"]:
            raise ShapeError(f"{self.name}: v has {v.size} elements; expected "
                             f"{idx.size}·{params['inner']}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype, inputs[1].dtype))

    def render(self, key: PipelineKey):
        dt, it = (DTYPES[d] for d in key.dtypes)
        combine = (COMBINE if dt.kind == "f" else INT_COMBINE)[self.op]
        src = shaders.render(shaders.load("gather/scatter_reduce.wgsl"), {
            "T": dt.wgsl, "IT": it.name, "COMBINE": combine, "F16": dt.name == "f16",
            "WG": WG}, name="gather/scatter_reduce.wgsl")
        return src, (("m", "u32"), ("inner", "u32"))

    def launches(self, inputs, output, params, device):
        v, idx = inputs
        inner = params["inner"]
        if idx.size == 0 or inner == 0:
            return []
        return [Launch(fold_grid(-(-inner // WG), device, self.name),
                       {"m": idx.size, "inner": inner})]


SCATTER_REDUCE = {op: ScatterReduce(op) for op in COMBINE}

