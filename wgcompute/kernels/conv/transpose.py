"""conv_transpose2d: each output gathers the inputs that reach it (ONNX ConvTranspose with
explicit pads), bias and activation fused."""

from __future__ import annotations

import math

from ...errors import ShapeError
from ..core.base import Param
from ..nn.nn import ACTIVATION, SHAPES, NNKernel, act_fn, f32_bits


class ConvTranspose2d(NNKernel):
    """out = conv_transpose(x, w) + bias for NCHW x and w (C, K/group, KH, KW): each output
    gathers the inputs that reach it (ONNX ConvTranspose with explicit pads)."""

    name = "conv_transpose2d"
    inputs = ("x", "w", "bias")
    params = (Param("strides", "pair", (1, 1), "(sh, sw)"),
              Param("pads", "pads", (0, 0, 0, 0), "(top, left, bottom, right)"),
              Param("dilations", "pair", (1, 1), "(dh, dw)"),
              Param("group", "count", 1, "channel groups"),
              Param("output_padding", "ints", (0, 0), "added to the bottom and right"),
              ACTIVATION, SHAPES)
    description = "2-D transposed convolution (NCHW) with bias and activation"
    not_in_place = "a convolution reads neighbouring pixels"

    def out_shape(self, in_shapes, params):
        x, w = in_shapes[0], in_shapes[1]
        if len(x) != 4 or len(w) != 4:
            raise ShapeError(f"{self.name}: x is {x} and w is {w}; expected (N, C, H, W) and "
                             f"(C, K/group, KH, KW)")
        (sh, sw), (dh, dw), (pt, pl, pb, pr) = params["strides"], params["dilations"], \
            params["pads"]
        oph, opw = (tuple(params["output_padding"]) + (0, 0))[:2]
        oh = sh * (x[2] - 1) + oph + (w[2] - 1) * dh + 1 - pt - pb
        ow = sw * (x[3] - 1) + opw + (w[3] - 1) * dw + 1 - pl - pr
        return (x[0], w[1] * params["group"], oh, ow)

    def check_shapes(self, shapes, params):
        x, w, b, out = shapes
        g = params["group"]
        if x[1] != w[0] or x[1] % g:
            raise ShapeError(f"{self.name}: x {x} and w {w}: x's channels must equal w's axis "
                             f"0 and divide by group {g}")
        if math.prod(b) != w[1] * g:
            raise ShapeError(f"{self.name}: bias is {b}; expected ({w[1] * g},)")
        want = self.out_shape([x, w], params)
        if tuple(out) != want:
            raise ShapeError(f"{self.name}: out is {out}, expected {want}")

    def constants(self, shapes, params, device=None):
        w = shapes[1]
        (sh, sw), (dh, dw) = params["strides"], params["dilations"]
        return (("kh", w[2]), ("kw", w[3]), ("sh", sh), ("sw", sw), ("dh", dh), ("dw", dw),
                ("act", params["activation"][0]))

    def render(self, key):
        c = dict(key.constants)
        fields = (("n", "u32"), ("C", "u32"), ("H", "u32"), ("W", "u32"), ("KO", "u32"),
                  ("OH", "u32"), ("OW", "u32"), ("Cg", "u32"), ("Mg", "u32"), ("pt", "u32"),
                  ("pl", "u32"), ("alpha", "f32"), ("beta", "f32"))
        t = {"f32": "f32", "f16": "f16"}[key.dtypes[-1]]
        body = f"""let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let k = (i / (p.OW * p.OH)) % p.KO;
    let n = i / (p.OW * p.OH * p.KO);
    let g = k / p.Mg;
    let kk = k % p.Mg;
    var v = f32(bias[k]);
    for (var a = 0u; a < {c['kh']}u; a = a + 1u) {{
        let th = i32(oh + p.pt) - i32(a * {c['dh']}u);
        if (th < 0 || th % {c['sh']} != 0) {{
            continue;
        }}
        let ih = u32(th / {c['sh']});
        if (ih >= p.H) {{
            continue;
        }}
        for (var b = 0u; b < {c['kw']}u; b = b + 1u) {{
            let tw = i32(ow + p.pl) - i32(b * {c['dw']}u);
            if (tw < 0 || tw % {c['sw']} != 0) {{
                continue;
            }}
            let iw = u32(tw / {c['sw']});
            if (iw >= p.W) {{
                continue;
            }}
            for (var ci = 0u; ci < p.Cg; ci = ci + 1u) {{
                let ch = g * p.Cg + ci;
                v = v + f32(x[((n * p.C + ch) * p.H + ih) * p.W + iw])
                    * f32(w[((ch * p.Mg + kk) * {c['kh']}u + a) * {c['kw']}u + b]);
            }}
        }}
    }}
    out[i] = {t}(act(v));"""
        src = (self.prelude(key, fields) + act_fn("act", c["act"], "p.alpha", "p.beta")
               + self.linear_main(body))
        return src, fields

    def launches(self, inputs, output, params, device):
        x, w, _, out = self.logical(inputs, output, params)
        g = params["group"]
        pt, pl = params["pads"][:2]
        _, alpha, beta = params["activation"]
        return self.linear_launch(math.prod(out), {
            "C": x[1], "H": x[2], "W": x[3], "KO": out[1], "OH": out[2], "OW": out[3],
            "Cg": x[1] // g, "Mg": w[1], "pt": pt, "pl": pl, "alpha": f32_bits(alpha),
            "beta": f32_bits(beta)}, device)



CONV_TRANSPOSE2D = ConvTranspose2d()
