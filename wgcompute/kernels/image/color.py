"""The per-pixel colour kernels (invert, brightness_contrast, threshold, grayscale;
image_color.wgsl) and generate_gradient (image_gradient.wgsl)."""

from __future__ import annotations

from ...errors import ShapeError
from ..core.base import Param
from .image import DIRECTIONS, ImageKernel, _finite, check_image, same_image

# -- per-pixel colour kernels ----------------------------------------------------------------------
_LD = "let v = src_ld((y * p.W + x) * C + c);\n    "


class _Pointwise(ImageKernel):
    family = "image_color.wgsl"
    inputs = ("src",)
    op = ""
    not_in_place = None  # each invocation reads and writes one pixel (or one float)

    def check(self, inputs, output, params):
        same_image(self.name, inputs[0], output)

    def templates(self, key, rgba):
        return {"OP": _LD + self.op}

    def values(self, inputs, output, params):
        return {n: params[n] for n, _ in self.extra}


class Invert(_Pointwise):
    name = "invert"
    op = "return keep_alpha(1.0 - v, v);"
    description = "1 - x (RGBA8: 255 - x, alpha kept)"


class BrightnessContrast(_Pointwise):
    name = "brightness_contrast"
    extra = (("brightness", "f32"), ("contrast", "f32"))
    params = (Param("brightness", "f32", 0.0, "added (RGBA8: in units of 255)", _finite),
              Param("contrast", "f32", 1.0, "factor about mid-grey 0.5", _finite))
    op = "return keep_alpha((v - 0.5) * p.contrast + 0.5 + p.brightness, v);"
    description = "(x - 0.5) * contrast + 0.5 + brightness (RGBA8 as unorm, alpha kept)"


class Threshold(_Pointwise):
    name = "threshold"
    extra = (("level", "f32"),)
    params = (Param("level", "f32", 0.5, "x >= level gives 1, else 0 (RGBA8: unorm)",
                    _finite),)
    op = "return keep_alpha(select(V(0.0), V(1.0), v >= V(p.level)), v);"
    description = "1 where x >= level else 0, per channel (RGBA8 as unorm, alpha kept)"


class Grayscale(_Pointwise):
    name = "grayscale"
    description = ("ITU-R BT.601 luma 0.299 R + 0.587 G + 0.114 B; RGBA8 keeps alpha; f32 "
                   "(H, W, 3|4) gives (H, W) luma, or the input's shape (alpha kept)")

    def check(self, inputs, output, params):
        src = inputs[0]
        check_image(self.name, src, "input")
        if src.dtype == "u8":
            same_image(self.name, src, output)
            return
        if src.ndim != 3 or src.shape[2] not in (3, 4):
            raise ShapeError(f"{self.name}: input is f32 {src.shape}; expected (H, W, 3) or "
                             f"(H, W, 4) colour")
        h, w = src.shape[:2]
        allowed = [(h, w), (h, w, 1), src.shape]
        if output.dtype != "f32" or output.shape not in allowed:
            raise ShapeError(f"{self.name}: output is {output.dtype} {output.shape}; expected "
                             f"f32 {(h, w)} or {src.shape}")

    def output_spec(self, inputs, params):
        src = inputs[0]
        if src.dtype == "f32" and src.ndim == 3:
            return src.shape[:2], "f32"
        return src.shape, src.dtype

    def in_place_refusal(self, inputs, output, aliased):
        if inputs[0].dtype == "f32":  # one invocation per channel reads the pixel's others
            return "grayscale of an f32 image reads every channel of a pixel for each one"
        return None

    def templates(self, key, rgba):
        if rgba:
            op = ("let v = src_ld(y * p.W + x);\n    let l = dot(v.xyz, vec3<f32>(0.299, 0.587, "
                  "0.114));\n    return vec4<f32>(l, l, l, v.w);")
        else:
            op = ("let b = (y * p.W + x) * C;\n    if (c == 3u) {\n        return src_ld(b + "
                  "3u);\n    }\n    return 0.299 * src_ld(b) + 0.587 * src_ld(b + 1u) + 0.114 * "
                  "src_ld(b + 2u);")
        return {"OP": op}


# -- generate_gradient -----------------------------------------------------------------------------
class GenerateGradient(ImageKernel):
    name = "generate_gradient"
    family = "image_gradient.wgsl"
    inputs = ()
    extra = (("direction", "u32"), ("start", "f32"), ("end", "f32"))
    params = (Param("direction", "direction", "horizontal",
                    "horizontal, vertical, diagonal or radial"),
              Param("start", "f32", 0.0, "value at t = 0", _finite),
              Param("end", "f32", 1.0, "value at t = 1", _finite))
    description = ("fills out (u8 (H, W, 4) or f32 (H, W[, C])) with start + (end - start) t, "
                   "t from 0 to 1 along the direction; RGBA8 alpha is 1")

    def check(self, inputs, output, params):
        check_image(self.name, output, "output")

    def templates(self, key, rgba):
        return {"PACK": "vec4<f32>(v, v, v, 1.0)" if rgba else "v"}

    def values(self, inputs, output, params):
        return {"direction": DIRECTIONS[params["direction"]], "start": params["start"],
                "end": params["end"]}

    def windows(self, inputs, output, params):
        return [lambda y0, y1: (y0, y1)]
