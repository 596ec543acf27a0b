"""Normalizations along one axis: softmax and log-softmax, and LRN across channels."""

from __future__ import annotations

import math

from ...errors import ArgumentError, ShapeError
from ..core.base import Launch, Param, fold_grid
from .common import (
    SHAPES,
    NNKernel,
    _out_type,
)


# -- softmax ---------------------------------------------------------------------------------------
class Softmax(NNKernel):
    """Softmax (or log-softmax) over one axis, or over all axes from ``axis`` on
    (``flatten``: ONNX before opset 13)."""

    name = "nn_softmax"
    inputs = ("x",)
    params = (Param("axis", "i32", -1, "the axis (negative counts from the end)"),
              Param("flatten", "bool", False, "softmax over every axis from axis on"),
              Param("log", "bool", False, "log-softmax"), SHAPES)
    description = "softmax or log-softmax along an axis of any shape (computed in f32)"
    not_in_place = "softmax reads its whole row"
    wg = 64

    def check_shapes(self, shapes, params):
        x, out = shapes
        self._split(x, params)
        if math.prod(out) != math.prod(x):
            raise ShapeError(f"{self.name}: out {out} and x {x} differ in size")

    def _split(self, x, params):
        r = len(x)
        axis = params["axis"]
        if not -max(r, 1) <= axis < max(r, 1):
            raise ShapeError(f"{self.name}: axis {axis} is out of range for x {x}")
        axis %= max(r, 1)
        if params["flatten"]:
            return math.prod(x[:axis]), math.prod(x[axis:]), 1
        return math.prod(x[:axis]), x[axis] if x else 1, math.prod(x[axis + 1:])

    def constants(self, shapes, params, device=None):
        return (("log", params["log"]),)

    def render(self, key):
        fields = (("rows", "u32"), ("len", "u32"), ("inner", "u32"))
        t = _out_type(key)
        wg = self.wg
        fin = "(v - m) - log(s)" if dict(key.constants)["log"] else "exp(v - m) / s"
        src = self.prelude(key, fields) + f"""
var<workgroup> part: array<f32, {wg}>;
fn reduce_max(v: f32, lid: u32) -> f32 {{
    part[lid] = v;
    workgroupBarrier();
    for (var s = {wg // 2}u; s > 0u; s = s / 2u) {{
        if (lid < s) {{
            part[lid] = max(part[lid], part[lid + s]);
        }}
        workgroupBarrier();
    }}
    let r = part[0];
    workgroupBarrier();
    return r;
}}
fn reduce_sum(v: f32, lid: u32) -> f32 {{
    part[lid] = v;
    workgroupBarrier();
    for (var s = {wg // 2}u; s > 0u; s = s / 2u) {{
        if (lid < s) {{
            part[lid] = part[lid] + part[lid + s];
        }}
        workgroupBarrier();
    }}
    let r = part[0];
    workgroupBarrier();
    return r;
}}
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let row = wid.y * nwg.x + wid.x;
    let live = row < p.rows;
    let base = (row / p.inner) * p.len * p.inner + row % p.inner;
    var m = -3.4028235e38;
    if (live) {{
        for (var j = lid; j < p.len; j = j + {wg}u) {{
            m = max(m, f32(x[base + j * p.inner]));
        }}
    }}
    m = reduce_max(m, lid);
    var s = 0.0;
    if (live) {{
        for (var j = lid; j < p.len; j = j + {wg}u) {{
            s = s + exp(f32(x[base + j * p.inner]) - m);
        }}
    }}
    s = reduce_sum(s, lid);
    if (live) {{
        for (var j = lid; j < p.len; j = j + {wg}u) {{
            let v = f32(x[base + j * p.inner]);
            out[base + j * p.inner] = {t}({fin});
        }}
    }}
}}
"""
        return src, fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        outer, length, inner = self._split(x, params)
        rows = outer * inner
        if rows == 0 or length == 0:
            return []
        return [Launch(fold_grid(rows, device, self.name),
                       {"rows": rows, "len": length, "inner": inner})]


# -- LRN -------------------------------------------------------------------------------------------
class LRN(NNKernel):
    """Local response normalization across channels of (N, C, ...), as ONNX defines it."""

    name = "nn_lrn"
    inputs = ("x",)
    params = (Param("size", "u32", 5, "channels in the window"),
              Param("alpha", "f32", 1e-4, ""), Param("beta", "f32", 0.75, ""),
              Param("bias", "f32", 1.0, ""), SHAPES)
    description = "out = x / (bias + alpha / size * sum of x² over size channels) ** beta"
    not_in_place = "LRN reads neighbouring channels"

    def check_shapes(self, shapes, params):
        x, out = shapes
        if len(x) < 2 or math.prod(out) != math.prod(x):
            raise ShapeError(f"{self.name}: x is {x}, out {out}; expected (N, C, ...) twice")
        if params["size"] < 1:
            raise ArgumentError(f"{self.name}: param 'size' must be >= 1")

    def render(self, key):
        fields = (("n", "u32"), ("C", "u32"), ("inner", "u32"), ("lo", "u32"), ("hi", "u32"),
                  ("alpha", "f32"), ("beta", "f32"), ("bias", "f32"))
        t = _out_type(key)
        body = f"""let c = (i / p.inner) % p.C;
    let c0 = u32(max(i32(c) - i32(p.lo), 0));
    let c1 = min(c + p.hi, p.C - 1u);
    var s = 0.0;
    for (var k = c0; k <= c1; k = k + 1u) {{
        let v = f32(x[i + (k - c) * p.inner]);
        s = s + v * v;
    }}
    out[i] = {t}(f32(x[i]) / pow(p.bias + p.alpha * s, p.beta));"""
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        size = params["size"]
        return self.linear_launch(math.prod(x), {
            "C": x[1], "inner": math.prod(x[2:]), "lo": (size - 1) // 2, "hi": size // 2,
            "alpha": params["alpha"] / size, "beta": params["beta"], "bias": params["bias"]},
            device)
