"""Image kernels on RGBA8 (u8 (H, W, 4), one pixel per u32 word) and f32 (H, W[, C]) images:
filters, colour ops, resize/preprocess, gradients; every launch binds at most a band of rows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Kernel, Launch, Param, PipelineKey

MODES = {"clamp": 0, "reflect": 1, "zero": 2}
DIRECTIONS = {"horizontal": 0, "vertical": 1, "diagonal": 2, "radial": 3}
MAX_RADIUS = 127  # the separable passes keep their 2r+1 weights in workgroup memory
WGX, WGY = 64, 4
# Largest byte range one launch binds per buffer; None means the adapter's
# max-storage-buffer-binding-size. Tests lower it to exercise the row-band path.
MAX_BINDING: int | None = None

_FMT = {"u8": "rgba8", "u32": "rgba16", "f32": "f32"}


# -- layouts ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """An image buffer as the shaders see it: H rows of W pixels of C elements, an element
    being a vec4 pixel (RGBA8: one u32 word; RGBA16 temporaries: two words) or one float."""

    fmt: str
    h: int
    w: int
    c: int

    @property
    def row_words(self) -> int:
        return self.w * self.c * (2 if self.fmt == "rgba16" else 1)


def layout(b) -> Layout:
    s = b.shape
    if b.dtype in ("u8", "u32"):
        return Layout(_FMT[b.dtype], s[0], s[1], 1)
    return Layout("f32", s[0], s[1], s[2] if len(s) == 3 else 1)


def check_image(kernel: str, b, what: str) -> None:
    if b.dtype == "u8":
        if b.ndim != 3 or b.shape[2] != 4:
            hint = (" (a uint8 photo as numpy gives it: make the buffer with "
                    "wgc.image.from_numpy(photo), which adds alpha and packs RGBA8)"
                    if b.ndim in (2, 3) else "")
            raise ShapeError(f"{kernel}: {what} is u8 {b.shape}; RGBA8 images are u8 "
                             f"(H, W, 4){hint}")
    elif b.dtype == "f32":
        if b.ndim not in (2, 3):
            raise ShapeError(f"{kernel}: {what} is f32 {b.shape}; float images are (H, W) or "
                             f"(H, W, C)")
    else:
        raise DtypeError(f"{kernel}: {what} is {b.dtype}; images are u8 (H, W, 4) RGBA8 or "
                         f"f32 (H, W) / (H, W, C)")


def same_image(kernel: str, src, out) -> None:
    check_image(kernel, src, "input")
    if out.shape != src.shape or out.dtype != src.dtype:
        raise ShapeError(f"{kernel}: output is {out.dtype} {out.shape}, expected "
                         f"{src.dtype} {src.shape} (the input's shape and dtype)")


# -- param converters (kernel-specific types; Param.type names them) -------------------------------
def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
        raise ValueError(f"expected an int, got {type(value).__name__} {value!r}")
    return int(value)


def _radius(value):
    if value is None:
        return None
    r = _int(value, "radius")
    if not 0 <= r <= MAX_RADIUS:
        raise ValueError(f"expected an int in 0..{MAX_RADIUS} (or None: from sigma), got {r}")
    return r


def _choice(table: dict):
    def conv(value):
        if not isinstance(value, str) or value not in table:
            raise ValueError(f"expected one of {', '.join(map(repr, table))}, got {value!r}")
        return value
    return conv


def _size(value):
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise ValueError(f"expected (height, width), got {value!r}")
    h, w = (_int(v, "size") for v in value)
    if h < 1 or w < 1:
        raise ValueError(f"expected positive (height, width), got {value!r}")
    return (h, w)


def _floats(value):
    vals = [value] if isinstance(value, (int, float, np.number)) else value
    try:
        out = tuple(float(v) for v in vals if not isinstance(v, (bool, str)))
    except TypeError:
        raise ValueError(f"expected a number or 1 to 4 numbers, got {value!r}") from None
    if isinstance(vals, (str, bytes)) or len(out) != len(vals) or not 1 <= len(out) <= 4 \
            or not all(math.isfinite(v) for v in out):
        raise ValueError(f"expected a finite number or 1 to 4 of them, got {value!r}")
    return out


_CONVERT = {"radius": _radius, "mode": _choice(MODES), "size": _size, "floats": _floats,
            "direction": _choice(DIRECTIONS)}


def _positive(v):
    return None if math.isfinite(v) and v > 0 else f"expected a finite number > 0, got {v}"


def _finite(v):
    return None if math.isfinite(v) else f"expected a finite number, got {v}"


MODE = Param("mode", "mode", "clamp", "border: clamp (edge), reflect (about the edge), zero")


# -- the shared machinery --------------------------------------------------------------------------
def _accessor(name: str, binding: int, fmt: str, write: bool) -> str:
    word = "f32" if fmt == "f32" else "u32"
    vt = "f32" if fmt == "f32" else "vec4<f32>"
    access = "read_write" if write else "read"
    base = f"p.b{binding}"
    lines = [f"@group(0) @binding({binding}) var<storage, {access}> {name}: array<{word}>;"]
    if not write:
        body = {"rgba8": f"return unpack4x8unorm({name}[i - {base}]);",
                "rgba16": f"let j = 2u * i - {base};\n    return vec4<f32>(unpack2x16unorm("
                          f"{name}[j]), unpack2x16unorm({name}[j + 1u]));",
                "f32": f"return {name}[i - {base}];"}[fmt]
        lines.append(f"fn {name}_ld(i: u32) -> {vt} {{\n    {body}\n}}")
    else:
        body = {"rgba8": f"{name}[i - {base}] = pack4x8unorm(v);",
                "rgba16": f"let j = 2u * i - {base};\n    {name}[j] = pack2x16unorm(v.xy);\n"
                          f"    {name}[j + 1u] = pack2x16unorm(v.zw);",
                "f32": f"{name}[i - {base}] = v;"}[fmt]
        lines.append(f"fn {name}_st(i: u32, v: {vt}) {{\n    {body}\n}}")
    return "\n".join(lines)


def binding_limit(device) -> int:
    return MAX_BINDING or device.limit("max-storage-buffer-binding-size")


class ImageKernel(BuiltinKernel):
    """Base of the image kernels: one invocation per output element (an RGBA pixel or one
    float), a 2-D grid over (elements of a row, rows), bands of rows where bindings are big."""

    dtypes = ("u8", "f32")
    family = ""
    extra: tuple[tuple[str, str], ...] = ()
    not_in_place = "it reads neighbouring pixels"

    def convert_param(self, p, value, dt):
        conv = _CONVERT.get(p.type)
        if conv is None:
            return super().convert_param(p, value, dt)
        try:
            return conv(value)
        except ValueError as e:
            raise ArgumentError(f"{self.name}: param {p.name!r}: {e}") from None

    # what subclasses adapt
    def templates(self, key: PipelineKey, rgba: bool) -> dict:
        return {}

    def values(self, inputs, output, params) -> dict:
        return {}

    def out_dims(self, output) -> tuple[int, int, int]:
        lay = layout(output)
        return lay.h, lay.w, lay.c

    def grid(self, inputs, output, params) -> tuple[int, int, int]:
        """(rows, elements per row, z) of the output the grid covers."""
        h, w, c = self.out_dims(output)
        return h, w * c, 1

    def windows(self, inputs, output, params) -> list:
        """Per storage binding: rows(y0, y1) -> (first, end) rows it needs for output rows
        [y0, y1), or None to bind it whole."""
        same = lambda y0, y1: (y0, y1)
        return [same] * (len(inputs) + 1)

    # machinery
    def key(self, inputs, output, params):
        oc = self.out_dims(output)[2]
        c = layout(inputs[0]).c if inputs else oc
        return PipelineKey(self.name, tuple(b.dtype for b in [*inputs, output]),
                           (("C", c), ("OC", oc)) + self.constants(inputs, output, params))

    def constants(self, inputs, output, params) -> tuple:
        return ()

    def render(self, key):
        names = list(self.inputs) + [self.output]
        fmts = [_FMT[d] for d in key.dtypes]
        rgba = (fmts[0] if self.inputs else fmts[-1]) != "f32"
        fields = [(n, "u32") for n in ("W", "H", "C", "OW", "OH", "OC", "y0", "rows", "mode")]
        fields += [(f"b{i}", "u32") for i in range(len(names))]
        fields += list(self.extra)
        subs = {
            "FIELDS": "\n".join(f"    {n}: {t}," for n, t in fields),
            "ACCESSORS": "\n".join(_accessor(n, i, f, i == len(names) - 1)
                                   for i, (n, f) in enumerate(zip(names, fmts, strict=True))),
            "UB": len(names),
            "V": "vec4<f32>" if rgba else "f32",
            "KEEP_ALPHA": "return vec4<f32>(v.xyz, orig.w);" if rgba else "return v;",
            "WGX": WGX, "WGY": WGY,
        }
        subs.update(dict(key.constants))
        subs.update(self.templates(key, rgba))
        src = shaders.render(shaders.load("image/image_common.wgsl") + "\n"
                             + shaders.load(f"image/{self.family}"), subs)
        return src, tuple(fields)

    def launches(self, inputs, output, params, device):
        metas = [*inputs, output]
        rows, row_elems, z = self.grid(inputs, output, params)
        if rows == 0 or row_elems == 0 or z == 0:
            return []
        limit = binding_limit(device)
        align = device.limit("min-storage-buffer-offset-alignment")
        wins = self.windows(inputs, output, params)
        totals = [(m.size * (4 if m.dtype == "u32" else
                             1 if m.dtype == "u8" else 4) + 3) // 4 * 4 for m in metas]
        row_bytes = [layout(m).row_words * 4 if w is not None else 0
                     for m, w in zip(metas, wins, strict=True)]
        for m, w, t in zip(metas, wins, totals, strict=True):
            if w is None and t > limit:
                raise ShapeError(f"{self.name}: a {m.dtype} {m.shape} buffer is {t} bytes, "
                                 f"more than one storage binding holds ({limit} bytes)")

        def plan(band):
            out = []
            for y0 in range(0, rows, band):
                y1 = min(rows, y0 + band)
                ranges = []
                for w, t, rb in zip(wins, totals, row_bytes, strict=True):
                    if w is None:
                        ranges.append((0, t))
                        continue
                    r0, r1 = w(y0, y1)
                    off = r0 * rb // align * align
                    ranges.append((off, max(4, r1 * rb - off)))
                out.append((y0, y1, ranges))
            return out

        max_wg = device.limit("max-compute-workgroups-per-dimension")
        band = min(rows, max_wg * WGY)
        while True:
            bands = plan(band)
            worst = max(size for _, _, rs in bands for _, size in rs)
            if worst <= limit:
                break
            if band == 1:
                raise ShapeError(f"{self.name}: one output row of {output.shape} needs a "
                                 f"{worst}-byte binding, more than this adapter's {limit}")
            band = max(1, band // 2)
        gx = math.ceil(row_elems / WGX)
        if gx > max_wg or z > max_wg:
            raise ShapeError(f"{self.name}: output {output.shape} is too wide for one grid "
                             f"({gx} workgroups, the adapter allows {max_wg})")
        in_dims = layout(inputs[0]) if inputs else None
        oh, ow, oc = self.out_dims(output)
        common = {"W": in_dims.w if in_dims else ow, "H": in_dims.h if in_dims else oh,
                  "C": in_dims.c if in_dims else oc, "OW": ow, "OH": oh, "OC": oc,
                  "mode": MODES.get(params.get("mode", "clamp"), params.get("mode", 0))}
        common.update(self.values(inputs, output, params))
        single = len(bands) == 1
        out = []
        for y0, y1, ranges in bands:
            u = dict(common, y0=y0, rows=y1 - y0)
            for i, (off, _) in enumerate(ranges):
                u[f"b{i}"] = 0 if single else off // 4
            gy = math.ceil((y1 - y0) / WGY)
            out.append(Launch((gx, gy, z), u, None if single else tuple(ranges)))
        return out


def _halo(h: int, r: int):
    return lambda y0, y1: (max(0, y0 - r), min(h, y1 + r))


def _all_rows(h: int):
    return lambda y0, y1: (0, h)


# -- separable filters: gaussian_blur, blur, sharpen -----------------------------------------------
class _SeparablePass(ImageKernel):
    """One 1-D pass of a separable filter (internal: gaussian_blur, blur and sharpen run two
    of these through Kernel.passes). Axis x reads the image; axis y reads the x pass."""

    family = "image_filter.wgsl"
    dtypes = ("u8", "u32", "f32")
    extra = (("radius", "u32"), ("amount", "f32"))
    params = (Param("mode", "u32", 0), Param("radius", "u32", 0), Param("amount", "f32", 0.0))

    def __init__(self, axis: str, unsharp: bool = False):
        self.axis = axis
        self.unsharp = unsharp
        self.name = f"separable_{axis}" + ("_unsharp" if unsharp else "")
        self.inputs = ("tmp", "src", "wts") if unsharp else \
            (("src", "wts") if axis == "x" else ("tmp", "wts"))

    def in_place_refusal(self, inputs, output, aliased):
        # sharpen's second pass reads the image only at the pixel it writes
        if self.unsharp and aliased == (self.inputs.index("src"),):
            return None
        return self.not_in_place

    def templates(self, key, rgba):
        store = "out_st(i, acc);"
        if self.unsharp:
            store = "let o = src_ld(i);\n    out_st(i, keep_alpha(o + p.amount * (o - acc), o));"
        along_x = self.axis == "x"
        return {"POS": "x" if along_x else "y", "LEN": "p.W" if along_x else "p.H",
                "STEP": "C" if along_x else "p.W * C", "LD": f"{self.inputs[0]}_ld",
                "STORE": store}

    def values(self, inputs, output, params):
        return {k: params[k] for k in ("radius", "amount")}

    def windows(self, inputs, output, params):
        same = lambda y0, y1: (y0, y1)
        if self.axis == "x":
            return [same, None, same]
        h = layout(output).h
        return [_halo(h, params["radius"])] + [same] * (len(inputs) - 2) + [None, same]


_PASS_X = _SeparablePass("x")
_PASS_Y = _SeparablePass("y")
_PASS_Y_UNSHARP = _SeparablePass("y", unsharp=True)


def gaussian_weights(radius: int, sigma: float | None) -> np.ndarray:
    """The 2r+1 taps exp(-d^2 / (2 sigma^2)), |d| <= radius, normalized to sum 1 (f64 math,
    f32 result); sigma None gives a box (all weights equal)."""
    d = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.ones_like(d) if sigma is None else np.exp(-d * d / (2.0 * sigma * sigma))
    return (w / w.sum()).astype(np.float32)


def auto_radius(sigma: float) -> int:
    """scipy's default truncation (4 sigma), capped at MAX_RADIUS."""
    return min(MAX_RADIUS, int(4.0 * sigma + 0.5))


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


def image_kernels() -> list[Kernel]:
    return [GaussianBlur(), BoxBlur(), Sharpen(), Grayscale(), Preprocess(), GenerateGradient(),
            Resize(), BrightnessContrast(), Invert(), Threshold(), Sobel(), Convolve2d()]
