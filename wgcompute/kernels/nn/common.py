"""What the nn kernels share: the activations (table, numpy reference, WGSL function), the
param converters, NNKernel (logical shapes, linear launches) and the merging of strided dims."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..elementwise.optable import OPS

FLOATS = ("f32", "f16")
WG = 256
MAX_RANK = 6

_F32 = DTYPES["f32"]
# Activations a kernel may apply to its result (f32 math, f16 stored; ${a} and ${b} the
# launch's alpha and beta): rows of the op table. A nan stays nan, as in IEEE arithmetic, numpy
# and onnxruntime: max, min and clamp of a nan are undefined in WGSL (0 or a bound on
# lavapipe), so those rows select x where it is nan; the others compute nan from a nan.
ACTIVATIONS = {"none": OPS["identity"], "relu": OPS["nn_relu"],
               "leaky_relu": OPS["leaky_relu"], "clip": OPS["clip"],
               "sigmoid": OPS["sigmoid"], "hard_sigmoid": OPS["hard_sigmoid"],
               "hard_swish": OPS["hard_swish"], "tanh": OPS["tanh"]}
# (alpha, beta) when the activation is given by name only (ONNX's defaults)
ACTIVATION_DEFAULTS = {
    "none": (0.0, 0.0), "relu": (0.0, 0.0), "leaky_relu": (0.01, 0.0),
    "clip": (-math.inf, math.inf), "sigmoid": (0.0, 0.0), "hard_sigmoid": (0.2, 0.5),
    "hard_swish": (1.0 / 6.0, 0.5), "tanh": (0.0, 0.0),
}


def activation_numpy(name: str, alpha: float, beta: float, v: np.ndarray) -> np.ndarray:
    """The activation in numpy (f64 in, f64 out): its op table row's reference, which the
    tests use."""
    if name not in ACTIVATIONS:
        raise ArgumentError(f"activation: unknown {name!r}")
    return ACTIVATIONS[name].reference(v, alpha, beta)


def convert_activation(value) -> tuple[str, float, float]:
    """None, a name, or (name, alpha[, beta]) -> (name, alpha, beta)."""
    if value is None:
        return ("none", 0.0, 0.0)
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3 \
            or value[0] not in ACTIVATIONS:
        raise ValueError(f"expected one of {', '.join(ACTIVATIONS)} or (name, alpha, beta), "
                         f"got {value!r}")
    name = value[0]
    alpha, beta = ACTIVATION_DEFAULTS[name]
    rest = [float(v) for v in value[1:]]
    if rest:
        alpha = rest[0]
    if len(rest) > 1:
        beta = rest[1]
    if name in ("hard_sigmoid", "hard_swish", "leaky_relu") and not (
            math.isfinite(alpha) and math.isfinite(beta)):
        raise ValueError(f"{name}: alpha and beta must be finite, got {alpha}, {beta}")
    return (name, alpha, beta)


_ACT_FN = """fn ${fname}(x: f32) -> f32 {
    return ${body};
}
"""


def act_fn(fname: str, act: str, a: str, b: str) -> str:
    """WGSL ``fn fname(x: f32) -> f32`` applying activation ``act`` with alpha = a, beta = b
    (WGSL expressions, e.g. uniform fields)."""
    body = ACTIVATIONS[act].expr(_F32, "f32", "f32", a=a, b=b, where=f"activation {act}")
    return shaders.render(_ACT_FN, {"fname": fname, "body": body}, name="act_fn")


def f32_bits(v: float) -> float:
    """v as the nearest f32 (uniform fields are f32; +-inf stays)."""
    return float(np.float32(v))


# -- param converters ------------------------------------------------------------------------------
def _ints(value, n: int | None = None, minimum: int = 0) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),)
    try:
        out = tuple(int(v) for v in value)
        ok = all(not isinstance(v, bool) and float(v) == int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a tuple of ints, got {value!r}") from None
    if not ok or any(v < minimum for v in out):
        raise ValueError(f"expected ints >= {minimum}, got {value!r}")
    if n is not None and len(out) != n:
        raise ValueError(f"expected {n} ints, got {value!r}")
    return out


def _shapes(value):
    if value is None:
        return None
    try:
        return tuple(_ints(s) for s in value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a tuple of shapes (tuples of ints), got {value!r}") from None


def _choice(*options):
    def conv(value):
        if value not in options:
            raise ValueError(f"expected one of {', '.join(map(repr, options))}, got {value!r}")
        return value
    return conv


_CONVERTERS = {
    "shapes": _shapes, "act": convert_activation,
    "pair": lambda v: _ints(v, 2, 1), "pads": lambda v: _ints(v, 4, 0),
    "ints": _ints,
    "count": lambda v: None if v is None else _ints(v, 1)[0],
    "perm": lambda v: None if v is None else _ints(v),
}

SHAPES = Param("shapes", "shapes", None,
               "logical shapes of the inputs and the output (default: the buffers' own; a "
               "model passes them to run its layers on flat scratch buffers)")
ACTIVATION = Param("activation", "act", None,
                   "applied to the result: None, a name (relu, leaky_relu, clip, sigmoid, "
                   "hard_sigmoid, hard_swish, tanh) or (name, alpha, beta)")


class NNKernel(BuiltinKernel):
    """Base of the operator kernels: logical shapes, f32/f16 storage, the shared prelude."""

    dtypes = FLOATS
    input_dtypes_follow_output = True  # every input has the output's dtype

    def convert_param(self, p, value, dt):
        conv = _CONVERTERS.get(p.type)
        if conv is None and p.type.startswith("choice:"):
            conv = _choice(*p.type[7:].split("|"))
        if conv is None:
            return super().convert_param(p, value, dt)
        try:
            return conv(value)
        except (ValueError, TypeError) as e:
            raise ArgumentError(f"{self.name}: param {p.name!r}: {e}") from None

    def logical(self, inputs, output, params) -> list[tuple[int, ...]]:
        """Shapes of the inputs and of the output the kernel computes with."""
        shapes = params.get("shapes")
        bufs = [*inputs, output]
        if shapes is None:
            return [tuple(b.shape) for b in bufs]
        if len(shapes) != len(bufs):
            raise ArgumentError(f"{self.name}: param 'shapes' has {len(shapes)} shapes; "
                                f"expected {len(bufs)} (inputs, then the output)")
        return list(shapes)

    def check(self, inputs, output, params) -> None:
        shapes = self.logical(inputs, output, params)
        names = [*self.inputs, "out"]
        for name, b, s in zip(names, [*inputs, output], shapes, strict=True):
            if math.prod(s) > b.size:
                raise ShapeError(f"{self.name}: {name} is {b.shape}; it must hold the "
                                 f"{math.prod(s)} elements of its logical shape {s}")
            if self.input_dtypes_follow_output and b.dtype != output.dtype:
                raise DtypeError(f"{self.name}: {name} is {b.dtype} and out is "
                                 f"{output.dtype}; dtypes must match")
        self.check_shapes(shapes, params)

    def check_shapes(self, shapes, params) -> None:
        """Raise ShapeError if the logical shapes do not fit the operator."""

    def output_spec(self, inputs, params):
        if params.get("shapes") is not None:
            return tuple(params["shapes"][-1]), inputs[0].dtype
        return self.out_shape([tuple(b.shape) for b in inputs], params), inputs[0].dtype

    def out_shape(self, in_shapes, params) -> tuple[int, ...]:
        return in_shapes[0]

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, tuple(b.dtype for b in [*inputs, output]),
                           self.constants(self.logical(inputs, output, params), params,
                                          output.device))

    def constants(self, shapes, params, device=None) -> tuple:
        return ()

    # -- WGSL --------------------------------------------------------------------------------------
    def prelude(self, key: PipelineKey, fields) -> str:
        """enable, the Params struct, storage bindings (reads, then out) and the uniform."""
        types = [DTYPES[d].wgsl for d in key.dtypes]
        lines = ["enable f16;" if "f16" in types else ""]
        lines.append("struct Params {")
        lines += [f"    {n}: {t}," for n, t in fields]
        lines.append("}")
        names = [*self.inputs, self.output]
        for i, (n, t) in enumerate(zip(names, types, strict=True)):
            access = "read_write" if i == len(names) - 1 else "read"
            lines.append(f"@group(0) @binding({i}) var<storage, {access}> {n}: array<{t}>;")
        lines.append(f"@group(0) @binding({len(names)}) var<uniform> p: Params;")
        return "\n".join(lines) + "\n"

    @staticmethod
    def linear_main(body: str, wg: int = WG) -> str:
        """A 1-D (folded into x and y) invocation per item i < p.n."""
        return (f"@compute @workgroup_size({wg})\n"
                f"fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
                f"        @builtin(num_workgroups) nwg: vec3<u32>,\n"
                f"        @builtin(local_invocation_index) lid: u32) {{\n"
                f"    let i = (wid.y * nwg.x + wid.x) * {wg}u + lid;\n"
                f"    if (i >= p.n) {{\n        return;\n    }}\n"
                f"    {body}\n}}\n")

    def linear_launch(self, n: int, uniform: dict, device) -> list[Launch]:
        if n == 0:
            return []
        return [Launch(fold_grid(-(-n // WG), device, self.name), dict(uniform, n=n))]


def _out_type(key: PipelineKey) -> str:
    return DTYPES[key.dtypes[-1]].wgsl


def _merge_dims(out_shape, *stride_lists):
    """Drop size-1 dims and merge neighbours that stay contiguous for every operand: a
    (N, C, H, W) + (1, C, 1, 1) add becomes 3 dims, a same-shape add 1."""
    dims = [(d, [s[i] for s in stride_lists]) for i, d in enumerate(out_shape) if d != 1]
    merged: list = []
    for d, ss in dims:
        if merged:
            pd, pss = merged[-1]
            if all(ps == s * d for ps, s in zip(pss, ss, strict=True)):
                merged[-1] = (pd * d, ss)
                continue
        merged.append((d, ss))
    return merged
