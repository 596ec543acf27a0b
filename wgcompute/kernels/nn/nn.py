"""Neural-network operator kernels on NCHW float tensors (f32, f16 stored, f32 arithmetic):
activations, broadcasting binaries, batch norm, pools, softmax, transpose, copies, LRN.

Every kernel here reads the *logical* shapes of its operands from the ``shapes`` param when
given (a model runs its layers on flat scratch buffers reused between layers) and from the
buffers otherwise; a buffer must hold at least its logical shape's elements."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import REQUIRED, BuiltinKernel, Launch, Param, PipelineKey, fold_grid
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


# -- activations -----------------------------------------------------------------------------------
class Activation(NNKernel):
    """out = activation(x), elementwise."""

    name = "nn_activation"
    inputs = ("x",)
    params = (ACTIVATION, SHAPES)
    description = ("out = activation(x): relu, leaky_relu, clip, sigmoid, hard_sigmoid, "
                   "hard_swish or tanh (f32/f16, computed in f32)")

    def check_shapes(self, shapes, params):
        if math.prod(shapes[0]) != math.prod(shapes[1]):
            raise ShapeError(f"{self.name}: x {shapes[0]} and out {shapes[1]} differ in size")

    def constants(self, shapes, params, device=None):
        return (("act", params["activation"][0]),)

    def render(self, key):
        fields = (("n", "u32"), ("alpha", "f32"), ("beta", "f32"))
        t = _out_type(key)
        act = dict(key.constants)["act"]
        src = (self.prelude(key, fields) + act_fn("act", act, "p.alpha", "p.beta")
               + self.linear_main(f"out[i] = {t}(act(f32(x[i])));"))
        return src, fields

    def launches(self, inputs, output, params, device):
        _, alpha, beta = params["activation"]
        n = math.prod(self.logical(inputs, output, params)[-1])
        return self.linear_launch(n, {"alpha": f32_bits(alpha), "beta": f32_bits(beta)}, device)


# -- broadcasting binaries -------------------------------------------------------------------------
# the binary ops (f32 math): op table rows
BINARY_OPS = {"add": OPS["add"], "sub": OPS["sub"], "mul": OPS["mul"], "div": OPS["div"],
              "max": OPS["maximum"], "min": OPS["minimum"], "pow": OPS["pow_f32"]}


def broadcast_shape(a, b, what: str = "nn_binary") -> tuple[int, ...]:
    """numpy's broadcasting of two shapes, or ShapeError naming both."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and x != 1 and y != 1:
            raise ShapeError(f"{what}: a is {tuple(a)} and b is {tuple(b)}; they do not "
                             f"broadcast (dimensions {x} and {y})")
        out.append(y if x == 1 else x)
    return tuple(out)


def broadcast_strides(shape, out_shape) -> list[int]:
    """Element strides of ``shape`` read at each index of ``out_shape`` (0 where broadcast)."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc if d != 1 else 0)
        acc *= d
    return strides[::-1]


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


class Binary(NNKernel):
    """out = a (op) b with numpy broadcasting, then an optional activation."""

    name = "nn_binary"
    inputs = ("a", "b")
    params = (Param("op", "choice:" + "|".join(BINARY_OPS), "add",
                    "add, sub, mul, div, max, min or pow"), ACTIVATION, SHAPES)
    description = "out = activation(a op b) with numpy broadcasting (op: add, sub, mul, div...)"
    not_in_place = "broadcasting reads elements other than the one written"

    def out_shape(self, in_shapes, params):
        return broadcast_shape(in_shapes[0], in_shapes[1], self.name)

    def check_shapes(self, shapes, params):
        want = broadcast_shape(shapes[0], shapes[1], self.name)
        if math.prod(want) != math.prod(shapes[2]) or (
                params.get("shapes") is None and tuple(shapes[2]) != want):
            raise ShapeError(f"{self.name}: out is {shapes[2]}, expected {want} for a "
                             f"{shapes[0]} and b {shapes[1]}")

    def _plan(self, shapes):
        out = broadcast_shape(shapes[0], shapes[1], self.name)
        merged = _merge_dims(out, broadcast_strides(shapes[0], out),
                             broadcast_strides(shapes[1], out))
        if len(merged) > MAX_RANK:
            raise ShapeError(f"{self.name}: a {shapes[0]} and b {shapes[1]} broadcast over "
                             f"{len(merged)} separate dimensions; at most {MAX_RANK}")
        return merged

    def constants(self, shapes, params, device=None):
        return (("op", params["op"]), ("act", params["activation"][0]),
                ("rank", len(self._plan(shapes))))

    def render(self, key):
        c = dict(key.constants)
        rank = c["rank"]
        fields = [("n", "u32"), ("alpha", "f32"), ("beta", "f32")]
        for d in range(rank):
            fields += [(f"d{d}", "u32"), (f"sa{d}", "u32"), (f"sb{d}", "u32")]
        t = _out_type(key)
        idx = ["var rem = i;", "var ia = 0u;", "var ib = 0u;"]
        for d in reversed(range(rank)):
            idx += [f"let c{d} = rem % p.d{d};", f"rem = rem / p.d{d};",
                    f"ia = ia + c{d} * p.sa{d};", f"ib = ib + c{d} * p.sb{d};"]
        op = BINARY_OPS[c["op"]].expr(_F32, "f32", "f32", where=self.name)
        body = "\n    ".join(idx + ["let x = f32(a[ia]);", "let y = f32(b[ib]);",
                                    f"out[i] = {t}(act({op}));"])
        src = (self.prelude(key, fields) + act_fn("act", c["act"], "p.alpha", "p.beta")
               + self.linear_main(body))
        return src, tuple(fields)

    def launches(self, inputs, output, params, device):
        shapes = self.logical(inputs, output, params)
        merged = self._plan(shapes)
        _, alpha, beta = params["activation"]
        u = {"alpha": f32_bits(alpha), "beta": f32_bits(beta)}
        for d, (size, (sa, sb)) in enumerate(merged):
            u.update({f"d{d}": size, f"sa{d}": sa, f"sb{d}": sb})
        return self.linear_launch(math.prod(shapes[-1]), u, device)


# -- batch normalization (inference) ---------------------------------------------------------------
class BatchNorm(NNKernel):
    """out = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c] over (N, C, ...)."""

    name = "nn_batchnorm"
    inputs = ("x", "scale", "bias", "mean", "variance")
    params = (Param("epsilon", "f32", 1e-5, "added to the variance"), ACTIVATION, SHAPES)
    description = "batch normalization (inference) over axis 1 of (N, C, ...), then activation"

    def check_shapes(self, shapes, params):
        x = shapes[0]
        if len(x) < 2:
            raise ShapeError(f"{self.name}: x is {x}; expected (N, C, ...)")
        for name, s in zip(self.inputs[1:], shapes[1:5], strict=True):
            if math.prod(s) != x[1]:
                raise ShapeError(f"{self.name}: {name} is {s}; expected ({x[1]},) for x {x}")
        if tuple(shapes[5]) != tuple(x) and params.get("shapes") is None:
            raise ShapeError(f"{self.name}: out is {shapes[5]}, expected {x}")

    def constants(self, shapes, params, device=None):
        return (("act", params["activation"][0]),)

    def render(self, key):
        fields = (("n", "u32"), ("C", "u32"), ("inner", "u32"), ("eps", "f32"),
                  ("alpha", "f32"), ("beta", "f32"))
        t = _out_type(key)
        body = ("let c = (i / p.inner) % p.C;\n"
                "    let s = f32(scale[c]) / sqrt(f32(variance[c]) + p.eps);\n"
                f"    out[i] = {t}(act((f32(x[i]) - f32(mean[c])) * s + f32(bias[c])));")
        src = (self.prelude(key, fields)
               + act_fn("act", dict(key.constants)["act"], "p.alpha", "p.beta")
               + self.linear_main(body))
        return src, fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        _, alpha, beta = params["activation"]
        return self.linear_launch(math.prod(x), {
            "C": x[1], "inner": math.prod(x[2:]), "eps": params["epsilon"],
            "alpha": f32_bits(alpha), "beta": f32_bits(beta)}, device)


# -- pools -----------------------------------------------------------------------------------------
def pool_out_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int,
                  dilation: int = 1, ceil_mode: bool = False) -> int:
    """ONNX's pool (and convolution) output length on one axis, explicit pads."""
    span = (k - 1) * dilation + 1
    num = size + pad_begin + pad_end - span
    if num < 0:
        return 0
    out = (-(-num // stride) if ceil_mode else num // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1  # the last window must start inside the input or its leading pad
    return out


class Pool(NNKernel):
    """Max or average pooling over the last two axes of (N, C, H, W)."""

    name = "nn_pool"
    inputs = ("x",)
    params = (Param("mode", "choice:max|avg", "max", "max or avg"),
              Param("kernel", "pair", REQUIRED, "(kh, kw)"),
              Param("strides", "pair", (1, 1), "(sh, sw)"),
              Param("pads", "pads", (0, 0, 0, 0), "(top, left, bottom, right)"),
              Param("dilations", "pair", (1, 1), "(dh, dw), max pooling"),
              Param("count_include_pad", "bool", False,
                    "avg: divide by the whole window (padding counted) instead of the "
                    "elements inside the input"),
              Param("ceil_mode", "bool", False, "output size rounded up (for out=None)"),
              SHAPES)
    description = "max / average pooling over H and W of (N, C, H, W), explicit pads"
    not_in_place = "pooling reads neighbouring elements"

    def out_shape(self, in_shapes, params):
        n, c, h, w = self._nchw(in_shapes[0])
        (kh, kw), (sh, sw) = params["kernel"], params["strides"]
        (dh, dw), (pt, pl, pb, pr) = params["dilations"], params["pads"]
        ceil = params["ceil_mode"]
        return (n, c, pool_out_size(h, kh, sh, pt, pb, dh, ceil),
                pool_out_size(w, kw, sw, pl, pr, dw, ceil))

    def _nchw(self, s):
        if len(s) != 4:
            raise ShapeError(f"{self.name}: x is {s}; expected (N, C, H, W)")
        return s

    def check_shapes(self, shapes, params):
        x, out = self._nchw(shapes[0]), shapes[1]
        want = self.out_shape([x], params)
        if tuple(out) != want:
            raise ShapeError(f"{self.name}: out is {tuple(out)}; expected {want} for x {x} "
                             f"with these kernel, strides, pads and ceil_mode")

    def constants(self, shapes, params, device=None):
        (kh, kw), (dh, dw) = params["kernel"], params["dilations"]
        return (("mode", params["mode"]), ("kh", kh), ("kw", kw), ("dh", dh), ("dw", dw),
                ("incl", params["count_include_pad"]))

    def render(self, key):
        c = dict(key.constants)
        fields = (("n", "u32"), ("H", "u32"), ("W", "u32"), ("OH", "u32"), ("OW", "u32"),
                  ("sh", "u32"), ("sw", "u32"), ("pt", "u32"), ("pl", "u32"), ("pb", "u32"),
                  ("pr", "u32"))
        t = _out_type(key)
        if c["mode"] == "max":
            init = "var m = -3.4028235e38;\n    var cnt = 0u;"
            acc = "m = max(m, f32(x[base + u32(ih) * p.W + u32(iw)]));\n                cnt = 1u;"
            fin = "select(0.0, m, cnt > 0u)"
        else:
            init = "var s = 0.0;\n    var cnt = 0u;\n    var padded = 0u;"
            acc = "s = s + f32(x[base + u32(ih) * p.W + u32(iw)]);\n                cnt = cnt + 1u;"
            # count_include_pad divides by the window clipped to the padded input (the pads
            # count, a ceil_mode overhang past them does not), as ONNX and PyTorch do
            fin = ("select(0.0, s / f32(padded), padded > 0u)" if c["incl"]
                   else "select(0.0, s / f32(cnt), cnt > 0u)")
        body = f"""let ow = i % p.OW;
    let oh = (i / p.OW) % p.OH;
    let nc = i / (p.OW * p.OH);
    let base = nc * p.H * p.W;
    let ih0 = i32(oh * p.sh) - i32(p.pt);
    let iw0 = i32(ow * p.sw) - i32(p.pl);
    {init}
    for (var a = 0; a < {c['kh']}; a = a + 1) {{
        let ih = ih0 + a * {c['dh']};
        let pad_h = ih < i32(p.H + p.pb);
        let in_h = ih >= 0 && ih < i32(p.H);
        for (var b = 0; b < {c['kw']}; b = b + 1) {{
            let iw = iw0 + b * {c['dw']};
            {"if (pad_h && iw < i32(p.W + p.pr)) { padded = padded + 1u; }"
             if c["mode"] == "avg" else ""}
            if (in_h && iw >= 0 && iw < i32(p.W)) {{
                {acc}
            }}
        }}
    }}
    out[i] = {t}({fin});"""
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        x, out = self.logical(inputs, output, params)
        (sh, sw), (pt, pl, pb, pr) = params["strides"], params["pads"]
        return self.linear_launch(math.prod(out), {
            "H": x[2], "W": x[3], "OH": out[2], "OW": out[3], "sh": sh, "sw": sw,
            "pt": pt, "pl": pl, "pb": pb, "pr": pr}, device)


class GlobalPool(NNKernel):
    """Mean or max over every axis after the first two: (N, C, ...) -> (N, C, 1, ...)."""

    name = "nn_global_pool"
    inputs = ("x",)
    params = (Param("mode", "choice:max|avg", "avg", "avg or max"), SHAPES)
    description = "global average / max pooling: (N, C, ...) -> (N, C, 1, 1, ...)"
    not_in_place = "pooling reads neighbouring elements"
    wg = 64

    def out_shape(self, in_shapes, params):
        x = in_shapes[0]
        return tuple(x[:2]) + (1,) * (len(x) - 2)

    def check_shapes(self, shapes, params):
        x, out = shapes
        if len(x) < 2 or math.prod(out) != x[0] * x[1]:
            raise ShapeError(f"{self.name}: out is {out}; expected {x[:2]} + ones for x {x}")

    def constants(self, shapes, params, device=None):
        return (("mode", params["mode"]),
                ("small", math.prod(shapes[0][2:]) <= self.SMALL_PLANE))

    # Planes of at most this many elements (a classifier's 7×7 maps) are summed by one
    # invocation each: a workgroup and a barrier tree per 49 values left most of its
    # invocations idle (batch 256: 327,680 workgroups for 16 M values).
    SMALL_PLANE = 256

    def render(self, key):
        fields = (("planes", "u32"), ("inner", "u32"), ("scale", "f32"))
        t = _out_type(key)
        c = dict(key.constants)
        mx = c["mode"] == "max"
        op = "max" if mx else "add"
        init = "-3.4028235e38" if mx else "0.0"
        combine = "max(a, b)" if mx else "a + b"
        if c["small"]:
            fields = (("n", "u32"), *fields)
            step = "max(acc, v)" if mx else "acc + v"
            body = f"""let base = i * p.inner;
    var acc = {init};
    for (var j = 0u; j < p.inner; j = j + 1u) {{
        let v = f32(x[base + j]);
        acc = {step};
    }}
    out[i] = {t}(acc * p.scale);"""
            return self.prelude(key, fields) + self.linear_main(body), fields
        # one workgroup per (n, c): its invocations stride over the plane, then a tree
        wg = self.wg
        src = self.prelude(key, fields) + f"""
var<workgroup> part: array<f32, {wg}>;
fn {op}2(a: f32, b: f32) -> f32 {{
    return {combine};
}}
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let plane = wid.y * nwg.x + wid.x;
    var acc = {init};
    if (plane < p.planes) {{
        let base = plane * p.inner;
        for (var j = lid; j < p.inner; j = j + {wg}u) {{
            acc = {op}2(acc, f32(x[base + j]));
        }}
    }}
    part[lid] = acc;
    workgroupBarrier();
    for (var s = {wg // 2}u; s > 0u; s = s / 2u) {{
        if (lid < s) {{
            part[lid] = {op}2(part[lid], part[lid + s]);
        }}
        workgroupBarrier();
    }}
    if (lid == 0u && plane < p.planes) {{
        out[plane] = {t}(part[0] * p.scale);
    }}
}}
"""
        return src, fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        planes, inner = x[0] * x[1], math.prod(x[2:])
        if planes == 0:
            return []
        scale = 1.0 / inner if params["mode"] == "avg" and inner else 1.0
        u = {"planes": planes, "inner": inner, "scale": scale}
        if inner <= self.SMALL_PLANE:
            return self.linear_launch(planes, u, device)
        return [Launch(fold_grid(planes, device, self.name), u)]


# -- softmax ---------------------------------------------------------------------------------------
class Softmax(NNKernel):
    """Softmax (or log-softmax) over one axis, or over all axes from ``axis`` on
    (``flatten``: ONNX before opset 13)."""

    name = "nn_softmax"
    inputs = ("x",)
    params = (Param("axis", "i32", -1, "the axis (negative counts from the end)"),
              Param("flatten", "bool", False, "softmax over every axis from axis on"),
              Param("log", "bool", False, "log-softmax"), SHAPES)
    description = "softmax or log-softmax along an axis of any shape (computed in f32)"
    not_in_place = "softmax reads its whole row"
    wg = 64

    def check_shapes(self, shapes, params):
        x, out = shapes
        self._split(x, params)
        if math.prod(out) != math.prod(x):
            raise ShapeError(f"{self.name}: out {out} and x {x} differ in size")

    def _split(self, x, params):
        r = len(x)
        axis = params["axis"]
        if not -max(r, 1) <= axis < max(r, 1):
            raise ShapeError(f"{self.name}: axis {axis} is out of range for x {x}")
        axis %= max(r, 1)
        if params["flatten"]:
            return math.prod(x[:axis]), math.prod(x[axis:]), 1
        return math.prod(x[:axis]), x[axis] if x else 1, math.prod(x[axis + 1:])

    def constants(self, shapes, params, device=None):
        return (("log", params["log"]),)

    def render(self, key):
        fields = (("rows", "u32"), ("len", "u32"), ("inner", "u32"))
        t = _out_type(key)
        wg = self.wg
        fin = "(v - m) - log(s)" if dict(key.constants)["log"] else "exp(v - m) / s"
        src = self.prelude(key, fields) + f"""
var<workgroup> part: array<f32, {wg}>;
fn reduce_max(v: f32, lid: u32) -> f32 {{
    part[lid] = v;
    workgroupBarrier();
    for (var s = {wg // 2}u; s > 0u; s = s / 2u) {{
        if (lid < s) {{
            part[lid] = max(part[lid], part[lid + s]);
        }}
        workgroupBarrier();
    }}
    let r = part[0];
    workgroupBarrier();
    return r;
}}
fn reduce_sum(v: f32, lid: u32) -> f32 {{
    part[lid] = v;
    workgroupBarrier();
    for (var s = {wg // 2}u; s > 0u; s = s / 2u) {{
        if (lid < s) {{
            part[lid] = part[lid] + part[lid + s];
        }}
        workgroupBarrier();
    }}
    let r = part[0];
    workgroupBarrier();
    return r;
}}
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {{
    let row = wid.y * nwg.x + wid.x;
    let live = row < p.rows;
    let base = (row / p.inner) * p.len * p.inner + row % p.inner;
    var m = -3.4028235e38;
    if (live) {{
        for (var j = lid; j < p.len; j = j + {wg}u) {{
            m = max(m, f32(x[base + j * p.inner]));
        }}
    }}
    m = reduce_max(m, lid);
    var s = 0.0;
    if (live) {{
        for (var j = lid; j < p.len; j = j + {wg}u) {{
            s = s + exp(f32(x[base + j * p.inner]) - m);
        }}
    }}
    s = reduce_sum(s, lid);
    if (live) {{
        for (var j = lid; j < p.len; j = j + {wg}u) {{
            let v = f32(x[base + j * p.inner]);
            out[base + j * p.inner] = {t}({fin});
        }}
    }}
}}
"""
        return src, fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        outer, length, inner = self._split(x, params)
        rows = outer * inner
        if rows == 0 or length == 0:
            return []
        return [Launch(fold_grid(rows, device, self.name),
                       {"rows": rows, "len": length, "inner": inner})]


# -- transpose -------------------------------------------------------------------------------------
class Transpose(NNKernel):
    """out = x with its axes permuted (numpy.transpose(x, perm))."""

    name = "nn_transpose"
    inputs = ("x",)
    params = (Param("perm", "perm", None, "the permutation (None: reversed axes)"), SHAPES)
    description = "out = numpy.transpose(x, perm), any rank up to 6"
    not_in_place = "transpose writes each element of x to another place"

    def _perm(self, x, params):
        perm = params["perm"]
        if perm is None:
            perm = tuple(range(len(x)))[::-1]
        if sorted(perm) != list(range(len(x))):
            raise ShapeError(f"{self.name}: perm {perm} is not a permutation of the "
                             f"{len(x)} axes of x {x}")
        return perm

    def out_shape(self, in_shapes, params):
        x = in_shapes[0]
        return tuple(x[a] for a in self._perm(x, params))

    def _plan(self, x, params):
        perm = self._perm(x, params)
        in_strides = [math.prod(x[a + 1:]) for a in range(len(x))]
        out = [x[a] for a in perm]
        merged = _merge_dims(out, [in_strides[a] for a in perm])
        if len(merged) > MAX_RANK:
            raise ShapeError(f"{self.name}: x {x} with perm {perm} needs {len(merged)} "
                             f"separate axes; at most {MAX_RANK}")
        return merged

    def check_shapes(self, shapes, params):
        x, out = shapes
        want = self.out_shape([x], params)
        if math.prod(out) != math.prod(want):
            raise ShapeError(f"{self.name}: out is {out}, expected {want}")

    def constants(self, shapes, params, device=None):
        return (("rank", len(self._plan(shapes[0], params))),)

    def render(self, key):
        rank = dict(key.constants)["rank"]
        fields = [("n", "u32")]
        for d in range(rank):
            fields += [(f"d{d}", "u32"), (f"s{d}", "u32")]
        idx = ["var rem = i;", "var src = 0u;"]
        for d in reversed(range(rank)):
            idx += [f"src = src + (rem % p.d{d}) * p.s{d};", f"rem = rem / p.d{d};"]
        body = "\n    ".join(idx + ["out[i] = x[src];"])
        return self.prelude(key, fields) + self.linear_main(body), tuple(fields)

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        u = {}
        for d, (size, (s,)) in enumerate(self._plan(x, params)):
            u.update({f"d{d}": size, f"s{d}": s})
        return self.linear_launch(math.prod(x), u, device)


# -- copies (concat, casts) ------------------------------------------------------------------------
class CopyRows(NNKernel):
    """out[r * dst_stride + dst_offset + j] = x[r * src_stride + src_offset + j] for r < rows,
    j < cols, converting f32 <-> f16 when x and out differ: a Concat input, a Gather of one
    index, a cast."""

    name = "nn_copy"
    inputs = ("x",)
    input_dtypes_follow_output = False
    params = (Param("rows", "count", None, "rows copied (None: 1)"),
              Param("cols", "count", None, "elements per row (None: x's size / rows)"),
              Param("src_stride", "count", None, "x elements per row (None: cols)"),
              Param("src_offset", "count", 0, "where row 0 starts in x"),
              Param("dst_stride", "count", None, "out elements per row (None: cols)"),
              Param("dst_offset", "count", 0, "where row 0 starts in out"), SHAPES)
    description = ("copy rows of x into rows of out at offsets and strides (Concat, Gather), "
                   "converting f32 <-> f16 when the dtypes differ")
    not_in_place = "it writes rows at other offsets than it reads"

    def _geometry(self, shapes, params):
        x = math.prod(shapes[0])
        rows = params["rows"] if params["rows"] is not None else 1
        if rows == 0:
            return 0, 0, 0, 0, 0, 0
        cols = params["cols"]
        if cols is None:
            if x % rows:
                raise ShapeError(f"{self.name}: x {shapes[0]} does not split into {rows} rows")
            cols = x // rows
        src = params["src_stride"] if params["src_stride"] is not None else cols
        dst = params["dst_stride"] if params["dst_stride"] is not None else cols
        return rows, cols, src, params["src_offset"], dst, params["dst_offset"]

    def check_shapes(self, shapes, params):
        rows, cols, src, soff, dst, doff = self._geometry(shapes, params)
        if not rows or not cols:
            return
        for name, stride, off, shape in (("x", src, soff, shapes[0]),
                                         ("out", dst, doff, shapes[1])):
            if (rows > 1 and cols > stride) or (rows - 1) * stride + off + cols \
                    > math.prod(shape):
                raise ShapeError(f"{self.name}: {rows} rows of {cols} at offset {off}, stride "
                                 f"{stride} do not fit {name} {shape}")

    def check(self, inputs, output, params):
        super().check(inputs, output, params)
        for b in [*inputs, output]:
            if b.dtype not in FLOATS:
                raise DtypeError(f"{self.name}: {b.dtype} is not one of {', '.join(FLOATS)}")

    def render(self, key):
        fields = (("n", "u32"), ("cols", "u32"), ("src", "u32"), ("soff", "u32"),
                  ("dst", "u32"), ("doff", "u32"))
        t = _out_type(key)
        body = (f"let r = i / p.cols;\n    let j = i % p.cols;\n"
                f"    out[r * p.dst + p.doff + j] = {t}(x[r * p.src + p.soff + j]);")
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        rows, cols, src, soff, dst, doff = self._geometry(
            self.logical(inputs, output, params), params)
        return self.linear_launch(rows * cols, {"cols": max(cols, 1), "src": src,
                                                "soff": soff, "dst": dst, "doff": doff},
                                  device)


# -- LRN -------------------------------------------------------------------------------------------
class LRN(NNKernel):
    """Local response normalization across channels of (N, C, ...), as ONNX defines it."""

    name = "nn_lrn"
    inputs = ("x",)
    params = (Param("size", "u32", 5, "channels in the window"),
              Param("alpha", "f32", 1e-4, ""), Param("beta", "f32", 0.75, ""),
              Param("bias", "f32", 1.0, ""), SHAPES)
    description = "out = x / (bias + alpha / size * sum of x² over size channels) ** beta"
    not_in_place = "LRN reads neighbouring channels"

    def check_shapes(self, shapes, params):
        x, out = shapes
        if len(x) < 2 or math.prod(out) != math.prod(x):
            raise ShapeError(f"{self.name}: x is {x}, out {out}; expected (N, C, ...) twice")
        if params["size"] < 1:
            raise ArgumentError(f"{self.name}: param 'size' must be >= 1")

    def render(self, key):
        fields = (("n", "u32"), ("C", "u32"), ("inner", "u32"), ("lo", "u32"), ("hi", "u32"),
                  ("alpha", "f32"), ("beta", "f32"), ("bias", "f32"))
        t = _out_type(key)
        body = f"""let c = (i / p.inner) % p.C;
    let c0 = u32(max(i32(c) - i32(p.lo), 0));
    let c1 = min(c + p.hi, p.C - 1u);
    var s = 0.0;
    for (var k = c0; k <= c1; k = k + 1u) {{
        let v = f32(x[i + (k - c) * p.inner]);
        s = s + v * v;
    }}
    out[i] = {t}(f32(x[i]) / pow(p.bias + p.alpha * s, p.beta));"""
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        x = self.logical(inputs, output, params)[0]
        size = params["size"]
        return self.linear_launch(math.prod(x), {
            "C": x[1], "inner": math.prod(x[2:]), "lo": (size - 1) // 2, "hi": size // 2,
            "alpha": params["alpha"] / size, "beta": params["beta"], "bias": params["bias"]},
            device)


# -- batch preprocessing ---------------------------------------------------------------------------
def _floats3(value):
    vals = [value] if isinstance(value, (int, float, np.number)) else list(value)
    if len(vals) not in (1, 3) or not all(math.isfinite(float(v)) for v in vals):
        raise ValueError(f"expected one finite number or three, got {value!r}")
    vals = [float(v) for v in vals]
    return tuple(vals * 3 if len(vals) == 1 else vals)


_CONVERTERS["floats3"] = _floats3
_CONVERTERS["size"] = lambda v: None if v is None else _ints(v, 2, 1)


class PreprocessBatch(NNKernel):
    """A batch of RGBA8 images (u8 (N, H, W, 4)) to a model's input: bilinear resize with
    half-pixel centers to ``size``, (x / 255 - mean) / std per channel, NHWC -> NCHW f32
    (alpha dropped): preprocess for many images at once."""

    name = "preprocess_batch"
    inputs = ("src",)
    dtypes = ("f32",)
    input_dtypes_follow_output = False
    params = (Param("size", "size", None, "(height, width) of the output (None: as is)"),
              Param("mean", "floats3", 0.0, "subtracted per channel (one value or three)"),
              Param("std", "floats3", 1.0, "divided by, per channel (one value or three)"),
              SHAPES)
    description = ("RGBA8 batch (N, H, W, 4) -> normalized f32 (N, 3, h, w): bilinear resize "
                   "(half-pixel centers), (x - mean) / std on [0, 1] values")
    not_in_place = "it reads neighbouring pixels"

    def out_shape(self, in_shapes, params):
        src = in_shapes[0]
        if len(src) != 4 or src[3] != 4:
            raise ShapeError(f"{self.name}: src is {src}; expected RGBA8 (N, H, W, 4)")
        h, w = params["size"] or src[1:3]
        return (src[0], 3, h, w)

    def output_spec(self, inputs, params):
        return super().output_spec(inputs, params)[0], "f32"

    def check(self, inputs, output, params):
        if inputs[0].dtype != "u8":
            raise DtypeError(f"{self.name}: src is {inputs[0].dtype}; expected u8 RGBA8")
        if any(v == 0 for v in params["std"]):
            raise ArgumentError(f"{self.name}: param 'std' must not be 0")
        super().check(inputs, output, params)

    def check_shapes(self, shapes, params):
        want = self.out_shape([shapes[0]], params)
        if tuple(shapes[1]) != want:
            raise ShapeError(f"{self.name}: out is {shapes[1]}, expected {want}")
        if math.prod(shapes[0][1:3]) == 0 and math.prod(want):
            raise ShapeError(f"{self.name}: src {shapes[0]} is empty; nothing to sample")

    def key(self, inputs, output, params):
        return PipelineKey(self.name, ("u32", "f32"), ())

    def render(self, key):
        fields = (("n", "u32"), ("H", "u32"), ("W", "u32"), ("OH", "u32"), ("OW", "u32"),
                  ("sy", "f32"), ("sx", "f32"), ("m0", "f32"), ("m1", "f32"), ("m2", "f32"),
                  ("k0", "f32"), ("k1", "f32"), ("k2", "f32"))
        body = """let ox = i % p.OW;
    let oy = (i / p.OW) % p.OH;
    let c = (i / (p.OW * p.OH)) % 3u;
    let n = i / (p.OW * p.OH * 3u);
    let fy = clamp((f32(oy) + 0.5) * p.sy - 0.5, 0.0, f32(p.H - 1u));
    let fx = clamp((f32(ox) + 0.5) * p.sx - 0.5, 0.0, f32(p.W - 1u));
    let y0 = u32(floor(fy));
    let x0 = u32(floor(fx));
    let y1 = min(y0 + 1u, p.H - 1u);
    let x1 = min(x0 + 1u, p.W - 1u);
    let base = n * p.H * p.W;
    let a = unpack4x8unorm(src[base + y0 * p.W + x0])[c];
    let b = unpack4x8unorm(src[base + y0 * p.W + x1])[c];
    let d = unpack4x8unorm(src[base + y1 * p.W + x0])[c];
    let e = unpack4x8unorm(src[base + y1 * p.W + x1])[c];
    let v = mix(mix(a, b, fx - f32(x0)), mix(d, e, fx - f32(x0)), fy - f32(y0));
    out[i] = (v - vec3<f32>(p.m0, p.m1, p.m2)[c]) * vec3<f32>(p.k0, p.k1, p.k2)[c];"""
        return self.prelude(key, fields) + self.linear_main(body), fields

    def launches(self, inputs, output, params, device):
        src, out = self.logical(inputs, output, params)
        (m0, m1, m2), (s0, s1, s2) = params["mean"], params["std"]
        return self.linear_launch(math.prod(out), {
            "H": src[1], "W": src[2], "OH": out[2], "OW": out[3],
            "sy": src[1] / out[2] if out[2] else 1.0, "sx": src[2] / out[3] if out[3] else 1.0,
            "m0": m0, "m1": m1, "m2": m2, "k0": 1 / s0, "k1": 1 / s1, "k2": 1 / s2}, device)


def nn_kernels() -> list:
    return [Activation(), Binary(), BatchNorm(), Pool(), GlobalPool(), Softmax(), Transpose(),
            CopyRows(), LRN(), PreprocessBatch()]
