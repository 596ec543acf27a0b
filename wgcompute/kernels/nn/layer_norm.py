"""Layer, group and instance normalization in one kernel (layer_norm.wgsl): a workgroup per
row computes the row's mean and variance and writes the normalized, scaled and shifted row.
A plain layer (or RMS) normalization of f32 or f16 rows of a multiple of 4 elements, up to
8,192, runs layer_norm_rows.wgsl instead: several rows a workgroup, each held in registers
(read once, a vec4 at a time) by TPR invocations, their sums meeting in log2(TPR) steps
instead of the 128 invocations' 7 a row. On an H200 (50 queued calls, GPU-bound): ViT-B/16's
6304 rows of 768 at batch 32 took 23.0-24.1 us against 26.5-30.7, BERT-base's 4096 15.0-17.9
against 20.9-23.5, 128 rows 12.0 against 12.7; 1,024 rows of 4,096 level."""

from __future__ import annotations

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..matmul.configs import BUSY

WG = 128
ROWS_WG = 256  # invocations of a layer_norm_rows workgroup
MAX_V = 8  # the most vec4 of a row one of its invocations holds
FILL = BUSY  # workgroups a launch should have (the matmul's: two per SM of a large GPU)
# Tests turn it off to compare the row-per-workgroup kernel on the same cases.
rows_variant = True
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
                                                        ("center", bool(params["center"])),
                                                        ("rows", _rows_plan(
                                                            params, output.dtype,
                                                            output.size // params["n"]))))

    def render(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        c = dict(key.constants)
        if c["rows"] is not None:
            tpr, v, r = c["rows"]
            src = shaders.render(shaders.load("nn/layer_norm_rows.wgsl"), {
                "T": dt.wgsl, "F16": dt.name == "f16", "BIAS": c["bias"],
                "CENTER": c["center"], "WG": tpr * r, "TPR": tpr, "ROWS": r,
                "V": v, "HALVES": [tpr >> k for k in range(1, tpr.bit_length())]},
                name="nn/layer_norm_rows.wgsl")
            return src, _FIELDS
        src = shaders.render(shaders.load("nn/layer_norm.wgsl"), {
            "T": dt.wgsl, "W": "f64" if dt.name == "f64" else "f32", "F16": dt.name == "f16",
            "BIAS": c["bias"], "CENTER": c["center"], "WG": WG,
            "HALVES": [WG >> k for k in range(1, WG.bit_length())]}, name="nn/layer_norm.wgsl")
        return src, _FIELDS

    def launches(self, inputs, output, params, device):
        rows = output.size // params["n"]
        if rows == 0:
            return []
        plan = _rows_plan(params, output.dtype, rows)
        groups = rows if plan is None else -(-rows // plan[2])
        return [Launch(fold_grid(groups, device, self.name),
                       {"rows": rows, "n": params["n"], "eps": params["eps"],
                        "groups": max(params["groups"], 1), "cpg": params["cpg"],
                        "spatial": max(params["spatial"], 1)})]


_FIELDS = (("rows", "u32"), ("n", "u32"), ("eps", "f32"), ("groups", "u32"), ("cpg", "u32"),
           ("spatial", "u32"))


def _rows_plan(params, dtype: str, rows: int) -> tuple[int, int, int] | None:
    """(TPR invocations a row, V vec4 each holds, R rows a workgroup) of layer_norm_rows for
    these params and ``rows`` rows, or None where the row-per-workgroup kernel runs (group and
    instance norms, f64, n not a multiple of 4 or over ROWS_WG · 4 · MAX_V). R is ROWS_WG /
    TPR, fewer where that would launch fewer than FILL workgroups (a batch-1 transformer's 128
    rows of 768 in 16 workgroups of 8 took 16.9 us on an H200 against 15.1 for the
    row-per-workgroup kernel; in 128 of one row each, 12.0 against 12.7)."""
    n = params["n"]
    if (not rows_variant or dtype not in ("f32", "f16") or n % 4 or params["cpg"]
            or max(params["groups"], 1) != 1 or max(params["spatial"], 1) != 1):
        return None
    n4 = n // 4
    tpr = 4
    while -(-n4 // tpr) > MAX_V:
        tpr *= 2
        if tpr > ROWS_WG:
            return None
    r = ROWS_WG // tpr
    while r > 1 and -(-rows // r) < FILL:
        r //= 2
    return tpr, -(-n4 // tpr), r


LAYER_NORM = LayerNorm()
