"""Image kernels on RGBA8 (u8 (H, W, 4), one pixel per u32 word) and f32 (H, W[, C]) images:
what every image kernel shares (layouts, param converters, row bands under the binding limit)
and the separable filters' 1-D passes; the kernels are in filters.py, color.py and resize.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey

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
