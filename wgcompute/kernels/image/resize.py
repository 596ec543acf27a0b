"""resize (bilinear, half-pixel centers) and preprocess (resize, normalize, HWC -> CHW: a
model's input), on image_resize.wgsl."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ArgumentError, ShapeError
from ..core import shaders
from ..core.base import Param
from .image import ImageKernel, check_image, layout

# -- resize, preprocess ----------------------------------------------------------------------------
_RESIZE_MAIN = """if (g.x >= p.OW * OC || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    out_st(y * p.OW * OC + g.x, sample(y, g.x / OC, g.x % OC));"""

_PRE_MAIN = """if (g.x >= p.OW || g.y >= p.rows) {
        return;
    }
    let y = p.y0 + g.y;
    let ch = g.z;
    let s = sample(y, g.x, ${CH});
    let v = ${PICK};
    let m = vec4<f32>(p.m0, p.m1, p.m2, p.m3)[ch];
    let k = vec4<f32>(p.s0, p.s1, p.s2, p.s3)[ch];
    out_st((ch * p.OH + y) * p.OW + g.x, (v - m) * k);"""


def _resize_rows(h: int, oh: int):
    scale = h / oh

    def rows(y0, y1):
        a = math.floor((y0 + 0.5) * scale - 0.5) - 1  # one row of slack for f32 rounding
        b = math.floor((y1 - 0.5) * scale - 0.5) + 3
        return max(0, min(a, h - 1)), min(h, max(b, 1))
    return rows


def _check_size(name: str, size) -> tuple[int, int]:
    """A resize's size=(height, width): two non-negative ints, named as the user wrote them."""
    ok = isinstance(size, (list, tuple)) and len(size) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in size)
    if not ok:
        raise ArgumentError(f"{name}: param 'size': expected (height, width) as two "
                            f"non-negative ints, got {size!r}")
    return int(size[0]), int(size[1])


class Resize(ImageKernel):
    name = "resize"
    family = "image_resize.wgsl"
    inputs = ("src",)
    extra = (("sx", "f32"), ("sy", "f32"))
    params = (Param("size", "size", None, "(height, width) of the output (or give out)"),)
    description = ("bilinear resize, half-pixel centers (OpenCV INTER_LINEAR; PIL BILINEAR "
                   "when enlarging); size=(h, w) or the output's shape")

    def check(self, inputs, output, params):
        src = inputs[0]
        check_image(self.name, src, "input")
        check_image(self.name, output, "output")
        want = self._out_shape(src, params, output)
        if output.shape != want or output.dtype != src.dtype:
            raise ShapeError(f"{self.name}: output is {output.dtype} {output.shape}, expected "
                             f"{src.dtype} {want}")
        if src.size == 0 and output.size != 0:
            raise ShapeError(f"{self.name}: input {src.shape} is empty; nothing to sample")

    def _out_shape(self, src, params, output=None):
        size = params.get("size")
        if size is None:
            if output is None:
                raise ArgumentError(f"{self.name}: param 'size' is required when no output "
                                    f"buffer is given")
            size = output.shape[:2]
        return _check_size(self.name, size) + tuple(src.shape[2:])

    def output_spec(self, inputs, params):
        check_image(self.name, inputs[0], "input")
        return self._out_shape(inputs[0], params), inputs[0].dtype

    def templates(self, key, rgba):
        return {"MAIN": _RESIZE_MAIN}

    def values(self, inputs, output, params):
        src = layout(inputs[0])
        oh, ow, _ = self.out_dims(output)
        return {"sx": src.w / ow if ow else 1.0, "sy": src.h / oh if oh else 1.0}

    def windows(self, inputs, output, params):
        return [_resize_rows(inputs[0].shape[0], output.shape[0]), lambda y0, y1: (y0, y1)]


class Preprocess(Resize):
    name = "preprocess"
    dtypes = ("f32",)
    extra = (("sx", "f32"), ("sy", "f32")) + tuple((f"m{i}", "f32") for i in range(4)) + \
        tuple((f"s{i}", "f32") for i in range(4))
    params = (Param("size", "size", None, "(height, width) after resizing (None: as is)"),
              Param("mean", "floats", 0.0, "subtracted per channel (one value or C)"),
              Param("std", "floats", 1.0, "divided by, per channel (one value or C)"))
    description = ("model input: bilinear resize to size=(h, w) (half-pixel centers), "
                   "(x - mean) / std per channel on [0, 1] values (u8 / 255), HWC -> CHW f32; "
                   "RGBA8 gives 3 channels (alpha dropped)")

    @staticmethod
    def _channels(src) -> int:
        if src.dtype == "u8":
            return 3
        return src.shape[2] if src.ndim == 3 else 1

    def _out_shape(self, src, params, output=None):
        size = params.get("size")
        size = tuple(src.shape[:2]) if size is None else _check_size(self.name, size)
        return (self._channels(src),) + size

    def check(self, inputs, output, params):
        src = inputs[0]
        check_image(self.name, src, "input")
        c = self._channels(src)
        if c > 4:
            raise ShapeError(f"{self.name}: input has {c} channels; at most 4")
        want = self._out_shape(src, params)
        if output.dtype != "f32" or output.shape != want:
            raise ShapeError(f"{self.name}: output is {output.dtype} {output.shape}, expected "
                             f"f32 {want} (CHW)")
        for name in ("mean", "std"):
            if len(params[name]) not in (1, c):
                raise ArgumentError(f"{self.name}: param {name!r} has {len(params[name])} "
                                    f"values; expected 1 or {c} (one per channel)")
        if any(s == 0 for s in params["std"]):
            raise ArgumentError(f"{self.name}: param 'std' must not be 0")
        if src.size == 0 and output.size != 0:
            raise ShapeError(f"{self.name}: input {src.shape} is empty; nothing to sample")

    def output_spec(self, inputs, params):
        check_image(self.name, inputs[0], "input")
        return self._out_shape(inputs[0], params), "f32"

    def out_dims(self, output):
        c, h, w = output.shape
        return h, w, c

    def grid(self, inputs, output, params):
        c, h, w = output.shape
        return h, w, c

    def templates(self, key, rgba):
        main = shaders.render(_PRE_MAIN, {"CH": "0u" if rgba else "ch",
                                          "PICK": "s[ch]" if rgba else "s"},
                              name=f"{self.name} main")
        return {"MAIN": main}

    def values(self, inputs, output, params):
        v = super().values(inputs, output, params)
        c = output.shape[0]
        mean = params["mean"] * c if len(params["mean"]) == 1 else params["mean"]
        std = params["std"] * c if len(params["std"]) == 1 else params["std"]
        for i in range(4):
            v[f"m{i}"] = mean[i] if i < c else 0.0
            v[f"s{i}"] = 1.0 / std[i] if i < c else 1.0
        return v

    def windows(self, inputs, output, params):
        return [_resize_rows(inputs[0].shape[0], output.shape[1]), None]
