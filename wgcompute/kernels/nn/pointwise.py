"""The elementwise nn kernels: activations, broadcasting binaries (with the broadcasting
shape and stride helpers) and inference batch norm."""

from __future__ import annotations

import math

from ...errors import ShapeError
from ..core.base import Param
from ..core.layout import broadcast_strides
from ..elementwise.optable import OPS
from .common import (
    _F32,
    ACTIVATION,
    MAX_RANK,
    SHAPES,
    NNKernel,
    _merge_dims,
    _out_type,
    act_fn,
    f32_bits,
)


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
