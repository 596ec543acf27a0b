"""Layer, group and instance normalization in one kernel (layer_norm.wgsl): a workgroup per
row computes the row's mean and variance and writes the normalized, scaled and shifted row."""

from __future__ import annotations

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid

WG = 128
DTYPE_NAMES = ("f32", "f16", "f64")


class LayerNorm(BuiltinKernel):
    """out (rows, n) = (x - mean) / sqrt(var + eps) · scale + bias, mean and var per row of
    x (rows, n); scale and bias of x's dtype, per element of a row (n,) by default, or per
    channel (groups·cpg,) where a row is a group of cpg channels of ``spatial`` elements
    (bias=False: bias is not read; pass scale again)."""

    name = "layer_norm"
    inputs = ("x", "scale", "bias")
    dtypes = DTYPE_NAMES
    workgroup_size = WG
    not_in_place = None  # a row is read twice by its own workgroup before it is written
    description = "out = (x - mean) / sqrt(var + eps) * scale + bias, per row"
    params = (Param("n", "u32", doc="elements per row"),
              Param("eps", "f32", 1e-5, "added to the variance"),
              Param("bias", "bool", True, "whether bias is added (else it is not read)"),
              Param("groups", "u32", 1, "groups per sample (rows cycle through them)"),
              Param("cpg", "u32", 0, "channels per group (0: scale per element of a row)"),
              Param("spatial", "u32", 1, "elements per channel"),
              Param("center", "bool", True, "subtract the mean (False: RMS normalization)"))

    def check(self, inputs, output, params) -> None:
        x, scale, bias = inputs
        n, cpg = params["n"], params["cpg"]
        for name, b in (("scale", scale), ("bias", bias), ("out", output)):
            if b.dtype != x.dtype:
                raise DtypeError(f"{self.name}: {name} is {b.dtype}, x is {x.dtype}; they "
                                 f"must match")
        per = n if cpg == 0 else params["groups"] * cpg
        if n == 0 or x.size % n or scale.size != per or bias.size != per or \
                output.size != x.size or (cpg and n != cpg * params["spatial"]):
            raise ShapeError(f"{self.name}: x {x.shape}, scale {scale.shape}, bias "
                             f"{bias.shape}, out {output.shape} do not make rows of {n}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), (("bias", bool(params["bias"])),
                                                        ("center", bool(params["center"]))))

    def render(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        src = shaders.render(shaders.load("nn/layer_norm.wgsl"), {
            "T": dt.wgsl, "W": "f64" if dt.name == "f64" else "f32", "F16": dt.name == "f16",
            "BIAS": dict(key.constants)["bias"], "CENTER": dict(key.constants)["center"],
            "WG": WG,
            "HALVES": [WG >> k for k in range(1, WG.bit_length())]}, name="nn/layer_norm.wgsl")
        return src, (("rows", "u32"), ("n", "u32"), ("eps", "f32"), ("groups", "u32"),
                     ("cpg", "u32"), ("spatial", "u32"))

    def launches(self, inputs, output, params, device):
        rows = output.size // params["n"]
        if rows == 0:
            return []
        return [Launch(fold_grid(rows, device, self.name),
                       {"rows": rows, "n": params["n"], "eps": params["eps"],
                        "groups": max(params["groups"], 1), "cpg": params["cpg"],
                        "spatial": max(params["spatial"], 1)})]


LAYER_NORM = LayerNorm()
