"""Data movement: transposes, row copies (concat, casts) and batch preprocessing of RGBA8
images into a model's input."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ArgumentError, DtypeError, ShapeError
from ..core.base import Param, PipelineKey
from .common import (
    _CONVERTERS,
    FLOATS,
    MAX_RANK,
    SHAPES,
    NNKernel,
    _ints,
    _merge_dims,
    _out_type,
)


# -- transpose -------------------------------------------------------------------------------------
class Transpose(NNKernel):
    """out = x with its axes permuted (numpy.transpose(x, perm))."""

    name = "nn_transpose"
    inputs = ("x",)
    params = (Param("perm", "perm", None, "the permutation (None: reversed axes)"), SHAPES)
    description = "out = numpy.transpose(x, perm), any rank up to 6"
    not_in_place = "transpose writes each element of x to another place"

    def _perm(self, x, params):
        perm = params["perm"]
        if perm is None:
            perm = tuple(range(len(x)))[::-1]
        if sorted(perm) != list(range(len(x))):
            raise ShapeError(f"{self.name}: perm {perm} is not a permutation of the "
                             f"{len(x)} axes of x {x}")
        return perm

    def out_shape(self, in_shapes, params):
        x = in_shapes[0]
        return tuple(x[a] for a in self._perm(x, params))

    def _plan(self, x, params):
        perm = self._perm(x, params)
        in_strides = [math.prod(x[a + 1:]) for a in range(len(x))]
        out = [x[a] for a in perm]
        merged = _merge_dims(out, [in_strides[a] for a in perm])
        if len(merged) > MAX_RANK:
            raise ShapeError(f"{self.name}: x {x} with perm {perm} needs {len(merged)} "
                             f"separate axes; at most {MAX_RANK}")
        return merged

    def check_shapes(self, shapes, params):
        x, out = shapes
        want = self.out_shape([x], params)
        if math.prod(out) != math.prod(want):
            raise ShapeError(f"{self.name}: out is {out}, expected {want}")

    def constants(self, shapes, params, device=None):
        return (("rank", len(self._plan(shapes[0], params))),)

    def render(self, key):
        rank = dict(key.constants)["rank"]
        fields = [("n", "u32")]
        for d in range(rank):
            fields += [(f"d{d}", "u32"), (f"s{d}", "u32")]
        idx = ["var rem = i;", "var src = 0u;"]
        for d in reversed(range(rank)):
            idx += [f"src = src + (rem % p.d{d}) * p.s{d};", f"rem = rem / p.d{d};"]
        body = "\n    ".join(idx + ["out[i] = x[src];"])
        return self.prelude(key, fields) + self.linear_main(body), tuple(fields)

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        u = {}
        for d, (size, (s,)) in enumerate(self._plan(x, params)):
            u.update({f"d{d}": size, f"s{d}": s})
        return self.linear_launch(math.prod(x), u, device)


# -- copies (concat, casts) ------------------------------------------------------------------------
class CopyRows(NNKernel):
    """out[r * dst_stride + dst_offset + j] = x[r * src_stride + src_offset + j] for r < rows,
    j < cols, converting f32 <-> f16 when x and out differ: a Concat input, a Gather of one
    index, a cast."""

    name = "nn_copy"
    inputs = ("x",)
    input_dtypes_follow_output = False
    params = (Param("rows", "count", None, "rows copied (None: 1)"),
              Param("cols", "count", None, "elements per row (None: x's size / rows)"),
              Param("src_stride", "count", None, "x elements per row (None: cols)"),
              Param("src_offset", "count", 0, "where row 0 starts in x"),
              Param("dst_stride", "count", None, "out elements per row (None: cols)"),
              Param("dst_offset", "count", 0, "where row 0 starts in out"), SHAPES)
    description = ("copy rows of x into rows of out at offsets and strides (Concat, Gather), "
                   "converting f32 <-> f16 when the dtypes differ")
    not_in_place = "it writes rows at other offsets than it reads"

    def _geometry(self, shapes, params):
        x = math.prod(shapes[0])
        rows = params["rows"] if params["rows"] is not None else 1
        if rows == 0:
            return 0, 0, 0, 0, 0, 0
        cols = params["cols"]
        if cols is None:
            if x % rows:
                raise ShapeError(f"{self.name}: x {shapes[0]} does not split into {rows} rows")
            cols = x // rows
        src = params["src_stride"] if params["src_stride"] is not None else cols
        dst = params["dst_stride"] if params["dst_stride"] is not None else cols
        return rows, cols, src, params["src_offset"], dst, params["dst_offset"]

    def check_shapes(self, shapes, params):
        rows, cols, src, soff, dst, doff = self._geometry(shapes, params)
        if not rows or not cols:
            return
        for name, stride, off, shape in (("x", src, soff, shapes[0]),
                                         ("out", dst, doff, shapes[1])):
            if (rows > 1 and cols > stride) or (rows - 1) * stride + off + cols \
                    > math.prod(shape):
                raise ShapeError(f"{self.name}: {rows} rows of {cols} at offset {off}, stride "
                                 f"{stride} do not fit {name} {shape}")

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        for b in [*inputs, output]:
            if b.dtype not in FLOATS:
                raise DtypeError(f"{self.name}: {b.dtype} is not one of {', '.join(FLOATS)}")

    def render(self, key):
        fields = (("n", "u32"), ("cols", "u32"), ("src", "u32"), ("soff", "u32"),
                  ("dst", "u32"), ("doff", "u32"))
        t = _out_type(key)
        body = (f"let r = i / p.cols;\n    let j = i % p.cols;\n"
                f"    out[r * p.dst + p.doff + j] = {t}(x[r * p.src + p.soff + j]);")
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        rows, cols, src, soff, dst, doff = self._geometry(
            self.logical(inputs, output, params), params)
        return self.linear_launch(rows * cols, {"cols": max(cols, 1), "src": src,
                                                "soff": soff, "dst": dst, "doff": doff},
                                  device)


# -- batch preprocessing ---------------------------------------------------------------------------
def _floats3(value):
    vals = [value] if isinstance(value, (int, float, np.number)) else list(value)
    if len(vals) not in (1, 3) or not all(math.isfinite(float(v)) for v in vals):
        raise ValueError(f"expected one finite number or three, got {value!r}")
    vals = [float(v) for v in vals]
    return tuple(vals * 3 if len(vals) == 1 else vals)


_CONVERTERS["floats3"] = _floats3
_CONVERTERS["size"] = lambda v: None if v is None else _ints(v, 2, 1)


class PreprocessBatch(NNKernel):
    """A batch of RGBA8 images (u8 (N, H, W, 4)) to a model's input: bilinear resize with
    half-pixel centers to ``size``, (x / 255 - mean) / std per channel, NHWC -> NCHW f32
    (alpha dropped): preprocess for many images at once."""

    name = "preprocess_batch"
    inputs = ("src",)
    dtypes = ("f32",)
    input_dtypes_follow_output = False
    params = (Param("size", "size", None, "(height, width) of the output (None: as is)"),
              Param("mean", "floats3", 0.0, "subtracted per channel (one value or three)"),
              Param("std", "floats3", 1.0, "divided by, per channel (one value or three)"),
              SHAPES)
    description = ("RGBA8 batch (N, H, W, 4) -> normalized f32 (N, 3, h, w): bilinear resize "
                   "(half-pixel centers), (x - mean) / std on [0, 1] values")
    not_in_place = "it reads neighbouring pixels"

    def out_shape(self, in_shapes, params):
        src = in_shapes[0]
        if len(src) != 4 or src[3] != 4:
            raise ShapeError(f"{self.name}: src is {src}; expected RGBA8 (N, H, W, 4)")
        h, w = params["size"] or src[1:3]
        return (src[0], 3, h, w)

    def output_spec(self, inputs, params):
        return super().output_spec(inputs, params)[0], "f32"

    def check(self, inputs, output, params):
        if inputs[0].dtype != "u8":
            raise DtypeError(f"{self.name}: src is {inputs[0].dtype}; expected u8 RGBA8")
        if any(v == 0 for v in params["std"]):
            raise ArgumentError(f"{self.name}: param 'std' must not be 0")
        super().check(inputs, output, params)

    def check_shapes(self, shapes, params):
        want = self.out_shape([shapes[0]], params)
        if tuple(shapes[1]) != want:
            raise ShapeError(f"{self.name}: out is {shapes[1]}, expected {want}")
        if math.prod(shapes[0][1:3]) == 0 and math.prod(want):
            raise ShapeError(f"{self.name}: src {shapes[0]} is empty; nothing to sample")

    def key(self, inputs, output, params):
        return PipelineKey(self.name, ("u32", "f32"), ())

    def render(self, key):
        fields = (("n", "u32"), ("H", "u32"), ("W", "u32"), ("OH", "u32"), ("OW", "u32"),
                  ("sy", "f32"), ("sx", "f32"), ("m0", "f32"), ("m1", "f32"), ("m2", "f32"),
                  ("k0", "f32"), ("k1", "f32"), ("k2", "f32"))
        body = """let ox = i % p.OW;
    let oy = (i / p.OW) % p.OH;
    let c = (i / (p.OW * p.OH)) % 3u;
    let n = i / (p.OW * p.OH * 3u);
    let fy = clamp((f32(oy) + 0.5) * p.sy - 0.5, 0.0, f32(p.H - 1u));
    let fx = clamp((f32(ox) + 0.5) * p.sx - 0.5, 0.0, f32(p.W - 1u));
    let y0 = u32(floor(fy));
    let x0 = u32(floor(fx));
    let y1 = min(y0 + 1u, p.H - 1u);
    let x1 = min(x0 + 1u, p.W - 1u);
    let base = n * p.H * p.W;
    let a = unpack4x8unorm(src[base + y0 * p.W + x0])[c];
    let b = unpack4x8unorm(src[base + y0 * p.W + x1])[c];
    let d = unpack4x8unorm(src[base + y1 * p.W + x0])[c];
    let e = unpack4x8unorm(src[base + y1 * p.W + x1])[c];
    let v = mix(mix(a, b, fx - f32(x0)), mix(d, e, fx - f32(x0)), fy - f32(y0));
    out[i] = (v - vec3<f32>(p.m0, p.m1, p.m2)[c]) * vec3<f32>(p.k0, p.k1, p.k2)[c];"""
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        src, out = self.logical(inputs, output, params)
        (m0, m1, m2), (s0, s1, s2) = params["mean"], params["std"]
        return self.linear_launch(math.prod(out), {
            "H": src[1], "W": src[2], "OH": out[2], "OW": out[3],
            "sy": src[1] / out[2] if out[2] else 1.0, "sx": src[2] / out[3] if out[3] else 1.0,
            "m0": m0, "m1": m1, "m2": m2, "k0": 1 / s0, "k1": 1 / s1, "k2": 1 / s2}, device)
