"""Products the tiled float matmul does not cover: integer and complex matmul (numpy's shapes,
batches broadcast through strides), one output element per invocation."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import check_u32_index, index_wgsl, uniform_fields, uniform_values
from ..matmul.matmul import matmul_shape


class MatmulInt(BuiltinKernel):
    """out = a · b for s32, u32 and s64 arrays with numpy's matmul rules (wrapping), c64 and
    c128 (``conj``: conj(a) · b), and f32 / f64 (for outer products: a sum of one product is
    exactly the product, where the tiled matmul adds it to +0.0)."""

    name = "linalg_matmul_int"
    inputs = ("a", "b")
    dtypes = ("s32", "u32", "s64", "c64", "c128", "f32", "f64")
    params = (Param("conj", "bool", False, "complex only: conjugate a"),)
    workgroup_size = 64
    description = "out = a · b for integers (numpy's matmul shapes), one element per invocation"
    not_in_place = "each output element reads a whole row of a and column of b"

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        for nm, x in (("a", a), ("b", b)):
            if x.dtype != output.dtype:
                raise DtypeError(f"{self.name}: {nm} is {x.dtype}, out is {output.dtype}; "
                                 f"dtypes must match")
        if params["conj"] and DTYPES[output.dtype].kind != "c":
            raise DtypeError(f"{self.name}: conj takes complex arrays (c64, c128), got "
                             f"{output.dtype}")
        want = matmul_shape(a.shape, b.shape).out
        if output.shape != want:
            raise ShapeError(f"{self.name}: out is {output.shape}, expected {want}")
        check_u32_index(self.name, output.shape)

    def output_spec(self, inputs, params):
        a, b = inputs
        return matmul_shape(a.shape, b.shape).out, a.dtype

    def key(self, inputs, output, params) -> PipelineKey:
        sh = matmul_shape(inputs[0].shape, inputs[1].shape)
        return PipelineKey(self.name, (output.dtype,), (("ndim", len(sh.batch)),
                                                        ("conj", bool(params["conj"]))))

    def render(self, key):
        consts = dict(key.constants)
        ndim = consts["ndim"]
        fields = (("m", "u32"), ("n", "u32"), ("k", "u32"), ("total", "u32"),
                  *uniform_fields(ndim, ("a", "b")))
        src = shaders.render(shaders.load("linalg/matmul_int.wgsl"), {
            "T": DTYPES[key.dtypes[0]].wgsl, "WG": self.workgroup_size,
            "COMPLEX": DTYPES[key.dtypes[0]].kind == "c", "CONJ": consts["conj"],
            "FIELDS": "\n".join(f"    {n}: {t}," for n, t in fields),
            "INDEX": index_wgsl(ndim, ("a", "b"), "bi")}, name="linalg/matmul_int.wgsl")
        return src, fields

    def launches(self, inputs, output, params, device):
        sh = matmul_shape(inputs[0].shape, inputs[1].shape)
        total = output.size
        if total == 0:
            return []
        u = {"m": sh.m, "n": sh.n, "k": sh.k, "total": total}
        u.update(uniform_values(sh.batch, {"a": (sh.a_strides, 0), "b": (sh.b_strides, 0)}))
        return [Launch(fold_grid(math.ceil(total / self.workgroup_size), device, self.name), u)]
