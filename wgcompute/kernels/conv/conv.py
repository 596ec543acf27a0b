"""Convolutions and GEMM with fused epilogues: conv2d as an implicit GEMM, on matmul's tiling
or the skinny kernel (conv_configs.py chooses), depthwise convolutions by their own blocked
kernel, conv_transpose2d, and gemm (batched, c broadcast).

conv2d's epilogue adds the bias, applies an activation, adds a residual tensor and applies a
second activation, so Conv → BatchNorm (folded into the weights) → activation → Add → activation
is one dispatch. Tile configurations come from matmul's TileConfig (whole-K configs only) or
conv_configs.SkinnyConfig."""

from __future__ import annotations

import math
import re

from ... import autotune
from ...errors import ArgumentError, ShapeError
from ..core import shaders
from ..core.base import Launch, Param, PipelineKey, fold_grid
from ..matmul.matmul import MIXED_BK, TileConfig, tiled_substitutions
from ..nn.nn import (
    ACTIVATION,
    SHAPES,
    NNKernel,
    _merge_dims,
    act_fn,
    broadcast_shape,
    broadcast_strides,
    f32_bits,
    pool_out_size,
)
from . import conv_configs
from .conv_configs import ConvProblem, SkinnyConfig, gemm_class, tiled_choices, tiled_default

ALGOS = ("auto", "gemm", "skinny", "depthwise")
MAX_BATCH_DIMS = 3
_DW_WG = 64

# gemm (products that are not convolutions): tuned per output size class, on one shape each
_TUNE = {"large": ("64x128x16_4x8", "128x128x16_8x8", "128x64x16_8x4", "64x64x16_4x4"),
         "medium": ("64x64x16_4x4", "32x64x16_4x4", "64x128x16_4x8", "128x64x16_8x4"),
         "small": ("32x64x16_4x4", "32x32x16_4x4", "64x64x16_4x4"),
         "tiny": ("32x32x16_4x4", "32x64x16_4x4")}
# (M, N, K) each class is tuned on
_TUNE_SHAPES = {"large": (128, 25088, 576), "medium": (192, 3136, 192),
                "small": (320, 784, 960), "tiny": (160, 49, 960)}
_TUNE_REVISION = 2


def choose_config(kind: str, m: int, n: int, dtype: str, device) -> TileConfig:
    """The tile configuration for a gemm with an m × n output on ``device`` (autotuned per
    size class)."""
    fits = tiled_choices(device)
    if not fits:
        raise ShapeError(f"{kind}: no tile configuration fits this adapter's limits "
                         f"({device.name})")
    cls = gemm_class(m, n)
    default = tiled_default(m, n, fits)
    names = [nm for nm in _TUNE[cls] if nm in fits] or list(fits)
    if default not in names:
        default = names[0]
    chosen = autotune.choose(device, f"{kind} {dtype} {cls} r{_TUNE_REVISION}", names, default,
                             lambda name: _measure(kind, fits[name], dtype, cls, device))
    return fits[chosen]


def _check_config(cfg, kind, skinny_ok: bool = False):
    if skinny_ok and isinstance(cfg, SkinnyConfig):
        return cfg
    if not isinstance(cfg, TileConfig):
        what = "a TileConfig or a SkinnyConfig" if skinny_ok else "a TileConfig"
        raise ArgumentError(f"{kind}: param '_config' must be {what}, got "
                            f"{type(cfg).__name__}")
    if cfg.split != 1:
        raise ArgumentError(f"{kind}: tile config {cfg.name} splits K; the fused epilogue "
                            f"needs whole-K configs")
    return cfg


def _check_fits(cfg, kind, device) -> None:
    if cfg is not None and not cfg.fits(device, 4):
        raise ArgumentError(f"{kind}: config {cfg.name} does not fit {device.name}'s limits")


_DW_COLS = 4  # outputs along a row per depthwise invocation (f16 may take 8: _dw_block)
_DW_MAX_LOADS = 128  # input values one invocation loads (unrolled code); beyond: one output each


def _dw_rows(kh, kw, sh, sw, dh, dw, oh, cols: int = _DW_COLS) -> int:
    """Output rows per invocation of the blocked depthwise kernel (a block of rows × ``cols``
    columns shares the input values its windows overlap on): 2, 1, or 0 when even one row's
    window span is too wide to unroll (then one invocation per output)."""
    span = (cols - 1) * sw + (kw - 1) * dw + 1
    for rows in ((2, 1) if oh >= 2 else (1,)):
        if ((rows - 1) * sh + (kh - 1) * dh + 1) * span <= _DW_MAX_LOADS:
            return rows
    return 0


def _dw_vectors(w: int, ow: int) -> tuple[int, int]:
    """Vector widths of the blocked depthwise kernel's loads of x and stores of out: 4 (or
    2) when the input (output) rows hold a multiple of 4 (2) values, so that a vector never
    straddles two rows and every row starts on a vector boundary, else 1 (scalars). A block's
    4 output columns then leave in one vec4 (or two vec2) store, and its window's columns
    come in as whole aligned vectors."""
    def width(n: int) -> int:
        return 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1

    return width(w), width(ow)


def _dw_block(x_shape, w_shape, out_shape, params, dtype) -> tuple[int, int, int, int]:
    """(rows, columns, vin, vout) of the blocked depthwise kernel for this layer (rows 0: one
    output per invocation). f16 at stride 1 with vec4 rows takes 8 columns: its invocations
    then move as many bytes as f32's with 4 (MobileNetV2's stride-1 layers at batch 256 on
    an H200: 0.84-0.95 of the 4-column time; f32, or f16 at stride 2, were 9-31% slower)."""
    (sh, sw), (dh, dw) = params["strides"], params["dilations"]
    vin, vout = _dw_vectors(x_shape[3], out_shape[3])
    cols = _DW_COLS
    if dtype == "f16" and sw == 1 and vin == vout == 4:  # a DType equals its name
        cols = 2 * _DW_COLS
    rows = _dw_rows(w_shape[2], w_shape[3], sh, sw, dh, dw, out_shape[2], cols)
    if not rows and cols != _DW_COLS:  # too wide a window for 8 columns: try 4
        cols = _DW_COLS
        rows = _dw_rows(w_shape[2], w_shape[3], sh, sw, dh, dw, out_shape[2], cols)
    return rows, cols, vin, vout


def _specialize(src: str, fields, c) -> tuple[str, tuple]:
    """The implicit GEMM's WGSL with the layer's pixels per image (P) and output width (OW)
    as literals where the key has them: dividing by a constant is a multiply and a shift, by
    a uniform a ~20-instruction sequence, and each invocation divides for every column group
    it loads and stores."""
    if "P" in c:
        src = re.sub(r"\bp\.P\b", f"{c['P']}u", src)
        src = re.sub(r"\bp\.OW\b", f"{c['OW']}u", src)
    return src, fields


def _gemm_bindings(names, types, writes) -> str:
    lines = []
    for i, (n, t, w) in enumerate(zip(names, types, writes, strict=True)):
        lines.append(f"@group(0) @binding({i}) var<storage, {'read_write' if w else 'read'}> "
                     f"{n}: array<{t}>;")
    lines.append(f"@group(0) @binding({len(names)}) var<uniform> p: Params;")
    return "\n".join(lines)


def _guarded(name: str, s: str) -> str:
    """WGSL fn ``ld_NAME(i, ok)``: NAME[i] as S when ok, else 0 (no read past the end)."""
    return (f"fn ld_{name}(i: u32, ok: bool) -> {s} {{\n    if (ok) {{\n        return "
            f"{s}({name}[i]);\n    }}\n    return {s}(0);\n}}\n")


def _render_tiled(cfg: TileConfig, t: str, fields, bindings: str, helpers: str,
                  batch: str = "", col0: str = "0u", mixed: bool = False) -> str:
    subs = tiled_substitutions(cfg, t, True, True, mixed, hooks=True)
    subs.update({"FIELDS": "\n".join(f"    {n}: {ty}," for n, ty in fields),
                 "BINDINGS": bindings, "HELPERS": helpers + subs["HELPERS"], "BATCH": batch,
                 "COL0": col0})
    return shaders.render(shaders.load("conv/conv_gemm.wgsl"), subs)


# -- conv2d ----------------------------------------------------------------------------------------
class Conv2d(NNKernel):
    """out = act1(act0(conv(x, w) + bias) [+ residual]) for NCHW x, w (K, C/group, KH, KW)."""

    name = "conv2d"
    inputs = ("x", "w", "bias")
    params = (Param("strides", "pair", (1, 1), "(sh, sw)"),
              Param("pads", "pads", (0, 0, 0, 0), "(top, left, bottom, right)"),
              Param("dilations", "pair", (1, 1), "(dh, dw)"),
              Param("group", "count", 1, "channel groups (C = group: depthwise)"),
              ACTIVATION,
              Param("post_activation", "act", None,
                    "applied after the residual is added (conv2d_residual)"),
              Param("algo", "choice:" + "|".join(ALGOS), "auto",
                    "auto (depthwise kernel when each group has one input channel, else an "
                    "implicit GEMM: tiled, or skinny for few output pixels over a long K or "
                    "a short K; tuned per layer shape on GPUs), gemm (tiled), skinny or "
                    "depthwise"),
              Param("precision", "choice:f32|mixed", "f32",
                    "f16 only: f32 (every product summed in f32) or mixed (the tiled GEMM "
                    "sums each k slice of 8 or 16 products in f16, the slices in f32; the "
                    "depthwise and skinny kernels always sum in f32)"),
              SHAPES)
    description = ("2-D convolution (NCHW) with bias and a fused activation: implicit GEMM on "
                   "matmul's tiling; depthwise by its own kernel")
    residual = False
    not_in_place = "a convolution reads neighbouring pixels"

    def resolve_params(self, params, dt):
        params = dict(params or {}) if isinstance(params, dict) or params is None else params
        cfg = params.pop("_config", None) if isinstance(params, dict) else None
        out = super().resolve_params(params, dt)
        if out["group"] is None or out["group"] < 1:
            raise ArgumentError(f"{self.name}: param 'group' must be >= 1")
        if cfg is not None:
            out["_config"] = _check_config(cfg, self.name, skinny_ok=True)
        return out

    def out_shape(self, in_shapes, params):
        x, w = in_shapes[0], in_shapes[1]
        if len(x) != 4 or len(w) != 4:
            raise ShapeError(f"{self.name}: x is {x} and w is {w}; expected (N, C, H, W) and "
                             f"(K, C/group, KH, KW)")
        (sh, sw), (dh, dw), (pt, pl, pb, pr) = params["strides"], params["dilations"], \
            params["pads"]
        return (x[0], w[0], pool_out_size(x[2], w[2], sh, pt, pb, dh),
                pool_out_size(x[3], w[3], sw, pl, pr, dw))

    def check_shapes(self, shapes, params):
        x, w, b = shapes[:3]
        out = shapes[-1]
        want = self.out_shape([x, w], params)
        g = params["group"]
        if x[1] % g or w[0] % g:
            raise ShapeError(f"{self.name}: group {g} does not divide x's {x[1]} channels and "
                             f"w's {w[0]} filters")
        if w[1] * g != x[1]:
            raise ShapeError(f"{self.name}: w is {w}; with group {g} its axis 1 must be "
                             f"{x[1] // g} (x has {x[1]} channels)")
        if math.prod(b) != w[0]:
            raise ShapeError(f"{self.name}: bias is {b}; expected ({w[0]},)")
        if tuple(out) != want:
            raise ShapeError(f"{self.name}: out is {out}, expected {want} for x {x}, w {w}")
        if self.residual and tuple(shapes[3]) != want:
            raise ShapeError(f"{self.name}: residual is {shapes[3]}, expected {want}")
        if params["algo"] == "depthwise" and w[1] != 1:
            raise ArgumentError(f"{self.name}: algo 'depthwise' needs one input channel per "
                                f"group; w is {w}")

    def _algo(self, shapes, params) -> str:
        """depthwise, or gemm (tiled or skinny: the config says which)."""
        algo = params["algo"]
        if algo == "auto":
            return "depthwise" if shapes[1][1] == 1 and params["group"] > 1 else "gemm"
        return "gemm" if algo == "skinny" else algo

    def _gemm_dims(self, shapes, params):
        w = shapes[1]
        out = shapes[-1]
        g = params["group"]
        return w[0] // g, out[0] * out[2] * out[3], w[1] * w[2] * w[3]

    def _problem(self, shapes, params, dtype) -> ConvProblem:
        m, n, k = self._gemm_dims(shapes, params)
        w, out = shapes[1], shapes[-1]
        if dtype == "f16" and params.get("precision") == "mixed":
            dtype = "f16-mixed"  # tuned apart: the mixed tiles favour other shapes
        return ConvProblem(dtype, m, n, k, out[2] * out[3],
                           (w[2], w[3], *params["strides"], *params["dilations"]))

    def _config(self, shapes, params, dtype, device) -> TileConfig | SkinnyConfig:
        """The pinned ``_config``, else the tuned (or default) one for this layer's shape;
        ``algo`` "gemm" keeps to the tiled kernel, "skinny" to the skinny one."""
        cfg = params.get("_config")
        if cfg is not None:
            return cfg
        problem = self._problem(shapes, params, dtype)
        if params["algo"] == "skinny":
            return conv_configs.skinny_default(problem.m, problem.n, problem.k)
        skinny_ok = params["algo"] != "gemm"
        return conv_configs.choose(
            problem, device,
            lambda c: _measure_conv(self, shapes, params, c, dtype, device), skinny_ok)

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        if params.get("precision") == "mixed" and output.dtype != "f16":
            raise ArgumentError(f"{self.name}: param 'precision' 'mixed' (f16 sums over each "
                                f"k slice) needs f16 buffers; {output.dtype} sums in "
                                f"{output.dtype}: leave precision out or pass 'f32'")
        _check_fits(params.get("_config"), self.name, output.device)

    def key(self, inputs, output, params):
        dtypes = tuple(b.dtype for b in [*inputs, output])
        return PipelineKey(self.name, dtypes, self.constants(
            self.logical(inputs, output, params), params, output.device, output.dtype))

    def constants(self, shapes, params, device=None, dtype: str = "f32"):
        w = shapes[1]
        (sh, sw), (dh, dw) = params["strides"], params["dilations"]
        algo = self._algo(shapes, params)
        c = [("kh", w[2]), ("kw", w[3]), ("sh", sh), ("sw", sw), ("dh", dh),
             ("dw", dw), ("act0", params["activation"][0]),
             ("act1", params["post_activation"][0])]
        if algo == "depthwise":
            rows, cols, vin, vout = _dw_block(shapes[0], w, shapes[-1], params, dtype)
            c.append(("dw_rows", rows))
            if cols != _DW_COLS:
                c.append(("dw_cols", cols))
            if rows and (vin > 1 or vout > 1):
                # the left pad places each window on the vector blocks it reads
                c += [("vin", vin), ("vout", vout), ("pl", params["pads"][1])]
        if algo == "gemm":
            k = w[1] * w[2] * w[3]
            pointwise = (w[2], w[3], sh, sw) == (1, 1, 1, 1) and not any(params["pads"])
            out = shapes[-1]
            # pixels per image a multiple of 4: a column group of 4 never straddles two
            # images, so x, the residual and out move as vec4 along the pixels
            vec_p = pointwise and (out[2] * out[3]) % 4 == 0
            cfg = self._config(shapes, params, dtype, device)
            if isinstance(cfg, SkinnyConfig):
                algo = "skinny"
            c += [("config", cfg.name), ("vec_w", k % 4 == 0 and algo == "gemm"),
                  ("pointwise", pointwise), ("vec_p", vec_p)]
            if (algo == "gemm" and dtype == "f16" and params.get("precision") == "mixed"
                    and cfg.bk in MIXED_BK):
                c.append(("mixed", True))
            # pixels per image and the output width as constants: the column -> (image,
            # pixel, row, column) divisions of every load and store become multiplications
            c += [("P", out[2] * out[3]), ("OW", out[3])]
        return (("algo", algo), *c)

    # -- WGSL --------------------------------------------------------------------------------------
    _FIELDS = (("M", "u32"), ("N", "u32"), ("K", "u32"), ("C", "u32"), ("H", "u32"),
               ("W", "u32"), ("OH", "u32"), ("OW", "u32"), ("P", "u32"), ("KO", "u32"),
               ("Cg", "u32"), ("g", "u32"), ("pt", "u32"), ("pl", "u32"), ("alpha0", "f32"),
               ("beta0", "f32"), ("alpha1", "f32"), ("beta1", "f32"), ("n", "u32"),
               ("mult", "u32"), ("OWB", "u32"), ("OHB", "u32"))

    def _epilogue(self, c, t: str) -> tuple[str, str]:
        """(helper functions, the WGSL storing f32 v of out index o, channel k)."""
        helpers = act_fn("act0", c["act0"], "p.alpha0", "p.beta0")
        store = "var v = act0(v0 + f32(bias[k]));\n"
        if self.residual:
            helpers += act_fn("act1", c["act1"], "p.alpha1", "p.beta1")
            store += "v = act1(v + f32(residual[o]));\n"
        store += f"out[o] = {t}(v);"
        return helpers, store

    def _bindings(self, c, types) -> str:
        names = list(self.inputs) + ["out"]
        btypes = list(types)
        if c.get("vec_w"):
            btypes[1] = f"vec4<{types[1]}>"
        if c.get("vec_p"):
            btypes[0] = f"vec4<{types[0]}>"
            btypes[-1] = f"vec4<{types[-1]}>"
            if self.residual:
                btypes[3] = f"vec4<{types[3]}>"
        return _gemm_bindings(names, btypes, [False] * len(self.inputs) + [True])

    def _store_helpers(self, c, t: str) -> str:
        """The activations and ``store4(r, c, acc)``: output row r (< M) and columns c..c+3
        (those < N) of the GEMM get the bias, activation, residual and second activation,
        written to NCHW out."""
        act_helpers, store = self._epilogue(c, t)
        if c.get("vec_p"):
            vstore = "var v = act0(acc + vec4<f32>(f32(bias[k])));\n"
            if self.residual:
                vstore += "    v = act1(v + vec4<f32>(residual[o / 4u]));\n"
            vstore += f"    out[o / 4u] = vec4<{t}>(v);"
            act_helpers = act_helpers.replace("fn act0(v: f32) -> f32", "fn act0s(v: f32) -> f32")
            act_helpers = act_helpers.replace("fn act1(v: f32) -> f32", "fn act1s(v: f32) -> f32")
            act_helpers += ("fn act0(v: vec4<f32>) -> vec4<f32> {\n    return vec4<f32>("
                            "act0s(v.x), act0s(v.y), act0s(v.z), act0s(v.w));\n}\n")
            if self.residual:
                act_helpers += ("fn act1(v: vec4<f32>) -> vec4<f32> {\n    return vec4<f32>("
                                "act1s(v.x), act1s(v.y), act1s(v.z), act1s(v.w));\n}\n")
            return act_helpers + f"""fn store4(r: u32, c: u32, acc: vec4<f32>) {{
    if (c >= p.N) {{
        return;
    }}
    let k = p.g * p.M + r;
    let o = ((c / p.P) * p.KO + k) * p.P + c % p.P;
    {vstore}
}}
"""
        return act_helpers + f"""fn store4(r: u32, c: u32, acc: vec4<f32>) {{
    let k = p.g * p.M + r;
    var col = c;
    var n = col / p.P;
    var pix = col % p.P;
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {{
        if (col < p.N) {{
            let o = (n * p.KO + k) * p.P + pix;
            let v0 = acc[lane];
            {store.replace(chr(10), chr(10) + '            ')}
        }}
        col = col + 1u;
        pix = pix + 1u;
        if (pix == p.P) {{
            pix = 0u;
            n = n + 1u;
        }}
    }}
}}
"""

    def render(self, key):
        c = dict(key.constants)
        types = [{"f32": "f32", "f16": "f16"}[d] for d in key.dtypes]
        t = types[-1]
        if c["algo"] == "depthwise":
            if c["dw_rows"]:
                return self._render_depthwise_block(c, types, t)
            return self._render_depthwise(key, c, types, t)
        if c["algo"] == "skinny":
            return _specialize(*self._render_skinny(c, types, t), c)
        cfg = TileConfig.parse(c["config"])
        bindings = self._bindings(c, types)
        mixed = c.get("mixed", False)
        s = "f16" if mixed else "f32"  # what the tiles hold (the loaders' vec4 type)
        khw, kw = c["kh"] * c["kw"], c["kw"]
        if c["vec_w"]:
            load_a = (f"fn load_a4(r: u32, k: u32, kend: u32) -> vec4<{s}> {{\n"
                      f"    if (r >= p.M || k >= kend) {{\n        return vec4<{s}>(0);\n    }}\n"
                      f"    return vec4<{s}>(w[((p.g * p.M + r) * p.K + k) / 4u]);\n}}\n")
        else:
            load_a = (_guarded("w", s)
                      + f"fn load_a4(r: u32, k: u32, kend: u32) -> vec4<{s}> {{\n"
                      f"    let i = (p.g * p.M + r) * p.K + k;\n    let ok = r < p.M;\n"
                      f"    return vec4<{s}>(ld_w(i, ok && k < kend), "
                      f"ld_w(i + 1u, ok && k + 1u < kend), ld_w(i + 2u, ok && k + 2u < kend), "
                      f"ld_w(i + 3u, ok && k + 3u < kend));\n}}\n")
        if c.get("vec_p"):
            gather = f"""    if (c < p.N) {{
        let n = c / p.P;
        v = vec4<{s}>(x[((n * p.C + p.g * p.Cg + k) * p.P + c % p.P) / 4u]);
    }}"""
        elif c["pointwise"]:
            # 1×1, stride 1, no pads: b[k, col] = x[n, g·Cg + k, pixel]
            gather = f"""    let base = p.g * p.Cg + k;
    var col = c;
    var n = col / p.P;
    var pix = col % p.P;
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {{
        if (col < p.N) {{
            v[lane] = {s}(x[(n * p.C + base) * p.P + pix]);
        }}
        col = col + 1u;
        pix = pix + 1u;
        if (pix == p.P) {{
            pix = 0u;
            n = n + 1u;
        }}
    }}"""
        else:
            gather = f"""    let ci = k / {khw}u;
    let rr = k % {khw}u;
    let ih0 = i32((rr / {kw}u) * {c['dh']}u) - i32(p.pt);
    let iw0 = i32((rr % {kw}u) * {c['dw']}u) - i32(p.pl);
    let chan = p.g * p.Cg + ci;
    var col = c;
    var n = col / p.P;
    let pix = col % p.P;
    var oh = pix / p.OW;
    var ow = pix % p.OW;
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {{
        if (col < p.N) {{
            let ih = ih0 + i32(oh * {c['sh']}u);
            let iw = iw0 + i32(ow * {c['sw']}u);
            if (ih >= 0 && ih < i32(p.H) && iw >= 0 && iw < i32(p.W)) {{
                v[lane] = {s}(x[((n * p.C + chan) * p.H + u32(ih)) * p.W + u32(iw)]);
            }}
        }}
        col = col + 1u;
        ow = ow + 1u;
        if (ow == p.OW) {{
            ow = 0u;
            oh = oh + 1u;
            if (oh == p.OH) {{
                oh = 0u;
                n = n + 1u;
            }}
        }}
    }}"""
        load_b = (f"fn load_b4(k: u32, c: u32, kend: u32) -> vec4<{s}> {{\n"
                  f"    var v = vec4<{s}>(0);\n    if (k >= kend) {{\n        return v;\n    }}\n"
                  f"{gather}\n    return v;\n}}\n")
        src = _render_tiled(cfg, t, self._FIELDS, bindings,
                            self._store_helpers(c, t) + load_a + load_b, mixed=mixed)
        return _specialize(src, self._FIELDS, c)

    def _render_skinny(self, c, types, t):
        cfg = SkinnyConfig.parse(c["config"])
        ind = "\n    "
        vec_p, pointwise = c["vec_p"], c["pointwise"]
        setup = [f"var acc{i} = vec4<f32>(0.0);" for i in range(cfg.tr)]
        if vec_p:  # N % 4 == 0: a group of 4 columns is inside one image, a vec4 of x
            setup += ["let cc = min(c, p.N - 4u);",
                      "let xb = ((cc / p.P) * p.C + p.g * p.Cg) * (p.P / 4u) + (cc % p.P) / 4u;",
                      "let P4 = p.P / 4u;"]

            def loadx(k):
                return [f"let xv = vec4<f32>(x[xb + {k} * P4]);"]
        elif pointwise:  # lanes past N read the last column (never stored)
            for ln in range(4):
                setup += [f"let cl{ln} = min(c + {ln}u, p.N - 1u);",
                          f"let xo{ln} = ((cl{ln} / p.P) * p.C + p.g * p.Cg) * p.P "
                          f"+ cl{ln} % p.P;"]

            def loadx(k):
                return [f"let kp = {k} * p.P;",
                        "let xv = vec4<f32>(f32(x[xo0 + kp]), f32(x[xo1 + kp]), "
                        "f32(x[xo2 + kp]), f32(x[xo3 + kp]));"]
        else:
            for ln in range(4):
                setup += [f"let cl{ln} = min(c + {ln}u, p.N - 1u);",
                          f"let px{ln} = cl{ln} % p.P;",
                          f"let ih{ln} = i32((px{ln} / p.OW) * {c['sh']}u) - i32(p.pt);",
                          f"let iw{ln} = i32((px{ln} % p.OW) * {c['sw']}u) - i32(p.pl);",
                          f"let xb{ln} = ((cl{ln} / p.P) * p.C + p.g * p.Cg) * p.H * p.W;"]
            khw, kw = c["kh"] * c["kw"], c["kw"]

            def loadx(k):
                lines = [f"let ci = {k} / {khw}u;",
                         f"let rr = {k} % {khw}u;",
                         f"let dy = i32((rr / {kw}u) * {c['dh']}u);",
                         f"let dx = i32((rr % {kw}u) * {c['dw']}u);",
                         "let cb = ci * p.H * p.W;",
                         "var xv = vec4<f32>(0.0);"]
                for ln in range(4):
                    lines += [f"{{ let ih = ih{ln} + dy; let iw = iw{ln} + dx;",
                              "  if (ih >= 0 && ih < i32(p.H) && iw >= 0 && iw < i32(p.W)) {",
                              f"    xv[{ln}] = f32(x[xb{ln} + cb + u32(ih) * p.W + u32(iw)]);",
                              "  }", "}"]
                return lines
        # rows past M read the last row (never stored)
        rows = [f"let wr{i} = (p.g * p.M + min(r0 + {i}u, p.M - 1u)) * p.K;"
                for i in range(cfg.tr)]

        def body(k):
            lines = loadx(k)
            lines += [f"acc{i} = fma(vec4<f32>(f32(w[wr{i} + {k}])), xv, acc{i});"
                      for i in range(cfg.tr)]
            return lines

        body4 = []
        for u in range(4):
            kk = "k" if u == 0 else f"(k + {u}u * S)"
            body4 += ["{", *["    " + x for x in body(kk)], "}"]
        if cfg.s > 1:
            partials = "var<workgroup> part: array<vec4<f32>, S * BR * CX>;"
            finish = [f"part[(s * BR + ry * TR + {i}u) * CX + cx] = acc{i};"
                      for i in range(cfg.tr)]
            finish += ["workgroupBarrier();",
                       "for (var t = lid; t < BR * CX; t = t + THREADS) {",
                       "    let i = t / CX;",
                       "    let x4 = t % CX;",
                       "    var v = vec4<f32>(0.0);",
                       "    for (var j = 0u; j < S; j = j + 1u) {",
                       "        v = v + part[(j * BR + i) * CX + x4];",
                       "    }",
                       "    let r = wid.y * BR + i;",
                       "    if (r < p.M) {",
                       "        store4(r, wid.x * 4u * CX + x4 * 4u, v);",
                       "    }",
                       "}"]
        else:
            partials = ""
            finish = [f"if (r0 + {i}u < p.M) {{ store4(r0 + {i}u, c, acc{i}); }}"
                      for i in range(cfg.tr)]
        subs = {"ENABLE": shaders.enable_directives(types),
                "FIELDS": "\n".join(f"    {n}: {ty}," for n, ty in self._FIELDS),
                "BINDINGS": self._bindings(c, types), "HELPERS": self._store_helpers(c, t),
                "CX": cfg.cx, "S": cfg.s, "RY": cfg.ry, "TR": cfg.tr, "THREADS": cfg.threads,
                "PARTIALS": partials, "SETUP": ind.join(setup), "ROWS": ind.join(rows),
                "BODY4": (ind + "    ").join(body4),
                "BODY1": (ind + "    ").join(body("k")), "FINISH": ind.join(finish)}
        return shaders.render(shaders.load("conv/conv_skinny.wgsl"), subs), self._FIELDS

    def _render_depthwise_block(self, c, types, t):
        """Each invocation: ``dw_rows`` output rows × 4 columns (8: ``dw_cols``, _dw_block)
        of one channel plane. The
        input values under the block are loaded once each (a 3×3 stride-1 window over a 2×4
        block: 24 loads for 8 outputs, not 72), every index is clamped into the plane and
        zeroed outside it (no branches), and the weights are read once per invocation.
        With ``vin`` / ``vout`` > 1 (rows a multiple of that many values) x comes in as
        aligned vectors of ``vin`` (a 3×3 stride-1 row: 3 vec4 loads, not 6 scalars) and each
        output row leaves in columns / ``vout`` vector stores."""
        rows = c["dw_rows"]
        kh, kw, sh, sw, dh, dw = (c[n] for n in ("kh", "kw", "sh", "sw", "dh", "dw"))
        vin, vout = c.get("vin", 1), c.get("vout", 1)
        cols = c.get("dw_cols", _DW_COLS)
        span_h = (rows - 1) * sh + (kh - 1) * dh + 1
        span_w = (cols - 1) * sw + (kw - 1) * dw + 1
        act_helpers, store = self._epilogue(c, t)
        lines = ["let owb = i % p.OWB;", "let rest = i / p.OWB;",
                 f"let oh0 = (rest % p.OHB) * {rows}u;", "let plane = rest / p.OHB;",
                 f"let ow0 = owb * {cols}u;", "let k = plane % p.KO;",
                 "let xb = (plane / p.KO * p.C + k / p.mult) * p.H * p.W;",
                 f"let ih0 = i32(oh0 * {sh}u) - i32(p.pt);",
                 f"let wb = k * {kh * kw}u;"]
        lines += [f"let w{a}_{b} = f32(w[wb + {a * kw + b}u]);"
                  for a in range(kh) for b in range(kw)]
        lines += [f"var a{r}_{q} = 0.0;" for r in range(rows) for q in range(cols)]
        if vin == 1:
            lines.append(f"let iw0 = i32(ow0 * {sw}u) - i32(p.pl);")
            for j in range(span_w):  # column offsets and validity, shared by every row
                lines += [f"let iwc{j} = iw0 + {j};",
                          f"let cw{j} = u32(clamp(iwc{j}, 0, i32(p.W) - 1));",
                          f"let okw{j} = iwc{j} >= 0 && iwc{j} < i32(p.W);"]
        else:
            # window column j is x's column ow0·sw − pl + j: lane (j − pl) mod vin of the
            # vector ow0·sw/vin + ⌊(j − pl) / vin⌋ (ow0·sw is a multiple of vin)
            pl, vt = c["pl"], f"vec{vin}<f32>"

            def vec(d: int) -> str:  # WGSL name suffix of vector offset d (m: minus)
                return f"{'m' if d < 0 else ''}{abs(d)}"

            blocks = sorted({(j - pl) // vin for j in range(span_w)})
            lines += [f"let vb0 = i32(ow0 * {sw}u / {vin}u);",
                      f"let nvw = i32(p.W / {vin}u);"]
            for d in blocks:
                n = vec(d)
                lines += [f"let bw{n} = vb0 + {d};",
                          f"let cb{n} = u32(clamp(bw{n}, 0, nvw - 1));",
                          f"let okb{n} = bw{n} >= 0 && bw{n} < nvw;"]
        for y in range(span_h):
            lines += ["{", f"    let ih = ih0 + {y};",
                      "    let okh = ih >= 0 && ih < i32(p.H);",
                      "    let xr = xb + u32(clamp(ih, 0, i32(p.H) - 1)) * p.W;"]
            used = {}
            for r in range(rows):
                for a in range(kh):
                    if r * sh + a * dh != y:
                        continue
                    for q in range(cols):
                        for b in range(kw):
                            used.setdefault(q * sw + b * dw, []).append((r, q, a, b))
            if vin > 1:
                for d in sorted({(j - pl) // vin for j in used}):
                    n = vec(d)
                    lines.append(f"    let xv{n} = select({vt}(0.0), {vt}(x[xr / {vin}u + "
                                 f"cb{n}]), okh && okb{n});")
            for j in sorted(used):
                if vin == 1:
                    lines.append(f"    let v{j} = select(0.0, f32(x[xr + cw{j}]), "
                                 f"okh && okw{j});")
                else:
                    lines.append(f"    let v{j} = xv{vec((j - pl) // vin)}[{(j - pl) % vin}];")
                lines += [f"    a{r}_{q} = fma(v{j}, w{a}_{b}, a{r}_{q});"
                          for r, q, a, b in used[j]]
            lines.append("}")
        if vout == 1:
            body = store.replace(chr(10), chr(10) + "    ")
            for r in range(rows):
                for q in range(cols):
                    lines += [f"if (oh0 + {r}u < p.OH && ow0 + {q}u < p.OW) {{",
                              f"    let o = (plane * p.OH + oh0 + {r}u) * p.OW + ow0 + {q}u;",
                              f"    let v0 = a{r}_{q};", f"    {body}", "}"]
        else:
            lines.append("let bias_k = f32(bias[k]);")
            for r in range(rows):
                lines.append(f"if (oh0 + {r}u < p.OH) {{")
                for q0 in range(0, cols, vout):
                    ind = "    "
                    if q0:  # a later vector of the block may start past the row's end
                        lines.append(f"    if (ow0 + {q0}u < p.OW) {{")
                        ind = "        "
                    lines.append(f"{ind}let o = ((plane * p.OH + oh0 + {r}u) * p.OW + ow0 "
                                 f"+ {q0}u) / {vout}u;")
                    vals = [f"act0(a{r}_{q0 + q} + bias_k)" for q in range(vout)]
                    if self.residual:
                        lines.append(f"{ind}let rv = residual[o];")
                        vals = [f"act1({v} + f32(rv[{q}]))" for q, v in enumerate(vals)]
                    lines.append(f"{ind}out[o] = vec{vout}<{t}>(vec{vout}<f32>("
                                 f"{', '.join(vals)}));")
                    if q0:
                        lines.append("    }")
                lines.append("}")
        names = list(self.inputs) + ["out"]
        btypes = list(types)
        if vin > 1:
            btypes[0] = f"vec{vin}<{types[0]}>"
        if vout > 1:
            btypes[-1] = f"vec{vout}<{types[-1]}>"
            if self.residual:
                btypes[3] = f"vec{vout}<{types[3]}>"
        bindings = _gemm_bindings(names, btypes, [False] * len(self.inputs) + [True])
        fields = "\n".join(f"    {n}: {ty}," for n, ty in self._FIELDS)
        src = (f"{shaders.enable_directives(types)}\nstruct Params {{\n{fields}\n}}\n"
               f"{bindings}\n{act_helpers}"
               + self.linear_main("\n    ".join(lines), _DW_WG))
        return src, self._FIELDS

    def _render_depthwise(self, key, c, types, t):
        names = list(self.inputs) + ["out"]
        bindings = _gemm_bindings(names, types, [False] * len(self.inputs) + [True])
        act_helpers, store = self._epilogue(c, t)
        fields = "\n".join(f"    {n}: {ty}," for n, ty in self._FIELDS)
        enable = "enable f16;" if "f16" in types else ""
        src = f"""{enable}
struct Params {{
{fields}
}}
{bindings}
{act_helpers}
@compute @workgroup_size({_DW_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let o = (wid.y * nwg.x + wid.x) * {_DW_WG}u + lid;
    if (o >= p.n) {{
        return;
    }}
    let pix = o % p.P;
    let k = (o / p.P) % p.KO;
    let n = o / (p.P * p.KO);
    let oh = pix / p.OW;
    let ow = pix % p.OW;
    let xb = (n * p.C + k / p.mult) * p.H;
    let wb = k * {c['kh'] * c['kw']}u;
    let ih0 = i32(oh * {c['sh']}u) - i32(p.pt);
    let iw0 = i32(ow * {c['sw']}u) - i32(p.pl);
    var v0 = 0.0;
    for (var a = 0u; a < {c['kh']}u; a = a + 1u) {{
        let ih = ih0 + i32(a * {c['dh']}u);
        if (ih < 0 || ih >= i32(p.H)) {{
            continue;
        }}
        let xr = (xb + u32(ih)) * p.W;
        for (var b = 0u; b < {c['kw']}u; b = b + 1u) {{
            let iw = iw0 + i32(b * {c['dw']}u);
            if (iw >= 0 && iw < i32(p.W)) {{
                v0 = v0 + f32(x[xr + u32(iw)]) * f32(w[wb + a * {c['kw']}u + b]);
            }}
        }}
    }}
    {store.replace(chr(10), chr(10) + '    ')}
}}
"""
        return src, self._FIELDS

    def launches(self, inputs, output, params, device):
        shapes = self.logical(inputs, output, params)
        x, w = shapes[0], shapes[1]
        out = shapes[-1]
        g = params["group"]
        (pt, pl, _, _) = params["pads"]
        _, a0, b0 = params["activation"]
        _, a1, b1 = params["post_activation"]
        m, ncols, k = self._gemm_dims(shapes, params)
        u = {"M": m, "N": ncols, "K": k, "C": x[1], "H": x[2], "W": x[3], "OH": out[2],
             "OW": out[3], "P": out[2] * out[3], "KO": w[0], "Cg": w[1], "g": 0, "pt": pt,
             "pl": pl, "alpha0": f32_bits(a0), "beta0": f32_bits(b0), "alpha1": f32_bits(a1),
             "beta1": f32_bits(b1), "n": math.prod(out), "mult": max(w[0] // max(x[1], 1), 1),
             "OWB": 0, "OHB": 0}
        if math.prod(out) == 0:
            return []
        if self._algo(shapes, params) == "depthwise":
            rows, cols, _, _ = _dw_block(x, w, out, params, output.dtype)
            if not rows:
                return [Launch(fold_grid(-(-math.prod(out) // _DW_WG), device, self.name), u)]
            owb, ohb = -(-out[3] // cols), -(-out[2] // rows)
            n = out[0] * out[1] * ohb * owb  # one invocation per block
            return [Launch(fold_grid(-(-n // _DW_WG), device, self.name),
                           dict(u, n=n, OWB=owb, OHB=ohb))]
        cfg = self._config(shapes, params, output.dtype, device)
        limit = device.limit("max-compute-workgroups-per-dimension")
        if isinstance(cfg, SkinnyConfig):
            gx, gy = -(-ncols // cfg.cols), -(-m // cfg.rows)
        else:
            gx, gy = -(-ncols // cfg.bn), -(-m // cfg.bm)
        if gx > limit or gy > limit:
            raise ShapeError(f"{self.name}: output {tuple(out)} needs a {gy}×{gx} grid; this "
                             f"adapter allows {limit} per dimension")
        # one launch per group: its rows of w, its channels of x and of out
        return [Launch((gx, gy, 1), dict(u, g=gi)) for gi in range(g)]


class Conv2dResidual(Conv2d):
    """conv2d whose epilogue also adds ``residual`` (same shape as out) before
    ``post_activation``: a residual block's Conv → BatchNorm → Add → Relu in one dispatch."""

    name = "conv2d_residual"
    inputs = ("x", "w", "bias", "residual")
    description = ("2-D convolution + bias + activation, then + residual and a second "
                   "activation, in one dispatch")
    residual = True


# -- conv_transpose2d ------------------------------------------------------------------------------
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


# -- gemm ------------------------------------------------------------------------------------------
class Gemm(NNKernel):
    """out = act(alpha · op(a) · op(b) + beta · c), op transposing the last two axes when asked;
    leading (batch) axes broadcast as numpy.matmul does, c broadcasts to out."""

    name = "gemm"
    inputs = ("a", "b", "c")
    params = (Param("trans_a", "bool", False, "use a's last two axes transposed"),
              Param("trans_b", "bool", False, "use b's last two axes transposed"),
              Param("alpha", "f32", 1.0, "factor on the product"),
              Param("beta", "f32", 1.0, "factor on c"), ACTIVATION, SHAPES)
    description = ("out = activation(alpha · op(a) · op(b) + beta · c), batched with numpy "
                   "broadcasting, on matmul's tiling")
    not_in_place = "gemm reads whole rows"

    def resolve_params(self, params, dt):
        params = dict(params or {}) if isinstance(params, dict) or params is None else params
        cfg = params.pop("_config", None) if isinstance(params, dict) else None
        out = super().resolve_params(params, dt)
        if cfg is not None:
            out["_config"] = _check_config(cfg, self.name)
        return out

    def _dims(self, shapes, params):
        a, b, c = shapes[:3]
        if len(a) < 2 or len(b) < 2:
            raise ShapeError(f"{self.name}: a is {a} and b is {b}; both need at least 2 axes")
        m, ka = (a[-1], a[-2]) if params["trans_a"] else (a[-2], a[-1])
        kb, n = (b[-1], b[-2]) if params["trans_b"] else (b[-2], b[-1])
        if ka != kb:
            raise ShapeError(f"{self.name}: a is {a} and b is {b}; inner dimensions {ka} and "
                             f"{kb} differ")
        batch = broadcast_shape(a[:-2], b[:-2], self.name)
        return batch, m, n, ka

    def out_shape(self, in_shapes, params):
        batch, m, n, _ = self._dims(in_shapes, params)
        return tuple(batch) + (m, n)

    def check_shapes(self, shapes, params):
        want = self.out_shape(shapes, params)
        out = shapes[-1]
        if math.prod(out) != math.prod(want) or (
                params.get("shapes") is None and tuple(out) != want):
            raise ShapeError(f"{self.name}: out is {out}, expected {want}")
        c = tuple(shapes[2])
        # c broadcasts TO the output (numpy's broadcast_shapes(c, out) == out), not only with
        # it: a c of (2, 5) against (2, 1, 5) would otherwise be read as if it were (1, 5)
        if len(c) > len(want) or any(d not in (1, w) for d, w in zip(reversed(c),
                                                                     reversed(want))):
            raise ShapeError(f"{self.name}: c is {c}, which does not broadcast to the output "
                             f"{want}: c may have at most as many axes, each 1 or the "
                             f"output's (counted from the last)")
        self._batch_plan(shapes, params)

    def _batch_plan(self, shapes, params):
        a, b, c = shapes[:3]
        batch, m, n, k = self._dims(shapes, params)
        outs = tuple(batch) + (m, n)
        sa = broadcast_strides(a[:-2], batch)
        sb = broadcast_strides(b[:-2], batch)
        sa = [s * a[-1] * a[-2] for s in sa]
        sb = [s * b[-1] * b[-2] for s in sb]
        cs = broadcast_strides(c, outs)
        so = [math.prod(batch[i + 1:]) * m * n for i in range(len(batch))]
        merged = _merge_dims(batch, sa, sb, cs[:-2], so)
        if len(merged) > MAX_BATCH_DIMS:
            raise ShapeError(f"{self.name}: a {a} and b {b} broadcast over {len(merged)} "
                             f"separate batch axes; at most {MAX_BATCH_DIMS}")
        return merged, cs[-2], cs[-1], m, n, k, math.prod(batch)

    def _config(self, shapes, params, device) -> TileConfig:
        cfg = params.get("_config")
        if cfg is None:
            _, m, n, _ = self._dims(shapes, params)
            cfg = choose_config("gemm", m, n, "f32", device)
        return cfg

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        _check_fits(params.get("_config"), self.name, output.device)

    def constants(self, shapes, params, device=None):
        merged = self._batch_plan(shapes, params)[0]
        return (("config", self._config(shapes, params, device).name), ("ta", params["trans_a"]),
                ("tb", params["trans_b"]), ("nb", len(merged)),
                ("act", params["activation"][0]))

    def _fields(self, nb):
        f = [("M", "u32"), ("N", "u32"), ("K", "u32"), ("csr", "u32"), ("csc", "u32"),
             ("alpha", "f32"), ("beta", "f32"), ("act_a", "f32"), ("act_b", "f32"),
             ("n0", "u32"), ("nend", "u32")]
        for d in range(nb):
            f += [(f"bd{d}", "u32"), (f"ba{d}", "u32"), (f"bb{d}", "u32"), (f"bc{d}", "u32"),
                  (f"bo{d}", "u32")]
        return tuple(f)

    def render(self, key):
        c = dict(key.constants)
        types = [{"f32": "f32", "f16": "f16"}[d] for d in key.dtypes]
        t = types[-1]
        fields = self._fields(c["nb"])
        bindings = _gemm_bindings(["a", "b", "c", "out"], types, [False, False, False, True])
        s = "f32"
        if c["ta"]:  # op(a)[r, k] = a[k, r]
            ia, ia_step = "za + k * p.M + r", "p.M"
        else:
            ia, ia_step = "za + r * p.K + k", "1u"
        if c["tb"]:  # op(b)[k, col] = b[col, k]; a column band binds from its first column
            ib, ib_step = "zb + (col - p.n0) * p.K + k", "p.K"
        else:
            ib, ib_step = "zb + k * p.N + col", "1u"
        helpers = _guarded("a", s) + _guarded("b", s) + act_fn("act", c["act"], "p.act_a",
                                                                "p.act_b")
        helpers += f"""fn load_a4(r: u32, k: u32, kend: u32) -> vec4<{s}> {{
    let i = {ia};
    let ok = r < p.M;
    return vec4<{s}>(ld_a(i, ok && k < kend), ld_a(i + {ia_step}, ok && k + 1u < kend),
                     ld_a(i + 2u * {ia_step}, ok && k + 2u < kend),
                     ld_a(i + 3u * {ia_step}, ok && k + 3u < kend));
}}
fn load_b4(k: u32, col: u32, kend: u32) -> vec4<{s}> {{
    let i = {ib};
    let ok = k < kend;
    return vec4<{s}>(ld_b(i, ok && col < p.nend), ld_b(i + {ib_step}, ok && col + 1u < p.nend),
                     ld_b(i + 2u * {ib_step}, ok && col + 2u < p.nend),
                     ld_b(i + 3u * {ib_step}, ok && col + 3u < p.nend));
}}
fn store4(r: u32, col: u32, acc: vec4<f32>) {{
    for (var lane = 0u; lane < 4u; lane = lane + 1u) {{
        let cc = col + lane;
        if (cc < p.nend) {{
            let bias = f32(c[zc + r * p.csr + cc * p.csc]);
            out[zo + r * p.N + cc] = {t}(act(p.alpha * acc[lane] + p.beta * bias));
        }}
    }}
}}
"""
        batch = ["za = 0u;", "zb = 0u;", "zc = 0u;", "zo = 0u;", "var rem = wid.z;"]
        for d in reversed(range(c["nb"])):
            batch += [f"let i{d} = rem % p.bd{d};", f"rem = rem / p.bd{d};",
                      f"za = za + i{d} * p.ba{d};", f"zb = zb + i{d} * p.bb{d};",
                      f"zc = zc + i{d} * p.bc{d};", f"zo = zo + i{d} * p.bo{d};"]
        src = _render_tiled(TileConfig.parse(c["config"]), t, fields, bindings, helpers,
                            "\n    ".join(batch), "p.n0")
        return src, fields

    def launches(self, inputs, output, params, device):
        shapes = self.logical(inputs, output, params)
        merged, csr, csc, m, n, k, nb = self._batch_plan(shapes, params)
        if m == 0 or n == 0 or nb == 0:
            return []
        if nb > device.limit("max-compute-workgroups-per-dimension"):
            raise ShapeError(f"{self.name}: {nb} batches exceed one dispatch's z range")
        cfg = self._config(shapes, params, device)
        _, act_a, act_b = params["activation"]
        u = {"M": m, "N": n, "K": k, "csr": csr, "csc": csc, "alpha": params["alpha"],
             "beta": params["beta"], "act_a": f32_bits(act_a), "act_b": f32_bits(act_b)}
        for d, (size, (ba, bb, bc, bo)) in enumerate(merged):
            u.update({f"bd{d}": size, f"ba{d}": ba, f"bb{d}": bb, f"bc{d}": bc, f"bo{d}": bo})
        limit = device.limit("max-compute-workgroups-per-dimension")
        gy = -(-m // cfg.bm)
        bind_limit = device.limit("max-storage-buffer-binding-size")
        esize = 2 if inputs[1].dtype == "f16" else 4
        b_bytes = inputs[1].size * esize
        if b_bytes <= bind_limit:
            bands = [(0, n)]
        else:
            # b wider than one binding (a big classifier on a small adapter): column bands,
            # each binding its own rows of b (trans_b) at a 256-byte aligned offset
            if not params["trans_b"] or nb != 1:
                raise ShapeError(f"{self.name}: b {inputs[1].shape} is {b_bytes} bytes, more "
                                 f"than one binding holds ({bind_limit}); only an unbatched "
                                 f"b with trans_b splits into bands")
            per = max(64, (bind_limit // (k * esize)) // 64 * 64)
            bands = [(n0, min(n, n0 + per)) for n0 in range(0, n, per)]
        out = []
        for n0, n1 in bands:
            gx = -(-(n1 - n0) // cfg.bn)
            if gx > limit or gy > limit:
                raise ShapeError(f"{self.name}: output ({m}, {n}) needs a {gy}×{gx} grid; this "
                                 f"adapter allows {limit} per dimension")
            ranges = None
            if len(bands) > 1:
                full = [(0, (b.size * esize + 15) // 16 * 16) for b in [*inputs, output]]
                full[1] = (n0 * k * esize, (n1 - n0) * k * esize)
                ranges = tuple(full)
            out.append(Launch((gx, gy, nb), dict(u, n0=n0, nend=n1), ranges))
        return out


# -- autotuning ------------------------------------------------------------------------------------
def _measure(kind: str, cfg: TileConfig, dtype: str, cls: str, device) -> float:
    """Seconds of one gemm of the class's tuning shape with ``cfg`` on ``device``."""
    from ...buffer import empty
    from ..core.base import bind

    m, n, k = _TUNE_SHAPES[cls]
    bufs = [empty(s, dtype, f"autotune-{kind}", device=device)
            for s in [(m, k), (k, n), (1,), (m, n)]]
    try:
        d = bind(GEMM, bufs[:3], bufs[3], {"_config": cfg})
        return conv_configs.time_calls(device, d.raw_calls())
    finally:
        for b in bufs:
            b.free()


def _measure_conv(kernel: Conv2d, shapes, params, cfg, dtype: str, device) -> float:
    """Seconds of one run of this convolution layer with ``cfg``, on buffers of its shapes
    (a batch of at most conv_configs.TUNE_MAX_N output pixels), on ``device``."""
    from ...buffer import empty
    from ..core.base import bind

    shapes = [tuple(s) for s in shapes]
    x, out = shapes[0], shapes[-1]
    pixels = out[2] * out[3]
    batch = max(1, min(x[0], conv_configs.TUNE_MAX_N // max(pixels, 1)))
    batched = [(batch,) + s[1:] if i in (0, len(shapes) - 1) or (kernel.residual and i == 3)
               else s for i, s in enumerate(shapes)]
    bufs = [empty(s, dtype, f"autotune-{kernel.name}", device=device) for s in batched]
    try:
        p = {name: params[name] for name in ("strides", "pads", "dilations", "group",
                                             "activation", "post_activation", "precision")}
        d = bind(kernel, bufs[:-1], bufs[-1], dict(p, _config=cfg))
        return conv_configs.time_calls(device, d.raw_calls())
    finally:
        for b in bufs:
            b.free()


CONV2D = Conv2d()
CONV2D_RESIDUAL = Conv2dResidual()
CONV_TRANSPOSE2D = ConvTranspose2d()
GEMM = Gemm()


def conv_kernels() -> list:
    return [CONV2D, CONV2D_RESIDUAL, CONV_TRANSPOSE2D, GEMM]
