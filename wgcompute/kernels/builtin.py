"""The built-in kernels of the core engine: elementwise arithmetic, scale, relu, matmul."""

from __future__ import annotations

import math

from .. import shaders
from ..device import Device
from ..dtypes import DTYPES
from ..errors import DtypeError, ShapeError
from .base import Kernel, Launch, Param, PipelineKey, fold_grid

ALL = ("f32", "f64", "f16", "s32", "s64", "u32", "u8")
FLOATS = ("f32", "f64", "f16")
SIGNED = FLOATS + ("s32", "s64")

_PACKED_BINARY = ("var r = 0u;\n    for (var k = 0u; k < 32u; k = k + 8u) {\n"
                  "        r = r | ((op((x >> k) & 0xffu, (y >> k) & 0xffu) & 0xffu) << k);\n"
                  "    }\n    return r;")
_PACKED_UNARY = ("var r = 0u;\n    for (var k = 0u; k < 32u; k = k + 8u) {\n"
                 "        r = r | ((op((x >> k) & 0xffu) & 0xffu) << k);\n"
                 "    }\n    return r;")


def same_shapes(kernel: Kernel, inputs, output) -> None:
    for name, b in zip(kernel.inputs, inputs):
        if b.shape != output.shape:
            raise ShapeError(f"{kernel.name}: input {name!r} is {b.shape} and output is "
                             f"{output.shape}; shapes must match exactly (no broadcasting)")
        if b.dtype != output.dtype:
            raise DtypeError(f"{kernel.name}: input {name!r} is {b.dtype} and output is "
                             f"{output.dtype}; dtypes must match")


def linear_launches(n_items: int, item_bytes: int, n_bindings: int, wg: int, device: Device,
                    name: str, uniform: dict, items_per_invocation: int = 1) -> list[Launch]:
    """Launches covering ``n_items`` items, split where the binding limit requires it."""
    if n_items == 0:
        return []
    max_bind = device.limit("max-storage-buffer-binding-size")
    chunk = max(256, (max_bind // item_bytes) // 256 * 256)
    out = []
    for start in range(0, n_items, chunk):
        count = min(chunk, n_items - start)
        size = (count * item_bytes + 3) // 4 * 4
        groups = math.ceil(count / (wg * items_per_invocation))
        u = dict(uniform, n=count)
        ranges = ((start * item_bytes, size),) * n_bindings if n_items > chunk else None
        out.append(Launch(fold_grid(groups, device, name), u, ranges))
    return out


class Elementwise(Kernel):
    """out = op(inputs...) elementwise, for every dtype listed (u8 lane by lane)."""

    workgroup_size = 256

    def __init__(self, name: str, arity: int, expr: str, dtypes=ALL, param: Param | None = None,
                 int_expr: str | None = None, description: str = ""):
        self.name = name
        self.inputs = ("a", "b")[:arity]
        self.expr = expr
        self.int_expr = int_expr or expr
        self.dtypes = tuple(dtypes)
        self.params = (param,) if param else ()
        self.description = description

    def check(self, inputs, output, params) -> None:
        same_shapes(self, inputs, output)

    def render(self, key: PipelineKey):
        dt = DTYPES[key.dtypes[0]]
        t = dt.wgsl
        binary = len(self.inputs) == 2
        lines = [f"@group(0) @binding({i}) var<storage, read> {n}: array<{t}>;"
                 for i, n in enumerate(self.inputs)]
        lines.append(f"@group(0) @binding({len(self.inputs)}) var<storage, read_write> "
                     f"out: array<{t}>;")
        if dt.packed:
            apply = _PACKED_BINARY if binary else _PACKED_UNARY
        else:
            apply = "return op(x, y);" if binary else "return op(x);"
        expr = self.expr if dt.is_float else self.int_expr
        src = shaders.render(shaders.load("elementwise.wgsl"), {
            "ENABLE": shaders.enable_directives([t]),
            "T": t,
            "PT": t if self.params else "u32",
            "BINDINGS": "\n".join(lines),
            "UB": len(self.inputs) + 1,
            "WG": self.workgroup_size,
            "ARGS": f"x: {t}, y: {t}" if binary else f"x: {t}",
            "CALL": "a[i], b[i]" if binary else "a[i]",
            "EXPR": expr.replace("T(", f"{t}("),
            "APPLY": apply,
        })
        return src, (("n", "u32"), ("p0", t if self.params else "u32"))

    def launches(self, inputs, output, params, device):
        dt = DTYPES[output.dtype]
        n = output.size
        items, item_bytes = ((n + 3) // 4, 4) if dt.packed else (n, dt.itemsize)
        p0 = params[self.params[0].name] if self.params else 0
        return linear_launches(items, item_bytes, len(inputs) + 1, self.workgroup_size, device,
                               self.name, {"p0": p0})


class Relu(Elementwise):
    def __init__(self):
        super().__init__("relu", 1, "select(select(x * p.p0, T(0), p.p0 == T(0)), x, x > T(0))", SIGNED,
                         Param("slope", "f64", 0.0, "negative-side slope (leaky ReLU)"),
                         int_expr="max(x, T(0))",
                         description="max(x, 0), or x * slope for x < 0 (leaky ReLU)")

    def resolve_params(self, params, dt):
        out = super().resolve_params(params, DTYPES["f64"])
        if not dt.is_float and out["slope"] != 0:
            raise DtypeError(f"relu: slope={out['slope']} needs a float dtype; {dt.name} "
                             f"supports slope=0 only")
        if not dt.is_float:
            out["slope"] = 0
        return out

    def launches(self, inputs, output, params, device):
        dt = DTYPES[output.dtype]
        launches = super().launches(inputs, output, params, device)
        for launch in launches:
            launch.uniform["p0"] = float(params["slope"]) if dt.is_float else 0
        return launches


class Matmul(Kernel):
    name = "matmul"
    inputs = ("a", "b")
    dtypes = FLOATS
    description = "out (M×N) = a (M×K) · b (K×N), 2-D row-major, any sizes"
    tile = 16

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        for nm, x in (("a", a), ("b", b), ("out", output)):
            if x.ndim != 2:
                raise ShapeError(f"matmul: {nm} must be 2-D, got shape {x.shape}")
            if x.dtype != output.dtype:
                raise DtypeError(f"matmul: {nm} is {x.dtype}, out is {output.dtype}; "
                                 f"dtypes must match")
        if a.shape[1] != b.shape[0]:
            raise ShapeError(f"matmul: a is {a.shape} and b is {b.shape}; inner dimensions "
                             f"{a.shape[1]} and {b.shape[0]} differ")
        want = (a.shape[0], b.shape[1])
        if output.shape != want:
            raise ShapeError(f"matmul: out is {output.shape}, expected {want} for a {a.shape} "
                             f"· b {b.shape}")

    def output_spec(self, inputs, params):
        a, b = inputs
        if a.ndim != 2 or b.ndim != 2:
            raise ShapeError(f"matmul: a and b must be 2-D, got {a.shape} and {b.shape}")
        return (a.shape[0], b.shape[1]), a.dtype

    def render(self, key):
        t = DTYPES[key.dtypes[0]].wgsl
        acc = "f32" if t == "f16" else t
        src = shaders.render(shaders.load("matmul.wgsl"), {
            "ENABLE": shaders.enable_directives([t]), "T": t, "ACC": acc, "TILE": self.tile})
        return src, (("M", "u32"), ("N", "u32"), ("K", "u32"))

    def launches(self, inputs, output, params, device):
        a, b = inputs
        m, k = a.shape
        n = b.shape[1]
        if m == 0 or n == 0:
            return []
        limit = device.limit("max-compute-workgroups-per-dimension")
        gx, gy = math.ceil(n / self.tile), math.ceil(m / self.tile)
        if gx > limit or gy > limit:
            raise ShapeError(f"matmul: output {output.shape} needs a {gy}×{gx} grid; this "
                             f"adapter allows {limit} per dimension")
        return [Launch((gx, gy, 1), {"M": m, "N": n, "K": k})]


def builtin_kernels() -> list[Kernel]:
    scalar = Param("scalar", "T", doc="the factor")
    return [
        Elementwise("elementwise_add", 2, "x + y", description="out = a + b"),
        Elementwise("elementwise_sub", 2, "x - y", description="out = a - b"),
        Elementwise("elementwise_multiply", 2, "x * y", description="out = a * b"),
        Elementwise("elementwise_divide", 2, "x / y",
                    description="out = a / b (integers: truncated; x / 0 gives x, as in WGSL)"),
        Elementwise("scale", 1, "x * p.p0", ALL, scalar, description="out = input * scalar"),
        Relu(),
        Matmul(),
    ]
