"""The pool kernels: max and average pools over 1-D and 2-D windows, global pools, and the
pooled output size."""

from __future__ import annotations

import math

from ...errors import ShapeError
from ..core.base import REQUIRED, Launch, Param, fold_grid
from .common import (
    SHAPES,
    NNKernel,
    _out_type,
)


# -- pools -----------------------------------------------------------------------------------------
def pool_out_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int,
                  dilation: int = 1, ceil_mode: bool = False) -> int:
    """ONNX's pool (and convolution) output length on one axis, explicit pads."""
    span = (k - 1) * dilation + 1
    num = size + pad_begin + pad_end - span
    if num < 0:
        return 0
    out = (-(-num // stride) if ceil_mode else num // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1  # the last window must start inside the input or its leading pad
    return out


class Pool(NNKernel):
    """Max or average pooling over the last two axes of (N, C, H, W)."""

    name = "nn_pool"
    inputs = ("x",)
    params = (Param("mode", "choice:max|avg", "max", "max or avg"),
              Param("kernel", "pair", REQUIRED, "(kh, kw)"),
              Param("strides", "pair", (1, 1), "(sh, sw)"),
              Param("pads", "pads", (0, 0, 0, 0), "(top, left, bottom, right)"),
              Param("dilations", "pair", (1, 1), "(dh, dw), max pooling"),
              Param("count_include_pad", "bool", False,
                    "avg: divide by the whole window (padding counted) instead of the "
                    "elements inside the input"),
              Param("ceil_mode", "bool", False, "output size rounded up (for out=None)"),
              SHAPES)
    description = "max / average pooling over H and W of (N, C, H, W), explicit pads"
    not_in_place = "pooling reads neighbouring elements"

    def out_shape(self, in_shapes, params):
        n, c, h, w = self._nchw(in_shapes[0])
        (kh, kw), (sh, sw) = params["kernel"], params["strides"]
        (dh, dw), (pt, pl, pb, pr) = params["dilations"], params["pads"]
        ceil = params["ceil_mode"]
        return (n, c, pool_out_size(h, kh, sh, pt, pb, dh, ceil),
                pool_out_size(w, kw, sw, pl, pr, dw, ceil))

    def _nchw(self, s):
        if len(s) != 4:
            raise ShapeError(f"{self.name}: x is {s}; expected (N, C, H, W)")
        return s

    def check_shapes(self, shapes, params):
        x, out = self._nchw(shapes[0]), shapes[1]
        want = self.out_shape([x], params)
        if tuple(out) != want:
            raise ShapeError(f"{self.name}: out is {tuple(out)}; expected {want} for x {x} "
                             f"with these kernel, strides, pads and ceil_mode")

    def constants(self, shapes, params, device=None):
        (kh, kw), (dh, dw) = params["kernel"], params["dilations"]
        return (("mode", params["mode"]), ("kh", kh), ("kw", kw), ("dh", dh), ("dw", dw),
                ("incl", params["count_include_pad"]))

    def render(self, key):
        c = dict(key.constants)
        fields = (("n", "u32"), ("H", "u32"), ("W", "u32"), ("OH", "u32"), ("OW", "u32"),
                  ("sh", "u32"), ("sw", "u32"), ("pt", "u32"), ("pl", "u32"), ("pb", "u32"),
                  ("pr", "u32"))
        t = _out_type(key)
        if c["mode"] == "max":
            init = "var m = -3.4028235e38;\n    var cnt = 0u;"
            acc = "m = max(m, f32(x[base + u32(ih) * p.W + u32(iw)]));\n                cnt = 1u;"
            fin = "select(0.0, m, cnt > 0u)"
        else:
            init = "var s = 0.0;\n    var cnt = 0u;\n    var padded = 0u;"
            acc = "s = s + f32(x[base + u32(ih) * p.W + u32(iw)]);\n                cnt = cnt + 1u;"
            # count_include_pad divides by the window clipped to the padded input (the pads
            # count, a ceil_mode overhang past them does not), as ONNX and PyTorch do
            fin = ("select(0.0, s / f32(padded), padded > 0u)" if c["incl"]
                   else "select(0.0, s / f32(cnt), cnt > 0u)")
        body = f"""let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let nc = i / (p.OW * p.OH);
    let base = nc * p.H * p.W;
    let ih0 = i32(oh * p.sh) - i32(p.pt);
    let iw0 = i32(ow * p.sw) - i32(p.pl);
    {init}
    for (var a = 0; a < {c['kh']}; a = a + 1) {{
        let ih = ih0 + a * {c['dh']};
        let pad_h = ih < i32(p.H + p.pb);
        let in_h = ih >= 0 && ih < i32(p.H);
        for (var b = 0; b < {c['kw']}; b = b + 1) {{
            let iw = iw0 + b * {c['dw']};
            {"if (pad_h && iw < i32(p.W + p.pr)) { padded = padded + 1u; }"
             if c["mode"] == "avg" else ""}
            if (in_h && iw >= 0 && iw < i32(p.W)) {{
                {acc}
            }}
        }}
    }}
    out[i] = {t}({fin});"""
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        x, out = self.logical(inputs, output, params)
        (sh, sw), (pt, pl, pb, pr) = params["strides"], params["pads"]
        return self.linear_launch(math.prod(out), {
            "H": x[2], "W": x[3], "OH": out[2], "OW": out[3], "sh": sh, "sw": sw,
            "pt": pt, "pl": pl, "pb": pb, "pr": pr}, device)


class GlobalPool(NNKernel):
    """Mean or max over every axis after the first two: (N, C, ...) -> (N, C, 1, ...)."""

    name = "nn_global_pool"
    inputs = ("x",)
    params = (Param("mode", "choice:max|avg", "avg", "avg or max"), SHAPES)
    description = "global average / max pooling: (N, C, ...) -> (N, C, 1, 1, ...)"
    not_in_place = "pooling reads neighbouring elements"
    wg = 64

    def out_shape(self, in_shapes, params):
        x = in_shapes[0]
        return tuple(x[:2]) + (1,) * (len(x) - 2)

    def check_shapes(self, shapes, params):
        x, out = shapes
        if len(x) < 2 or math.prod(out) != x[0] * x[1]:
            raise ShapeError(f"{self.name}: out is {out}; expected {x[:2]} + ones for x {x}")

    def constants(self, shapes, params, device=None):
        return (("mode", params["mode"]),
                ("small", math.prod(shapes[0][2:]) <= self.SMALL_PLANE))

    # Planes of at most this many elements (a classifier's 7×7 maps) are summed by one
    # invocation each: a workgroup and a barrier tree per 49 values left most of its
    # invocations idle (batch 256: 327,680 workgroups for 16 M values).
    SMALL_PLANE = 256

    def render(self, key):
        fields = (("planes", "u32"), ("inner", "u32"), ("scale", "f32"))
        t = _out_type(key)
        c = dict(key.constants)
        mx = c["mode"] == "max"
        op = "max" if mx else "add"
        init = "-3.4028235e38" if mx else "0.0"
        combine = "max(a, b)" if mx else "a + b"
        if c["small"]:
            fields = (("n", "u32"), *fields)
            step = "max(acc, v)" if mx else "acc + v"
            body = f"""let base = i * p.inner;
    var acc = {init};
    for (var j = 0u; j < p.inner; j = j + 1u) {{
        let v = f32(x[base + j]);
        acc = {step};
    }}
    out[i] = {t}(acc * p.scale);"""
            return self.prelude(key, fields) + self.linear_main(body), fields
        # one workgroup per (n, c): its invocations stride over the plane, then a tree
        wg = self.wg
        src = self.prelude(key, fields) + f"""
var<workgroup> part: array<f32, {wg}>;
fn {op}2(a: f32, b: f32) -> f32 {{
    return {combine};
}}
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let plane = wid.y * nwg.x + wid.x;
    var acc = {init};
    if (plane < p.planes) {{
        let base = plane * p.inner;
        for (var j = lid; j < p.inner; j = j + {wg}u) {{
            acc = {op}2(acc, f32(x[base + j]));
        }}
    }}
    part[lid] = acc;
    workgroupBarrier();
    for (var s = {wg // 2}u; s > 0u; s = s / 2u) {{
        if (lid < s) {{
            part[lid] = {op}2(part[lid], part[lid + s]);
        }}
        workgroupBarrier();
    }}
    if (lid == 0u && plane < p.planes) {{
        out[plane] = {t}(part[0] * p.scale);
    }}
}}
"""
        return src, fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        planes, inner = x[0] * x[1], math.prod(x[2:])
        if planes == 0:
            return []
        scale = 1.0 / inner if params["mode"] == "avg" and inner else 1.0
        u = {"planes": planes, "inner": inner, "scale": scale}
        if inner <= self.SMALL_PLANE:
            return self.linear_launch(planes, u, device)
        return [Launch(fold_grid(planes, device, self.name), u)]
