"""conv2d's implicit GEMM on matmul's shared-memory tiles (a TileConfig): w is GEMM a, x is
gathered as GEMM b (im2col, never materialized), the epilogue writes NCHW out."""

from __future__ import annotations

from ..core import shaders
from ..matmul.matmul import TileConfig
from .programs import FIELDS, ConvProgram, layer_dims, render_tiled, wgsl_types


class TiledProgram(ConvProgram):
    """The tiled implicit GEMM. Its loaders (conv_tiled_io.wgsl): w as vec4 when K % 4 == 0
    (``vec_w``), x as vec4 along the pixels when a 1×1 stride-1 layer has pixels per image a
    multiple of 4 (``vec_p``), a plain gather for other pointwise layers, and the im2col
    gather (kernel offsets as literals) for the rest."""

    algo = "gemm"

    def render(self, key):
        c = dict(key.constants)
        types = wgsl_types(key)
        t = types[-1]
        mixed = c.get("mixed", False)
        P, OW = layer_dims(c)
        io = shaders.render(shaders.load("conv/conv_tiled_io.wgsl"), {
            "s": "f16" if mixed else "f32",  # what the tiles hold (the loaders' vec4 type)
            "vec_w": c["vec_w"], "vec_p": bool(c.get("vec_p")), "pointwise": c["pointwise"],
            "P": P, "OW": OW, **{n: c[n] for n in ("kh", "kw", "sh", "sw", "dh", "dw")}},
            name="conv/conv_tiled_io.wgsl")
        bindings = self.bindings(types, x="vec4" if c.get("vec_p") else "",
                                 w="vec4" if c.get("vec_w") else "",
                                 out="vec4" if c.get("vec_p") else "")
        src = render_tiled(TileConfig.parse(c["config"]), t, FIELDS, bindings,
                           self.store4(c, t) + io, mixed=mixed)
        return src, FIELDS
