"""conv2d (and conv2d_residual): an op that checks its arguments and chooses among its
programs, the implicit GEMM on matmul's tiles (tiled.py) or the skinny kernel (skinny.py),
conv_configs.py choosing and tuning the config, and the depthwise kernels (depthwise.py).

conv2d's epilogue adds the bias, applies an activation, adds a residual tensor and applies a
second activation, so Conv → BatchNorm (folded into the weights) → activation → Add → activation
is one dispatch. gemm (gemm.py) and conv_transpose2d (transpose.py) live beside it."""

from __future__ import annotations

import math

from ...errors import ArgumentError, ShapeError
from ..core.base import Launch, Param, PipelineKey
from ..matmul.matmul import MIXED_BK, TileConfig
from ..nn.nn import ACTIVATION, SHAPES, NNKernel, f32_bits, pool_out_size
from . import conv_configs
from .conv_configs import ConvProblem, SkinnyConfig
from .depthwise import DepthwiseProgram, dw_constants
from .gemm import GEMM, Gemm, check_config, check_fits, choose_config
from .skinny import SkinnyProgram
from .tiled import TiledProgram
from .transpose import CONV_TRANSPOSE2D, ConvTranspose2d

__all__ = ["CONV2D", "CONV2D_RESIDUAL", "CONV_TRANSPOSE2D", "GEMM", "Conv2d", "Conv2dResidual",
           "ConvTranspose2d", "Gemm", "choose_config", "conv_kernels"]

ALGOS = ("auto", "gemm", "skinny", "depthwise")
_PROGRAMS = (TiledProgram, SkinnyProgram, DepthwiseProgram)


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
            out["_config"] = check_config(cfg, self.name, skinny_ok=True)
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
        """The pinned ``_config``, else the tuned (or default) one for this layer's shape
        (looked up: ``bind`` tunes first, in tune_problems);
        ``algo`` "gemm" keeps to the tiled kernel, "skinny" to the skinny one."""
        cfg = params.get("_config")
        if cfg is not None:
            return cfg
        problem = self._problem(shapes, params, dtype)
        if params["algo"] == "skinny":
            return conv_configs.skinny_default(problem.m, problem.n, problem.k)
        return conv_configs.choose(problem, device, params["algo"] != "gemm")

    def pin(self, inputs, output, params) -> dict:
        """The tuned program and tile fixed as ``_config`` for this binding (Kernel.pin: the
        key's shader and the launches' grid must be of one tile)."""
        if params.get("_config") is not None or output is None:
            return params
        shapes = self.logical(inputs, output, params)
        if self._algo(shapes, params) != "gemm":
            return params
        return dict(params, _config=self._config(shapes, params, output.dtype, output.device))

    def tune_problems(self, inputs, output, params):
        shapes = self.logical(inputs, output, params)
        if params.get("_config") is not None or params["algo"] == "skinny" \
                or self._algo(shapes, params) != "gemm":
            return []
        dtype, device = output.dtype, output.device
        return [conv_configs.tune_problem(
            self._problem(shapes, params, dtype), device,
            lambda c: _measure_conv(self, shapes, params, c, dtype, device),
            params["algo"] != "gemm")]

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        if params.get("precision") == "mixed" and output.dtype != "f16":
            raise ArgumentError(f"{self.name}: param 'precision' 'mixed' (f16 sums over each "
                                f"k slice) needs f16 buffers; {output.dtype} sums in "
                                f"{output.dtype}: leave precision out or pass 'f32'")
        check_fits(params.get("_config"), self.name, output.device)

    def key(self, inputs, output, params):
        dtypes = tuple(b.dtype for b in [*inputs, output])
        return PipelineKey(self.name, dtypes, self.constants(
            self.logical(inputs, output, params), params, output.device, output.dtype))

    def constants(self, shapes, params, device=None, dtype: str = "f32"):
        """The key's constants: the program ("algo": gemm for the tiled implicit GEMM, skinny,
        depthwise), the window, the activations, then what that program specializes on."""
        w = shapes[1]
        (sh, sw), (dh, dw) = params["strides"], params["dilations"]
        algo = self._algo(shapes, params)
        c = [("kh", w[2]), ("kw", w[3]), ("sh", sh), ("sw", sw), ("dh", dh),
             ("dw", dw), ("act0", params["activation"][0]),
             ("act1", params["post_activation"][0])]
        if algo == "depthwise":
            c += dw_constants(shapes, params, dtype)
        elif algo == "gemm":
            cfg = self._config(shapes, params, dtype, device)
            if isinstance(cfg, SkinnyConfig):
                algo = "skinny"
            c += self._gemm_constants(shapes, params, cfg, algo, dtype)
        return (("algo", algo), *c)

    @staticmethod
    def _gemm_constants(shapes, params, cfg, algo: str, dtype: str) -> list:
        """The implicit GEMMs' constants: config, the loaders' vector forms, mixed precision,
        and the pixels per image and output width (the column -> (image, pixel, row, column)
        divisions of every load and store become multiplications)."""
        w, out = shapes[1], shapes[-1]
        (sh, sw) = params["strides"]
        k = w[1] * w[2] * w[3]
        pointwise = (w[2], w[3], sh, sw) == (1, 1, 1, 1) and not any(params["pads"])
        # pixels per image a multiple of 4: a column group of 4 never straddles two
        # images, so x, the residual and out move as vec4 along the pixels
        vec_p = pointwise and (out[2] * out[3]) % 4 == 0
        c = [("config", cfg.name), ("vec_w", k % 4 == 0 and algo == "gemm"),
             ("pointwise", pointwise), ("vec_p", vec_p)]
        if (algo == "gemm" and dtype == "f16" and params.get("precision") == "mixed"
                and cfg.bk in MIXED_BK):
            c.append(("mixed", True))
        return c + [("P", out[2] * out[3]), ("OW", out[3])]

    def program(self, algo: str):
        """The program rendering keys whose "algo" is ``algo`` (one per op and algo)."""
        programs = self.__dict__.get("_programs")
        if programs is None:
            programs = self._programs = {p.algo: p(self.residual) for p in _PROGRAMS}
        return programs[algo]

    def render(self, key):
        return self.program(dict(key.constants)["algo"]).render(key)

    def launches(self, inputs, output, params, device):
        shapes = self.logical(inputs, output, params)
        x, w = shapes[0], shapes[1]
        out = shapes[-1]
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
            return DepthwiseProgram.launches(x, w, out, params, output.dtype, u, device,
                                             self.name)
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
        return [Launch((gx, gy, 1), dict(u, g=gi)) for gi in range(params["group"])]


class Conv2dResidual(Conv2d):
    """conv2d whose epilogue also adds ``residual`` (same shape as out) before
    ``post_activation``: a residual block's Conv → BatchNorm → Add → Relu in one dispatch."""

    name = "conv2d_residual"
    inputs = ("x", "w", "bias", "residual")
    description = ("2-D convolution + bias + activation, then + residual and a second "
                   "activation, in one dispatch")
    residual = True



# -- autotuning------------------------------------------------------------------------------------
def _measure_conv(kernel: Conv2d, shapes, params, cfg, dtype: str, device) -> float:
    """Seconds of one run of this convolution layer with ``cfg``, on buffers of its shapes
    (a batch of at most conv_configs.TUNE_MAX_N output pixels), on ``device``."""
    from ...buffer import empty
    from ..core.bind import bind

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


def conv_kernels() -> list:
    return [CONV2D, CONV2D_RESIDUAL, CONV_TRANSPOSE2D, GEMM]
