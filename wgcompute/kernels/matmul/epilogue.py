"""matmul_bias: the tiled matmul with an epilogue, out = act(a · b + bias), the bias (one value
per column) added and the activation applied to each accumulator in f32 by the write-back
(tiling.wgsl's "write" part), before the store: a linear layer's bias add and activation
without a second kernel reading and writing the whole output again.

It is Matmul with the same candidates, tuning problems and tuned choices as the plain matmul
of the product's shape (the plain matmul times them). A whole-K tile applies the epilogue in
its write-back; a split-K tile (the tuned choice of products with few output blocks and a long
K, a transformer's at batch 1) adds its k slices into an f32 temporary by compare-and-swap, so
no write sees a whole sum: a second step of the same compute pass (``matmul_bias_act``) then
writes act(temporary + bias) to out. 2-D products only: a (M, K) contiguous, b (K, N), or (N, K)
read transposed with the param ``_tb``.

The activations: "none", "relu" (nn/common.py's rows of the op table, through ``act_fn``)
and "gelu", 0.5·x·(1 + erf(x/√2)) through a one-piece erfc of relative error below 1.2e-7
(``_GELU``).

Measured on an H200 (Model.profile of one interpreted linear layer at ViT-B/16 batch 32's
shapes, x (32, 197, 768)): W 768×2304 + bias, f16 876 us as matmul and add, 746 fused (f32:
876, 817); W 768×3072 + bias + erf GELU, f32 1306 us as matmul and elementwise kernels, 1078
fused (f16: 1259, 1092). The GELU epilogue itself costs 0-21 us of the 6304×3072×768
product's 807-1001 (f32, four tile configs; with the op table's erf: 25-66)."""

from __future__ import annotations

import dataclasses

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..nn.common import act_fn
from .configs import BUSY, TileConfig
from .matmul import Matmul
from .tiling import render_tiled

ACTIVATIONS = ("none", "relu", "gelu")
# gelu's WGSL, the erf form 0.5·x·(1 + erf(x/√2)) written with erfc: 0.5·x·erfc(|x|/√2) for
# x < 0 (no cancellation of 1 + erf near -1), 0.5·x·(2 - erfc(x/√2)) for x >= 0. erfc is the
# Chebyshev-fitted t·exp(-z² + P(t)), t = 1/(1 + z/2) (Press et al., Numerical Recipes,
# erfcc): relative error below 1.2e-7 for every z >= 0, one exp and one division. It replaced
# the op table's erf with all its pieces evaluated (no branches), which on an H200 cost 25-66
# us of a 6304×3072×768 f32 product and this 0-21 (benchmarks/results/h200/2026-11-27i).
_GELU = """fn act(x: f32) -> f32 {
    let z = abs(x) * 0.7071067811865476;
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
        -0.82215223 + t * 0.17087277))))))));
    let c = t * exp(p - z * z);
    return 0.5 * x * select(c, 2.0 - c, x >= 0.0);
}
"""
_MATMUL = Matmul()  # whose tuning problems and choices the epilogue shares


def act_wgsl(activation: str) -> str:
    """The WGSL of ``fn act(x: f32) -> f32`` (and what it calls) for ``activation``."""
    if activation == "gelu":
        return _GELU
    return act_fn("act", activation, "0.0", "0.0")


class MatmulEpilogue(Matmul):
    """out = act(a · b + bias) for f32 and f16 2-D products: a (M, K), b (K, N) (or (N, K)
    with ``_tb``), bias (N,) broadcast over the rows, all of out's dtype; f16 sums the
    products (as Matmul's precision says), adds the bias and applies the activation in f32,
    then rounds once.

    Params: ``activation`` ("none", "relu" or "gelu": 0.5·x·(1 + erf(x/√2))), ``has_bias``
    (False: no bias is added, and the bias input is a placeholder that is not read: any
    buffer on the device, e.g. a), ``precision`` (f16: "f32" or "mixed", as Matmul's) and
    ``_config`` as Matmul's (a split-K config runs in two steps: ``passes``). Refused:
    batched products, 1-D operands, views ("_la", "_lb") and a transposed (``_ta``).

    Error bound: Matmul's for the product (each entry within γ(K, 2^-24)·(|A|·|B|) of the
    exact one), then the f32 add and activation (a few f32 ulp; GELU's erfc is within 1.2e-7
    relative), then f16's rounding of the result for f16."""

    name = "matmul_bias"
    inputs = ("a", "b", "bias")
    dtypes = ("f32", "f16")
    params = Matmul.params + (
        Param("activation", "str", "none",
              "applied to a · b + bias in f32: 'none', 'relu' or 'gelu' (erf form)"),
        Param("has_bias", "bool", True,
              "False: no bias (the bias input is a placeholder, never read)"))
    description = ("out = act(a · b + bias) for 2-D f32 / f16 products (bias (N,) added to "
                   "every row, activation none, relu or gelu), in f32 in the matmul's "
                   "write-back")

    def resolve_params(self, params, dt):
        if isinstance(params, dict):
            for nm, what in (("_ta", "a read transposed"), ("_la", "a read through a view"),
                             ("_lb", "b read through a view"),
                             ("_f32_out", "a split-K temporary")):
                if params.get(nm) not in (None, False):
                    raise ArgumentError(f"{self.name}: param {nm!r} ({what}) is not taken: "
                                        f"the epilogue takes a (M, K) and b (K, N), or b "
                                        f"(N, K) with '_tb'")
        out = super().resolve_params(params, dt)
        act = out["activation"]
        if not isinstance(act, str) or act not in ACTIVATIONS:
            raise ArgumentError(f"{self.name}: param 'activation' must be one of "
                                f"{', '.join(map(repr, ACTIVATIONS))}, got {act!r}")
        return out

    def output_spec(self, inputs, params):
        a, b, _ = inputs
        self._check_2d(a, b)
        return super().output_spec([a, b], params)

    def check(self, inputs, output, params) -> None:
        a, b, bias = inputs
        self._check_2d(a, b)
        for nm, x in (("a", a), ("b", b)):
            if x.dtype != output.dtype:
                raise DtypeError(f"{self.name}: {nm} is {x.dtype}, out is {output.dtype}; "
                                 f"dtypes must match")
        super().check([a, b], output, params)
        if not params["has_bias"]:
            return
        if bias.dtype != output.dtype:
            raise DtypeError(f"{self.name}: bias is {bias.dtype}, out is {output.dtype}; "
                             f"dtypes must match")
        n = output.shape[-1]
        if bias.shape != (n,):
            raise ShapeError(f"{self.name}: bias is {bias.shape}; expected ({n},), one value "
                             f"per column of out {output.shape}")
        limit = output.device.limit("max-storage-buffer-binding-size")
        if bias.nbytes > limit:
            raise ShapeError(f"{self.name}: bias {bias.shape} is {bias.nbytes} bytes; this "
                             f"adapter binds at most {limit} bytes per buffer")

    def _check_2d(self, a, b) -> None:
        for nm, x in (("a", a), ("b", b)):
            if x.ndim != 2:
                raise ShapeError(f"{self.name}: {nm} is {x.shape}; the epilogue takes 2-D "
                                 f"products (a (M, K), b (K, N) or (N, K) with '_tb')")

    # -- configuration: the plain matmul's -------------------------------------------------
    def config_for(self, m: int, n: int, k: int, dtype: str, device,
                   precision: str = "f32") -> TileConfig:
        """Matmul's tuned (or default) choice for the m × n × k product. A choice that splits
        K is taken (as two steps: ``passes``) where its tile with whole K would launch fewer
        than BUSY workgroups (a transformer's products at batch 1: K slices are what fill the
        GPU); where whole-K tiles fill it, the split's temporary, its zeroing and the second
        step cost more than they give, and the product runs whole K: the problem's default
        where that does not split, else the chosen tile with split 1."""
        chosen = _MATMUL.config_for(m, n, k, dtype, device, precision)
        whole = TileConfig(**dict(dataclasses.asdict(chosen), split=1))
        if chosen.split == 1 or -(-m // whole.bm) * -(-n // whole.bn) < BUSY:
            return chosen
        problem = _MATMUL.tune_problem(m, n, k, dtype, device, precision)
        if problem is not None:
            default = TileConfig.parse(problem.default)
            if default.split == 1:
                return default
        return whole

    def tune_problem(self, *args, **kwargs):
        """The plain matmul's problem (timed by the plain matmul: its choices are shared)."""
        return _MATMUL.tune_problem(*args, **kwargs)

    def tune_problems(self, inputs, output, params):
        return _MATMUL.tune_problems(inputs[:2], output, params)

    def passes(self, inputs, output, params):
        """A split-K config: the plain split-K matmul into an f32 temporary (f32 sums, added by
        compare-and-swap), then act(temporary + bias) into out (``matmul_bias_act``), in one
        compute pass. Whole K: one pass (None), the epilogue in the write-back."""
        cfg = params.get("_config")
        if output.size == 0 or cfg is None or cfg.split == 1:
            return None
        first = {"precision": "f32", "_config": cfg}
        if output.dtype == "f16":
            first["_f32_out"] = True
        if params.get("_tb"):
            first["_tb"] = True
        last = {"activation": params["activation"], "has_bias": params["has_bias"]}
        return [(output.shape, "f32")], [(_MATMUL, ["in0", "in1"], "tmp0", first),
                                         (BIAS_ACT, ["tmp0", "in2"], "out", last)]

    def key(self, inputs, output, params) -> PipelineKey:
        key = super().key(inputs[:2], output, params)
        return PipelineKey(key.kernel, key.dtypes, key.constants + (
            ("activation", params["activation"]), ("has_bias", params["has_bias"])))

    def render(self, key):
        c = dict(key.constants)
        return render_tiled(TileConfig.parse(c["config"]), DTYPES[key.dtypes[0]].wgsl,
                            c["vec_a"], c["vec_b"], c["precision"] == "mixed", 0, False,
                            c.get("_tb", False), c.get("vec_bt", False),
                            epilogue=(c["has_bias"], act_wgsl(c["activation"])))

    def launches(self, inputs, output, params, device):
        return super().launches(inputs[:2], output, params, device)


class _BiasAct(BuiltinKernel):
    """out = act(a + bias), a (M, N) f32, bias (N,) and out of out's dtype (f32 or f16), in
    f32, rounded once: the last step of a split-K matmul_bias (internal, not in the
    registry). Params: ``activation`` and ``has_bias`` as matmul_bias's."""

    name = "matmul_bias_act"
    inputs = ("a", "bias")
    dtypes = ("f32", "f16")
    workgroup_size = 256
    params = (Param("activation", "str", "none", "as matmul_bias's"),
              Param("has_bias", "bool", True, "as matmul_bias's"))
    description = "out = act(a + bias): a split-K matmul_bias's f32 temporary, finished"

    def check(self, inputs, output, params) -> None:
        a, bias = inputs
        if (a.dtype != "f32" or a.shape != output.shape or output.ndim != 2
                or (params["has_bias"] and (bias.dtype != output.dtype
                                            or bias.shape != (output.shape[1],)))):
            raise DtypeError(f"{self.name}: takes an f32 (M, N) input, a bias (N,) and an out "
                             f"(M, N) of the bias's dtype, got {a.dtype} {a.shape}, "
                             f"{bias.dtype} {bias.shape} and {output.dtype} {output.shape}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), (("activation", params["activation"]),
                                                       ("has_bias", params["has_bias"])))

    def render(self, key: PipelineKey):
        c = dict(key.constants)
        t = DTYPES[key.dtypes[0]].wgsl
        bias = "f32(bias[i % p.cols])" if c["has_bias"] else "0.0"
        src = (("enable f16;\n" if t == "f16" else "")
               + "struct Params { n: u32, cols: u32, }\n"
               "@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
               f"@group(0) @binding(1) var<storage, read> bias: array<{t}>;\n"
               f"@group(0) @binding(2) var<storage, read_write> out: array<{t}>;\n"
               "@group(0) @binding(3) var<uniform> p: Params;\n"
               + act_wgsl(c["activation"])
               + f"@compute @workgroup_size({self.workgroup_size})\n"
               "fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
               "        @builtin(num_workgroups) nwg: vec3<u32>,\n"
               "        @builtin(local_invocation_index) lid: u32) {\n"
               f"    let i = (wid.y * nwg.x + wid.x) * {self.workgroup_size}u + lid;\n"
               "    if (i < p.n) {\n"
               f"        out[i] = {t}(act(a[i] + {bias}));\n"
               "    }\n"
               "}\n")
        return src, (("n", "u32"), ("cols", "u32"))

    def launches(self, inputs, output, params, device):
        if output.size == 0:
            return []
        groups = -(-output.size // self.workgroup_size)
        return [Launch(fold_grid(groups, device, self.name),
                       {"n": output.size, "cols": output.shape[1]})]


BIAS_ACT = _BiasAct()
MATMUL_BIAS = MatmulEpilogue()

