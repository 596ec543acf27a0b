"""The image filters: separable gaussian_blur, blur and sharpen (two 1-D passes), and the 2-D
neighbourhood filters convolve2d and sobel (image_filter.wgsl, image_conv.wgsl)."""

from __future__ import annotations

from ...errors import ArgumentError, ShapeError
from ..core.base import Param
from .image import (
    _PASS_X,
    _PASS_Y,
    _PASS_Y_UNSHARP,
    MAX_RADIUS,
    MODE,
    MODES,
    ImageKernel,
    _finite,
    _halo,
    _positive,
    auto_radius,
    gaussian_weights,
    layout,
    same_image,
)


class _Separable(ImageKernel):
    """A two-pass separable filter: x pass into a temporary (RGBA as 16-bit unorm, so the
    intermediate is not rounded to 8 bits), then the y pass into the output."""

    inputs = ("image",)
    box = False
    unsharp = False
    not_in_place = None  # the first pass reads the image into a temporary

    def check(self, inputs, output, params):
        same_image(self.name, inputs[0], output)

    def passes(self, inputs, output, params):
        src = inputs[0]
        sigma = None if self.box else params["sigma"]
        r = params["radius"]
        if r is None:
            r = auto_radius(sigma)
        p = {"mode": MODES[params["mode"]], "radius": r, "amount": params.get("amount", 0.0)}
        tmp = ((src.shape[0], src.shape[1], 2), "u32") if src.dtype == "u8" else \
            (src.shape, "f32")
        second = (_PASS_Y_UNSHARP, ("tmp0", "in0", "tmp1"), "out", p) if self.unsharp else \
            (_PASS_Y, ("tmp0", "tmp1"), "out", p)
        return [tmp, gaussian_weights(r, sigma)], [(_PASS_X, ("in0", "tmp1"), "tmp0", p), second]


class GaussianBlur(_Separable):
    name = "gaussian_blur"
    description = ("gaussian blur, separable in two passes; weights exp(-d²/2σ²) normalized "
                   "over |d| <= radius (scipy.ndimage.gaussian_filter with that radius)")
    params = (Param("radius", "radius", None, "taps each side (None: round(4 sigma))"),
              Param("sigma", "f32", 1.0, "standard deviation in pixels", _positive), MODE)


class BoxBlur(_Separable):
    name = "blur"
    box = True
    description = "box blur: mean over (2r+1)² pixels (scipy.ndimage.uniform_filter)"
    params = (Param("radius", "radius", 1, "half width: the box is 2r+1 pixels"), MODE)

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        if params["radius"] is None:
            raise ArgumentError(f"{self.name}: param 'radius': expected an int in "
                                f"0..{MAX_RADIUS}, got None")


class Sharpen(_Separable):
    name = "sharpen"
    unsharp = True
    description = "unsharp mask: out = x + amount (x - gaussian_blur(x)); RGBA keeps alpha"
    params = (Param("amount", "f32", 1.0, "strength", _finite),
              Param("radius", "radius", None, "blur taps each side (None: round(4 sigma))"),
              Param("sigma", "f32", 1.0, "blur standard deviation", _positive), MODE)


# -- 2-D neighbourhood filters: convolve2d, sobel --------------------------------------------------
_CONV_BODY = """var acc = V(0.0);
    let hy = i32(p.KH / 2u);
    let hx = i32(p.KW / 2u);
    let xi = i32(x);
    let yi = i32(y);
    if (xi >= hx && xi + hx < i32(p.W) && yi >= hy && yi + hy < i32(p.H)) {
        // inside: weight (a, b) meets pixel (y + hy - a, x + hx - b), no border handling
        var row = i + (u32(hy) * p.W + u32(hx)) * C;
        var w = 0u;
        for (var a = 0u; a < p.KH; a = a + 1u) {
            var j = row;
            for (var b = 0u; b < p.KW; b = b + 1u) {
                acc = acc + weights_ld(w) * src_ld(j);
                w = w + 1u;
                j = j - C;
            }
            row = row - p.W * C;
        }
        out_st(i, keep_alpha(acc, src_ld(i)));
        return;
    }
    for (var a = 0; a < i32(p.KH); a = a + 1) {
        let yy = border(i32(y) + hy - a, i32(p.H));
        if (yy < 0) {
            continue;
        }
        for (var b = 0; b < i32(p.KW); b = b + 1) {
            let xx = border(i32(x) + hx - b, i32(p.W));
            if (xx < 0) {
                continue;
            }
            acc = acc + weights_ld(u32(a) * p.KW + u32(b))
                * src_ld((u32(yy) * p.W + u32(xx)) * C + c);
        }
    }
    out_st(i, keep_alpha(acc, src_ld(i)));"""

_SOBEL_BODY = """var gx = V(0.0);
    var gy = V(0.0);
    if (x >= 1u && x + 1u < p.W && y >= 1u && y + 1u < p.H) {
        let s = p.W * C;
        let a00 = src_ld(i - s - C);
        let a01 = src_ld(i - s);
        let a02 = src_ld(i - s + C);
        let a10 = src_ld(i - C);
        let a12 = src_ld(i + C);
        let a20 = src_ld(i + s - C);
        let a21 = src_ld(i + s);
        let a22 = src_ld(i + s + C);
        gx = (a02 + 2.0 * a12 + a22) - (a00 + 2.0 * a10 + a20);
        gy = (a20 + 2.0 * a21 + a22) - (a00 + 2.0 * a01 + a02);
        out_st(i, keep_alpha(sqrt(gx * gx + gy * gy) * p.scale, src_ld(i)));
        return;
    }
    for (var a = -1; a <= 1; a = a + 1) {
        let yy = border(i32(y) + a, i32(p.H));
        for (var b = -1; b <= 1; b = b + 1) {
            let xx = border(i32(x) + b, i32(p.W));
            if (yy < 0 || xx < 0) {
                continue;
            }
            let v = src_ld((u32(yy) * p.W + u32(xx)) * C + c);
            gx = gx + f32(b * (2 - abs(a))) * v;
            gy = gy + f32(a * (2 - abs(b))) * v;
        }
    }
    out_st(i, keep_alpha(sqrt(gx * gx + gy * gy) * p.scale, src_ld(i)));"""


class Convolve2d(ImageKernel):
    name = "convolve2d"
    family = "image_conv.wgsl"
    inputs = ("src", "weights")
    extra = (("KH", "u32"), ("KW", "u32"))
    params = (MODE,)
    description = ("2-D convolution with a user's f32 (KH, KW) kernel, both odd (flipped, as "
                   "scipy.ndimage.convolve); every channel, RGBA keeps alpha")

    def check(self, inputs, output, params):
        src, w = inputs
        same_image(self.name, src, output)
        if w.dtype != "f32" or w.ndim != 2:
            raise ShapeError(f"{self.name}: weights is {w.dtype} {w.shape}; expected a 2-D f32 "
                             f"kernel")
        if w.shape[0] % 2 == 0 or w.shape[1] % 2 == 0:
            raise ShapeError(f"{self.name}: weights is {w.shape}; both sides must be odd (the "
                             f"kernel is centred on the pixel)")

    def templates(self, key, rgba):
        return {"BODY": _CONV_BODY}

    def values(self, inputs, output, params):
        return {"KH": inputs[1].shape[0], "KW": inputs[1].shape[1]}

    def windows(self, inputs, output, params):
        h = layout(output).h
        r = inputs[1].shape[0] // 2
        return [_halo(h, r), None, lambda y0, y1: (y0, y1)]


class Sobel(ImageKernel):
    name = "sobel"
    family = "image_conv.wgsl"
    inputs = ("src",)
    extra = (("scale", "f32"),)
    params = (Param("scale", "f32", 1.0, "factor on the magnitude", _finite), MODE)
    description = ("edge magnitude hypot(sobel_y, sobel_x) per channel (scipy.ndimage.sobel); "
                   "RGBA keeps alpha, values saturate at 1")

    def check(self, inputs, output, params):
        same_image(self.name, inputs[0], output)

    def templates(self, key, rgba):
        return {"BODY": _SOBEL_BODY}

    def values(self, inputs, output, params):
        return {"scale": params["scale"]}

    def windows(self, inputs, output, params):
        return [_halo(layout(output).h, 1), lambda y0, y1: (y0, y1)]
