"""complex_prod (cprod.wgsl): the products of complex (c64, c128) rows, a chunk of each row per
invocation; run repeatedly (each run divides the row length by the chunk) down to one."""

from __future__ import annotations

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid


def _positive(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"expected a positive int, got {value!r}"
    return None


class ComplexProd(BuiltinKernel):
    """out (rows × max(1, ceil(n / chunk))) = the products of chunk-long pieces of x's rows (rows ×
    n), complex multiplication in order (in the parts' dtype: f32, or f64 for c128)."""

    name = "complex_prod"
    inputs = ("x",)
    dtypes = ("c64", "c128")
    workgroup_size = 64
    chunk = 64  # elements one invocation multiplies
    description = "products of chunks of complex rows"
    not_in_place = "complex_prod combines many elements of x into each output element"
    params = (Param("rows", "u32", doc="rows of x", check=_positive),)

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if x.dtype not in self.dtypes or output.dtype != x.dtype:
            raise DtypeError(f"complex_prod: x is {x.dtype} and out is {output.dtype}; both "
                             f"must be one complex dtype (c64 or c128)")
        rows = params["rows"]
        if x.size % rows or output.size != rows * self.parts(x.size // rows):
            raise ShapeError(f"complex_prod: x {x.shape} as {rows} rows gives out of "
                             f"{rows} × ceil(n / {self.chunk}) (at least 1); out is "
                             f"{output.shape}")

    def parts(self, n: int) -> int:
        """Products per row from rows of n (an empty row's is 1)."""
        return max(1, -(-n // self.chunk))

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), ())

    def render(self, key: PipelineKey):
        src = shaders.render(shaders.load("reduce/cprod.wgsl"), {
            "WG": self.workgroup_size, "R": DTYPES[key.dtypes[0]].part.wgsl})
        return src, (("rows", "u32"), ("n", "u32"), ("m", "u32"), ("chunk", "u32"))

    def launches(self, inputs, output, params, device):
        rows = params["rows"]
        n = inputs[0].size // rows
        m = self.parts(n)
        return [Launch(fold_grid(-(-rows * m // self.workgroup_size), device, self.name),
                       {"rows": rows, "n": n, "m": m, "chunk": self.chunk})]


COMPLEX_PROD = ComplexProd()
