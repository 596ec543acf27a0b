"""conv2d's skinny implicit GEMM (a SkinnyConfig, conv_skinny.wgsl): for few output columns
over a long K, or a short K; each invocation sums rows × 4 columns over a slice of K reading w
and x straight from memory, the slices meeting in workgroup memory."""

from __future__ import annotations

from ..core import shaders
from .conv_configs import SkinnyConfig
from .programs import FIELDS, ConvProgram, fields_wgsl, layer_dims, wgsl_types


def _vec_columns(P: str):
    """N % 4 == 0: a group of 4 columns is inside one image, a vec4 of x."""
    setup = ["let cc = min(c, p.N - 4u);",
             f"let xb = ((cc / {P}) * p.C + p.g * p.Cg) * ({P} / 4u) + (cc % {P}) / 4u;",
             f"let P4 = {P} / 4u;"]

    def loadx(k):
        return [f"let xv = vec4<f32>(x[xb + {k} * P4]);"]
    return setup, loadx


def _pointwise_columns(P: str):
    """1×1 stride 1: each lane's offset into x; lanes past N read the last column (never
    stored)."""
    setup = []
    for ln in range(4):
        setup += [f"let cl{ln} = min(c + {ln}u, p.N - 1u);",
                  f"let xo{ln} = ((cl{ln} / {P}) * p.C + p.g * p.Cg) * {P} + cl{ln} % {P};"]

    def loadx(k):
        return [f"let kp = {k} * {P};",
                "let xv = vec4<f32>(f32(x[xo0 + kp]), f32(x[xo1 + kp]), "
                "f32(x[xo2 + kp]), f32(x[xo3 + kp]));"]
    return setup, loadx


def _window_columns(c, P: str, OW: str):
    """Any window: each lane's input position; k picks the channel and the kernel offset."""
    setup = []
    for ln in range(4):
        setup += [f"let cl{ln} = min(c + {ln}u, p.N - 1u);",
                  f"let px{ln} = cl{ln} % {P};",
                  f"let ih{ln} = i32((px{ln} / {OW}) * {c['sh']}u) - i32(p.pt);",
                  f"let iw{ln} = i32((px{ln} % {OW}) * {c['sw']}u) - i32(p.pl);",
                  f"let xb{ln} = ((cl{ln} / {P}) * p.C + p.g * p.Cg) * p.H * p.W;"]
    khw, kw = c["kh"] * c["kw"], c["kw"]

    def loadx(k):
        lines = [f"let ci = {k} / {khw}u;", f"let rr = {k} % {khw}u;",
                 f"let dy = i32((rr / {kw}u) * {c['dh']}u);",
                 f"let dx = i32((rr % {kw}u) * {c['dw']}u);",
                 "let cb = ci * p.H * p.W;", "var xv = vec4<f32>(0.0);"]
        for ln in range(4):
            lines += [f"{{ let ih = ih{ln} + dy; let iw = iw{ln} + dx;",
                      "  if (ih >= 0 && ih < i32(p.H) && iw >= 0 && iw < i32(p.W)) {",
                      f"    xv[{ln}] = f32(x[xb{ln} + cb + u32(ih) * p.W + u32(iw)]);",
                      "  }", "}"]
        return lines
    return setup, loadx


def _finish(cfg: SkinnyConfig) -> tuple[str, list[str]]:
    """(the workgroup array of partial sums, the lines storing the results): with S > 1
    slices the partial sums meet in workgroup memory first."""
    if cfg.s == 1:
        return "", [f"if (r0 + {i}u < p.M) {{ store4(r0 + {i}u, c, acc{i}); }}"
                    for i in range(cfg.tr)]
    finish = [f"part[(s * BR + ry * TR + {i}u) * CX + cx] = acc{i};" for i in range(cfg.tr)]
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
    return "var<workgroup> part: array<vec4<f32>, S * BR * CX>;", finish


class SkinnyProgram(ConvProgram):
    """The skinny implicit GEMM for one SkinnyConfig (the key's ``config``)."""

    algo = "skinny"

    def render(self, key):
        c = dict(key.constants)
        types = wgsl_types(key)
        cfg = SkinnyConfig.parse(c["config"])
        P, OW = layer_dims(c)
        if c["vec_p"]:
            setup, loadx = _vec_columns(P)
        elif c["pointwise"]:
            setup, loadx = _pointwise_columns(P)
        else:
            setup, loadx = _window_columns(c, P, OW)
        setup = [f"var acc{i} = vec4<f32>(0.0);" for i in range(cfg.tr)] + setup
        # rows past M read the last row (never stored)
        rows = [f"let wr{i} = (p.g * p.M + min(r0 + {i}u, p.M - 1u)) * p.K;"
                for i in range(cfg.tr)]

        def body(k):
            return loadx(k) + [f"acc{i} = fma(vec4<f32>(f32(w[wr{i} + {k}])), xv, acc{i});"
                               for i in range(cfg.tr)]

        body4 = []
        for u in range(4):
            body4 += ["{", *body("k" if u == 0 else f"(k + {u}u * S)"), "}"]
        partials, finish = _finish(cfg)
        vec = "vec4" if c.get("vec_p") else ""
        subs = {"ENABLE": shaders.enable_directives(types), "FIELDS": fields_wgsl(FIELDS),
                "BINDINGS": self.bindings(types, x=vec, out=vec,
                                          w="vec4" if c.get("vec_w") else ""),
                "HELPERS": self.store4(c, types[-1]), "CX": cfg.cx, "S": cfg.s, "RY": cfg.ry,
                "TR": cfg.tr, "THREADS": cfg.threads, "PARTIALS": partials,
                "SETUP": "\n".join(setup), "ROWS": "\n".join(rows), "BODY4": "\n".join(body4),
                "BODY1": "\n".join(body("k")), "FINISH": "\n".join(finish)}
        return (shaders.render(shaders.load("conv/conv_skinny.wgsl"), subs,
                               name="conv/conv_skinny.wgsl"), FIELDS)
