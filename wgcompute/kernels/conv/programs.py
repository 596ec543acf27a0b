"""What conv2d's programs share: the uniform fields, the storage bindings, the epilogue (bias,
activation, residual, second activation) and the tiled shell every implicit GEMM renders into."""

from __future__ import annotations

from ..core import shaders
from ..matmul.matmul import TileConfig, tiled_substitutions
from ..nn.nn import act_fn

# conv2d's uniforms, the same for every program (a program reads the fields it needs)
FIELDS = (("M", "u32"), ("N", "u32"), ("K", "u32"), ("C", "u32"), ("H", "u32"),
          ("W", "u32"), ("OH", "u32"), ("OW", "u32"), ("P", "u32"), ("KO", "u32"),
          ("Cg", "u32"), ("g", "u32"), ("pt", "u32"), ("pl", "u32"), ("alpha0", "f32"),
          ("beta0", "f32"), ("alpha1", "f32"), ("beta1", "f32"), ("n", "u32"),
          ("mult", "u32"), ("OWB", "u32"), ("OHB", "u32"))


def wgsl_types(key) -> list[str]:
    return [{"f32": "f32", "f16": "f16"}[d] for d in key.dtypes]


def fields_wgsl(fields) -> str:
    """The Params struct's member lines."""
    return "\n".join(f"    {n}: {ty}," for n, ty in fields)


def storage_bindings(names, types, writes) -> str:
    """One storage binding per name (read, or read_write where ``writes``), then the uniform."""
    lines = []
    for i, (n, t, w) in enumerate(zip(names, types, writes, strict=True)):
        lines.append(f"@group(0) @binding({i}) var<storage, {'read_write' if w else 'read'}> "
                     f"{n}: array<{t}>;")
    lines.append(f"@group(0) @binding({len(names)}) var<uniform> p: Params;")
    return "\n".join(lines)


def guarded(name: str, s: str) -> str:
    """WGSL fn ``ld_NAME(i, ok)``: NAME[i] as S when ok, else 0 (no read past the end)."""
    return (f"fn ld_{name}(i: u32, ok: bool) -> {s} {{\n    if (ok) {{\n        return "
            f"{s}({name}[i]);\n    }}\n    return {s}(0);\n}}\n")


def render_tiled(cfg: TileConfig, t: str, fields, bindings: str, helpers: str,
                 batch: str = "", col0: str = "0u", mixed: bool = False) -> str:
    """conv_gemm.wgsl on matmul's tiling for ``cfg``, filled by the caller's load_a4 / load_b4
    / store4 (``helpers``)."""
    subs = tiled_substitutions(cfg, t, True, True, mixed, hooks=True)
    subs.update({"FIELDS": fields_wgsl(fields), "BINDINGS": bindings,
                 "HELPERS": helpers + subs["HELPERS"], "BATCH": batch, "COL0": col0})
    return shaders.render(shaders.load("conv/conv_gemm.wgsl"), subs, name="conv/conv_gemm.wgsl")


def layer_dims(c: dict) -> tuple[str, str]:
    """The WGSL for the pixels per image and the output width: literals where the key has
    them (dividing by a constant is a multiply and a shift, by a uniform a ~20-instruction
    sequence, and each invocation divides for every column group it loads and stores), else
    the uniforms."""
    if "P" in c:
        return f"{c['P']}u", f"{c['OW']}u"
    return "p.P", "p.OW"


class ConvProgram:
    """One of conv2d's shaders for conv2d (``residual`` False) or conv2d_residual: renders
    its WGSL from a key's constants and says its launches."""

    def __init__(self, residual: bool):
        self.residual = residual
        self.names = ["x", "w", "bias", *(["residual"] if residual else []), "out"]

    def bindings(self, types, x: str = "", w: str = "", out: str = "") -> str:
        """The bindings, x, w and out (and the residual, as out) read as the WGSL vector
        types ``x``, ``w``, ``out`` (e.g. "vec4") where given."""
        btypes = list(types)
        if w:
            btypes[1] = f"{w}<{types[1]}>"
        if x:
            btypes[0] = f"{x}<{types[0]}>"
        if out:
            btypes[-1] = f"{out}<{types[-1]}>"
            if self.residual:
                btypes[3] = f"{out}<{types[3]}>"
        return storage_bindings(self.names, btypes, [False] * (len(self.names) - 1) + [True])

    def act_helpers(self, c, suffix: str = "") -> str:
        """``fn act0`` (and ``act1`` with a residual), each name followed by ``suffix``."""
        out = act_fn("act0" + suffix, c["act0"], "p.alpha0", "p.beta0")
        if self.residual:
            out += act_fn("act1" + suffix, c["act1"], "p.alpha1", "p.beta1")
        return out

    def store_lines(self, t: str) -> list[str]:
        """The WGSL storing f32 v0 to out index o of channel k through the epilogue."""
        lines = ["var v = act0(v0 + f32(bias[k]));"]
        if self.residual:
            lines.append("v = act1(v + f32(residual[o]));")
        return lines + [f"out[o] = {t}(v);"]

    def store4(self, c, t: str) -> str:
        """The activations and ``store4(r, c, acc)`` of the implicit GEMMs: output row r
        (< M) and columns c..c+3 (those < N) get the bias, activation, residual and second
        activation, written to NCHW out."""
        vec_p = bool(c.get("vec_p"))
        P, _ = layer_dims(c)
        return shaders.render(shaders.load("conv/conv_store.wgsl"), {
            "acts": self.act_helpers(c, "s" if vec_p else ""), "vec_p": vec_p,
            "residual": self.residual, "t": t, "P": P}, name="conv/conv_store.wgsl")
