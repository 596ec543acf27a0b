"""Row norms and sums (one workgroup per row), cross products and identity matrices (one
invocation per element), for the linalg functions of the array namespace."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from .common import LinalgKernel

NORMS = ("2", "1", "inf", "-inf", "0", "p", "sum")


class RowNorm(LinalgKernel):
    """out[r] = the ``ord`` norm (or the sum: ord "sum") of row r of x (rows, len)."""

    name = "linalg_norm"
    inputs = ("x",)
    dtypes = ("f32", "f64", "s32", "u32", "s64", "c64", "c128")
    template = "linalg/norm.wgsl"
    params = (Param("ord", "str", "2", "2, 1, inf, -inf, 0, p or sum"),
              Param("p", "f32", 2.0, "the power of ord 'p'"))
    fields = (("rows", "u32"), ("len", "u32"), ("pw", "f32"))
    description = "vector norms and sums of the rows of a matrix, one workgroup per row"

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if params["ord"] not in NORMS:
            raise ArgumentError(f"{self.name}: ord {params['ord']!r}; expected one of {NORMS}")
        if x.dtype != output.dtype:
            raise DtypeError(f"{self.name}: x is {x.dtype}, out is {output.dtype}")
        if params["ord"] != "sum" and x.dtype not in ("f32", "f64"):
            raise DtypeError(f"{self.name}: norms take f32 or f64, got {x.dtype}")
        if params["ord"] == "p" and x.dtype != "f32":
            raise DtypeError(f"{self.name}: ord 'p' takes f32 (the GPU has no 64-bit pow), "
                             f"got {x.dtype}")
        if x.ndim != 2:
            raise ShapeError(f"{self.name}: x is {x.shape}; expected (rows, len)")
        self.check_shape("out", output.shape, x.shape[:1])

    def output_spec(self, inputs, params):
        return inputs[0].shape[:1], inputs[0].dtype

    def constants(self, inputs, output, params):
        return (("ORD", params["ord"]),)

    def batch(self, inputs, output, params):
        return inputs[0].shape[0]

    def uniform(self, inputs, output, params):
        x = inputs[0]
        inf = params["ord"] in ("inf", "-inf")
        return {"rows": x.shape[0], "len": x.shape[1],
                "pw": float("nan") if inf else params["p"]}


SMALL_MODES = ("cross", "eye", "rank", "pinv_w", "scale_cols")


class Small(BuiltinKernel):
    """One invocation per output element, by ``mode`` (small.wgsl): "cross" out (rows, 3) =
    a × b; "eye" out (..., n, n) = the identity; "rank" out (rows,) = the count of singular
    values a (rows, n) above b (rows,) times the largest; "pinv_w" out (rows, n) = their
    inverses above it, else 0; "scale_cols" out = a (..., r, n) with column j times b[..., j]."""

    name = "linalg_small"
    inputs = ("a", "b")
    dtypes = ("f32", "f64", "s32", "u32", "s64", "c64", "c128")
    workgroup_size = 64
    params = (Param("mode", "str", "cross", ", ".join(SMALL_MODES)),)
    description = "cross products, identities, ranks and pseudo-inverse scalings"
    not_in_place = "a cross product reads the other elements of its row"

    def _want(self, a, b, output, mode):
        """(a's shape, b's shape) that out's shape implies for ``mode``."""
        if mode == "cross":
            return output.shape, output.shape
        if mode == "rank":
            return (output.shape[0], a.shape[-1]), output.shape
        if mode == "pinv_w":
            return output.shape, output.shape[:1]
        return output.shape, output.shape[:-2] + output.shape[-1:]

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        mode = params["mode"]
        if mode not in SMALL_MODES:
            raise ArgumentError(f"{self.name}: mode {mode!r}; expected one of {SMALL_MODES}")
        if DTYPES[output.dtype].kind == "c" and mode not in ("eye", "scale_cols"):
            raise DtypeError(f"{self.name}: mode {mode!r} takes real arrays, got "
                             f"{output.dtype}")
        if output.ndim < (1 if mode == "rank" else 2) or (mode == "rank" and a.ndim != 2):
            raise ShapeError(f"{self.name}: out is {output.shape}; too few dimensions for "
                             f"mode {mode!r}")
        if mode == "eye":
            if output.shape[-1] != output.shape[-2]:
                raise ShapeError(f"{self.name}: out is {output.shape}; expected (..., n, n)")
            return
        if mode == "cross" and output.shape[-1] != 3:
            raise ShapeError(f"{self.name}: out is {output.shape}; expected (rows, 3)")
        for nm, x, want in zip(("a", "b"), (a, b), self._want(a, b, output, mode)):
            if x.dtype != output.dtype or x.shape != tuple(want):
                raise ShapeError(f"{self.name}: {nm} is {x.shape} {x.dtype}; expected "
                                 f"{tuple(want)} {output.dtype} for out {output.shape}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), (("MODE", params["mode"]),))

    def render(self, key):
        t = DTYPES[key.dtypes[0]].wgsl
        one = f"{t}(1.0, 0.0)" if DTYPES[key.dtypes[0]].kind == "c" else f"{t}(1)"
        src = shaders.render(shaders.load("linalg/small.wgsl"), {
            "T": t, "WG": self.workgroup_size, "ONE": one, "ZERO": f"{t}(0)",
            **dict(key.constants)}, name="linalg/small.wgsl")
        return src, (("total", "u32"), ("n", "u32"), ("r", "u32"))

    def launches(self, inputs, output, params, device):
        total = output.size
        if total == 0:
            return []
        mode = params["mode"]
        n = {"cross": 3, "rank": inputs[0].shape[-1]}.get(mode, output.shape[-1])
        r = output.shape[-2] if mode == "scale_cols" else 1
        return [Launch(fold_grid(math.ceil(total / self.workgroup_size), device, self.name),
                       {"total": total, "n": n, "r": r})]


class Take(BuiltinKernel):
    """out = the ``out.size`` elements of a from ``offset`` on (any dtype but u8)."""

    name = "linalg_take"
    inputs = ("a",)
    dtypes = ("f32", "f64", "s32", "u32", "s64", "c64", "c128")
    workgroup_size = 64
    params = (Param("offset", "u32", 0, "the first element of a to copy"),)
    description = "a contiguous run of elements, copied out of a workspace"
    not_in_place = "it reads other elements than the ones it writes"

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.dtype != output.dtype:
            raise DtypeError(f"{self.name}: a is {a.dtype}, out is {output.dtype}")
        if params["offset"] + output.size > a.size:
            raise ShapeError(f"{self.name}: {output.size} elements from {params['offset']} "
                             f"run past a's {a.size}")

    def render(self, key):
        src = shaders.render(shaders.load("linalg/take.wgsl"), {
            "T": DTYPES[key.dtypes[0]].wgsl, "WG": self.workgroup_size},
            name="linalg/take.wgsl")
        return src, (("total", "u32"), ("offset", "u32"))

    def launches(self, inputs, output, params, device):
        if output.size == 0:
            return []
        return [Launch(fold_grid(math.ceil(output.size / self.workgroup_size), device,
                                 self.name), {"total": output.size, "offset": params["offset"]})]
