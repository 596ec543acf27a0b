"""One axis of a separable resize (ONNX's Resize in linear and cubic modes, antialiased or
not): each output position a weighted sum of taps along the axis, the taps' indices and
weights computed on the host (resize_axis.wgsl)."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid

WG = 256
DTYPE_NAMES = ("f32", "f16", "f64")


class ResizeAxis(BuiltinKernel):
    """out (outer, m, inner) = taps of x (outer, n, inner) along the middle axis: idx (m, T)
    i32 in range, w (m, T + 1) weights (f32; f64 for f64 x), the last column 1 where the
    output position takes ``value`` instead."""

    name = "resize_axis"
    inputs = ("x", "idx", "w")
    dtypes = DTYPE_NAMES
    workgroup_size = WG
    not_in_place = "an output position reads several positions of x"
    description = "out[o, j, i] = sum_t w[j, t] x[o, idx[j, t], i]: one axis of a resize"
    params = (Param("outer", "u32", doc="x's size before the axis"),
              Param("inner", "u32", doc="x's size after the axis"),
              Param("value", "f32", 0.0, "the value of an extrapolated position"))

    def check(self, inputs, output, params) -> None:
        x, idx, w = inputs
        m, taps = idx.shape if idx.ndim == 2 else (0, 0)
        outer, inner = params["outer"], params["inner"]
        work = "f64" if x.dtype == "f64" else "f32"
        if x.dtype != output.dtype or idx.dtype != "s32" or w.dtype != work:
            raise DtypeError(f"{self.name}: x {x.dtype}, idx {idx.dtype}, w {w.dtype}, out "
                             f"{output.dtype}; expected out of x's dtype, s32 idx, {work} w")
        n = x.size // max(outer * inner, 1)
        if w.shape != (m, taps + 1) or not 0 < taps <= 64 or \
                x.size != outer * n * inner or output.size != outer * m * inner:
            raise ShapeError(f"{self.name}: x {x.shape}, idx {idx.shape}, w {w.shape}, out "
                             f"{output.shape} do not fit outer {outer}, inner {inner}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), (("taps", inputs[1].shape[1]),))

    def render(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        src = shaders.render(shaders.load("image/resize_axis.wgsl"), {
            "T": dt.wgsl, "W": "f64" if dt.name == "f64" else "f32",
            "TAPS": dict(key.constants)["taps"], "F16": dt.name == "f16", "WG": WG},
            name="image/resize_axis.wgsl")
        return src, (("total", "u32"), ("n", "u32"), ("m", "u32"), ("inner", "u32"),
                     ("value", "f32"))

    def launches(self, inputs, output, params, device):
        x, idx, _ = inputs
        total = output.size
        if total == 0:
            return []
        outer, inner = params["outer"], params["inner"]
        n = x.size // max(outer * inner, 1)
        return [Launch(fold_grid(math.ceil(total / WG), device, self.name),
                       {"total": total, "n": n, "m": idx.shape[0], "inner": inner,
                        "value": params["value"]})]


RESIZE_AXIS = ResizeAxis()
