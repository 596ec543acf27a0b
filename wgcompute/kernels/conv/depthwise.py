"""conv2d's depthwise programs (one input channel per group): a blocked kernel (rows × columns
of outputs per invocation sharing the input values their windows overlap on) and a direct one
(one output per invocation) for windows too wide to unroll."""

from __future__ import annotations

import math

from ..core import shaders
from ..core.base import Launch, fold_grid
from ..nn.nn import NNKernel
from .programs import FIELDS, ConvProgram, fields_wgsl, wgsl_types

DW_WG = 64
DW_COLS = 4  # outputs along a row per depthwise invocation (f16 may take 8: dw_block)
DW_MAX_LOADS = 128  # input values one invocation loads (unrolled code); beyond: one output each


def dw_rows(kh, kw, sh, sw, dh, dw, oh, cols: int = DW_COLS) -> int:
    """Output rows per invocation of the blocked depthwise kernel (a block of rows × ``cols``
    columns shares the input values its windows overlap on): 2, 1, or 0 when even one row's
    window span is too wide to unroll (then one invocation per output)."""
    span = (cols - 1) * sw + (kw - 1) * dw + 1
    for rows in ((2, 1) if oh >= 2 else (1,)):
        if ((rows - 1) * sh + (kh - 1) * dh + 1) * span <= DW_MAX_LOADS:
            return rows
    return 0


def dw_vectors(w: int, ow: int) -> tuple[int, int]:
    """Vector widths of the blocked depthwise kernel's loads of x and stores of out: 4 (or
    2) when the input (output) rows hold a multiple of 4 (2) values, so that a vector never
    straddles two rows and every row starts on a vector boundary, else 1 (scalars). A block's
    4 output columns then leave in one vec4 (or two vec2) store, and its window's columns
    come in as whole aligned vectors."""
    def width(n: int) -> int:
        return 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1

    return width(w), width(ow)


def dw_block(x_shape, w_shape, out_shape, params, dtype) -> tuple[int, int, int, int]:
    """(rows, columns, vin, vout) of the blocked depthwise kernel for this layer (rows 0: one
    output per invocation). f16 at stride 1 with vec4 rows takes 8 columns: its invocations
    then move as many bytes as f32's with 4 (MobileNetV2's stride-1 layers at batch 256 on
    an H200: 0.84-0.95 of the 4-column time; f32, or f16 at stride 2, were 9-31% slower)."""
    (sh, sw), (dh, dw) = params["strides"], params["dilations"]
    vin, vout = dw_vectors(x_shape[3], out_shape[3])
    cols = DW_COLS
    if dtype == "f16" and sw == 1 and vin == vout == 4:  # a DType equals its name
        cols = 2 * DW_COLS
    rows = dw_rows(w_shape[2], w_shape[3], sh, sw, dh, dw, out_shape[2], cols)
    if not rows and cols != DW_COLS:  # too wide a window for 8 columns: try 4
        cols = DW_COLS
        rows = dw_rows(w_shape[2], w_shape[3], sh, sw, dh, dw, out_shape[2], cols)
    return rows, cols, vin, vout


def dw_constants(shapes, params, dtype) -> list:
    """The depthwise programs' key constants past the window's: the block's rows (0: the
    direct program), its columns where not 4, and the vector widths with the left pad."""
    rows, cols, vin, vout = dw_block(shapes[0], shapes[1], shapes[-1], params, dtype)
    c = [("dw_rows", rows)]
    if cols != DW_COLS:
        c.append(("dw_cols", cols))
    if rows and (vin > 1 or vout > 1):
        # the left pad places each window on the vector blocks it reads
        c += [("vin", vin), ("vout", vout), ("pl", params["pads"][1])]
    return c


def _vec(d: int) -> str:
    """WGSL name suffix of vector offset d (m: minus)."""
    return f"{'m' if d < 0 else ''}{abs(d)}"


class DepthwiseProgram(ConvProgram):
    """Both depthwise programs: the key's ``dw_rows`` picks the blocked one (> 0) or the
    direct one (0)."""

    algo = "depthwise"

    def render(self, key):
        c = dict(key.constants)
        if c["dw_rows"]:
            return self._render_block(c, wgsl_types(key))
        return self._render_direct(c, wgsl_types(key))

    def _render_direct(self, c, types):
        src = shaders.render(shaders.load("conv/conv_depthwise.wgsl"), {
            "enable": shaders.enable_directives(types), "fields": fields_wgsl(FIELDS),
            "bindings": self.bindings(types), "acts": self.act_helpers(c), "wg": DW_WG,
            "residual": self.residual, "t": types[-1],
            **{n: c[n] for n in ("kh", "kw", "sh", "sw", "dh", "dw")}},
            name="conv/conv_depthwise.wgsl")
        return src, FIELDS

    def _render_block(self, c, types):
        """Each invocation: ``dw_rows`` output rows × 4 columns (8: ``dw_cols``, dw_block)
        of one channel plane. The input values under the block are loaded once each (a 3×3
        stride-1 window over a 2×4 block: 24 loads for 8 outputs, not 72), every index is
        clamped into the plane and zeroed outside it (no branches), and the weights are read
        once per invocation. With ``vin`` / ``vout`` > 1 (rows a multiple of that many
        values) x comes in as aligned vectors of ``vin`` (a 3×3 stride-1 row: 3 vec4 loads,
        not 6 scalars) and each output row leaves in columns / ``vout`` vector stores."""
        rows, cols = c["dw_rows"], c.get("dw_cols", DW_COLS)
        vin, vout = c.get("vin", 1), c.get("vout", 1)
        lines = self._block_setup(c, rows, cols)
        lines += self._block_columns(c, cols, vin)
        lines += self._block_window(c, rows, cols, vin)
        if vout == 1:
            lines += self._block_scalar_stores(rows, cols, types[-1])
        else:
            lines += self._block_vector_stores(rows, cols, vout, types[-1])
        bindings = self.bindings(types, x=f"vec{vin}" if vin > 1 else "",
                                 out=f"vec{vout}" if vout > 1 else "")
        src = (f"{shaders.enable_directives(types)}\nstruct Params {{\n{fields_wgsl(FIELDS)}\n}}"
               f"\n{bindings}\n{self.act_helpers(c)}"
               + NNKernel.linear_main("\n".join(lines), DW_WG))
        return src, FIELDS

    @staticmethod
    def _block_setup(c, rows: int, cols: int) -> list[str]:
        """The block's plane, first output row and column, and its weights and sums."""
        kh, kw, sh = c["kh"], c["kw"], c["sh"]
        lines = ["let owb = i % p.OWB;", "let rest = i / p.OWB;",
                 f"let oh0 = (rest % p.OHB) * {rows}u;", "let plane = rest / p.OHB;",
                 f"let ow0 = owb * {cols}u;", "let k = plane % p.KO;",
                 "let xb = (plane / p.KO * p.C + k / p.mult) * p.H * p.W;",
                 f"let ih0 = i32(oh0 * {sh}u) - i32(p.pt);",
                 f"let wb = k * {kh * kw}u;"]
        lines += [f"let w{a}_{b} = f32(w[wb + {a * kw + b}u]);"
                  for a in range(kh) for b in range(kw)]
        return lines + [f"var a{r}_{q} = 0.0;" for r in range(rows) for q in range(cols)]

    @staticmethod
    def _block_columns(c, cols: int, vin: int) -> list[str]:
        """The window's column offsets and validity, shared by every row: per column (scalar
        loads) or per vector of ``vin`` columns."""
        sw, span_w = c["sw"], (cols - 1) * c["sw"] + (c["kw"] - 1) * c["dw"] + 1
        if vin == 1:
            lines = [f"let iw0 = i32(ow0 * {sw}u) - i32(p.pl);"]
            for j in range(span_w):
                lines += [f"let iwc{j} = iw0 + {j};",
                          f"let cw{j} = u32(clamp(iwc{j}, 0, i32(p.W) - 1));",
                          f"let okw{j} = iwc{j} >= 0 && iwc{j} < i32(p.W);"]
            return lines
        # window column j is x's column ow0·sw − pl + j: lane (j − pl) mod vin of the
        # vector ow0·sw/vin + ⌊(j − pl) / vin⌋ (ow0·sw is a multiple of vin)
        pl = c["pl"]
        lines = [f"let vb0 = i32(ow0 * {sw}u / {vin}u);", f"let nvw = i32(p.W / {vin}u);"]
        for d in sorted({(j - pl) // vin for j in range(span_w)}):
            n = _vec(d)
            lines += [f"let bw{n} = vb0 + {d};",
                      f"let cb{n} = u32(clamp(bw{n}, 0, nvw - 1));",
                      f"let okb{n} = bw{n} >= 0 && bw{n} < nvw;"]
        return lines

    @staticmethod
    def _block_window(c, rows: int, cols: int, vin: int) -> list[str]:
        """One scope per input row under the block: its values loaded once, each multiplied
        into every output whose window holds it."""
        kh, kw, sh, sw, dh, dw = (c[n] for n in ("kh", "kw", "sh", "sw", "dh", "dw"))
        span_h = (rows - 1) * sh + (kh - 1) * dh + 1
        pl, vt = c.get("pl", 0), f"vec{vin}<f32>"
        lines = []
        for y in range(span_h):
            lines += ["{", f"    let ih = ih0 + {y};",
                      "    let okh = ih >= 0 && ih < i32(p.H);",
                      "    let xr = xb + u32(clamp(ih, 0, i32(p.H) - 1)) * p.W;"]
            used = {}
            for r, a, q, b in ((r, a, q, b) for r in range(rows) for a in range(kh)
                               if r * sh + a * dh == y for q in range(cols) for b in range(kw)):
                used.setdefault(q * sw + b * dw, []).append((r, q, a, b))
            if vin > 1:
                for d in sorted({(j - pl) // vin for j in used}):
                    lines.append(f"    let xv{_vec(d)} = select({vt}(0.0), {vt}(x[xr / {vin}u + "
                                 f"cb{_vec(d)}]), okh && okb{_vec(d)});")
            for j in sorted(used):
                if vin == 1:
                    lines.append(f"    let v{j} = select(0.0, f32(x[xr + cw{j}]), "
                                 f"okh && okw{j});")
                else:
                    lines.append(f"    let v{j} = xv{_vec((j - pl) // vin)}[{(j - pl) % vin}];")
                lines += [f"    a{r}_{q} = fma(v{j}, w{a}_{b}, a{r}_{q});"
                          for r, q, a, b in used[j]]
            lines.append("}")
        return lines

    def _block_scalar_stores(self, rows: int, cols: int, t: str) -> list[str]:
        lines = []
        for r in range(rows):
            for q in range(cols):
                lines += [f"if (oh0 + {r}u < p.OH && ow0 + {q}u < p.OW) {{",
                          f"    let o = (plane * p.OH + oh0 + {r}u) * p.OW + ow0 + {q}u;",
                          f"    let v0 = a{r}_{q};", *self.store_lines(t), "}"]
        return lines

    def _block_vector_stores(self, rows: int, cols: int, vout: int, t: str) -> list[str]:
        """Each output row of the block in vectors of ``vout``; a later vector of the block
        may start past the row's end."""
        lines = ["let bias_k = f32(bias[k]);"]
        for r in range(rows):
            lines.append(f"if (oh0 + {r}u < p.OH) {{")
            for q0 in range(0, cols, vout):
                if q0:
                    lines.append(f"if (ow0 + {q0}u < p.OW) {{")
                lines.append(f"let o = ((plane * p.OH + oh0 + {r}u) * p.OW + ow0 "
                             f"+ {q0}u) / {vout}u;")
                vals = [f"act0(a{r}_{q0 + q} + bias_k)" for q in range(vout)]
                if self.residual:
                    lines.append("let rv = residual[o];")
                    vals = [f"act1({v} + f32(rv[{q}]))" for q, v in enumerate(vals)]
                lines.append(f"out[o] = vec{vout}<{t}>(vec{vout}<f32>({', '.join(vals)}));")
                if q0:
                    lines.append("}")
            lines.append("}")
        return lines

    @staticmethod
    def launches(x, w, out, params, dtype, uniform: dict, device, name: str) -> list[Launch]:
        """One invocation per block of outputs (per output for the direct program)."""
        rows, cols, _, _ = dw_block(x, w, out, params, dtype)
        if not rows:
            return [Launch(fold_grid(-(-math.prod(out) // DW_WG), device, name), uniform)]
        owb, ohb = -(-out[3] // cols), -(-out[2] // rows)
        n = out[0] * out[1] * ohb * owb
        return [Launch(fold_grid(-(-n // DW_WG), device, name),
                       dict(uniform, n=n, OWB=owb, OHB=ohb))]
