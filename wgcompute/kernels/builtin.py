"""The built-in elementwise kernels (add, sub, multiply, divide, scale, relu): vectorized
loads and several items per invocation, chunked over the storage-binding limit."""

from __future__ import annotations

import math

from .. import shaders
from ..dtypes import DTYPES
from ..errors import DtypeError, ShapeError
from ..runtime import Device
from .base import BuiltinKernel, Kernel, Launch, Param, PipelineKey, fold_grid
from .matmul import Matmul
from .reduce import reduce_kernels

ALL = ("f32", "f64", "f16", "s32", "s64", "u32", "u8")
FLOATS = ("f32", "f64", "f16")
SIGNED = FLOATS + ("s32", "s64")

# u8 lanes: unpack each byte of a u32 word (or of each word of a vec4<u32>), apply, repack.
_PACKED = ("var r = V(0u);\n    let m = V(0xffu);\n"
           "    for (var k = 0u; k < 32u; k = k + 8u) {{\n        let s = V(k);\n"
           "        r = r | ((op({args}) & m) << s);\n    }}\n    return r;")
_PACKED_BINARY = _PACKED.format(args="(x >> s) & m, (y >> s) & m")
_PACKED_UNARY = _PACKED.format(args="(x >> s) & m")
_PACKED_NULLARY = _PACKED.format(args="")


def item_layout(dt) -> tuple[int, int, str]:
    """(elements per item, bytes per item, WGSL item type) of the vectorized elementwise path.

    2- and 4-byte types move as vec4 (16 bytes for f32/s32/u32, 8 for f16); u8 moves as
    vec4<u32> (sixteen lanes); 8-byte types stay scalar (vec4<f64> gains nothing and s64
    vectors are not portable)."""
    if dt.packed:
        return 16, 16, "vec4<u32>"
    if dt.itemsize in (2, 4):
        return 4, 4 * dt.itemsize, f"vec4<{dt.wgsl}>"
    return 1, dt.itemsize, dt.wgsl


def same_shapes(kernel: Kernel, inputs, output) -> None:
    # Every input is named: an output made from input 'a' agrees with 'a' even when 'a' is
    # the odd one out.
    for attr, cls, rule in (("shape", ShapeError, "shapes must match exactly (no broadcasting)"),
                            ("dtype", DtypeError, "dtypes must match")):
        want = getattr(output, attr)
        got = [getattr(b, attr) for b in inputs]
        if any(g != want for g in got):
            named = ", ".join(f"input {n!r} is {g}" for n, g in zip(kernel.inputs, got))
            raise cls(f"{kernel.name}: {named} and output is {want}; {rule}")


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


class Elementwise(BuiltinKernel):
    """out = op(inputs...) elementwise, for every dtype listed (u8 lane by lane).

    ``expr`` is WGSL on ``x`` (and ``y``) and ``p.p0``; inside it ``V(...)`` constructs the
    item type (a vector on the fast path) and ``T(...)`` the scalar type."""

    workgroup_size = 256
    per_invocation = 4  # items per invocation: fewer, fatter workgroups saturate bandwidth
    not_in_place = None  # each invocation reads its items, then writes the same items

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
        v = item_layout(dt)[2]
        arity = len(self.inputs)
        lines = [f"@group(0) @binding({i}) var<storage, read> {n}: array<{v}>;"
                 for i, n in enumerate(self.inputs)]
        lines.append(f"@group(0) @binding({len(self.inputs)}) var<storage, read_write> "
                     f"out: array<{v}>;")
        if dt.packed:
            apply = (_PACKED_NULLARY, _PACKED_UNARY, _PACKED_BINARY)[arity].replace("V(", f"{v}(")
        else:
            apply = ("return op();", "return op(x);", "return op(x, y);")[arity]
        expr = self.expr if dt.is_float else self.int_expr
        src = shaders.render(shaders.load("elementwise.wgsl"), {
            "ENABLE": shaders.enable_directives([t]),
            "T": t,
            "V": v,
            "PT": t if self.params else "u32",
            "BINDINGS": "\n".join(lines),
            "UB": len(self.inputs) + 1,
            "WG": self.workgroup_size,
            "U": self.per_invocation,
            "ARGS": ("", f"x: {v}", f"x: {v}, y: {v}")[arity],
            "CALL": ("", "a[i]", "a[i], b[i]")[arity],
            "EXPR": expr.replace("V(", f"{v}(").replace("T(", f"{t}("),
            "APPLY": apply,
        })
        return src, (("n", "u32"), ("p0", t if self.params else "u32"))

    def launches(self, inputs, output, params, device):
        dt = DTYPES[output.dtype]
        per_item, item_bytes, _ = item_layout(dt)
        items = -(-output.size // per_item)
        p0 = params[self.params[0].name] if self.params else 0
        return linear_launches(items, item_bytes, len(inputs) + 1, self.workgroup_size, device,
                               self.name, {"p0": p0}, self.per_invocation)


class Relu(Elementwise):
    def __init__(self):
        super().__init__("relu", 1, "select(select(x * p.p0, V(0), p.p0 == T(0)), x, x > V(0))",
                         SIGNED, Param("slope", "T", 0.0, "negative-side slope (leaky ReLU)"),
                         int_expr="max(x, V(0))",
                         description="max(x, 0), or x * slope for x < 0 (leaky ReLU)")

    def resolve_params(self, params, dt):
        if dt.is_float:  # the slope must fit the buffer's float type exactly (no overflow)
            return super().resolve_params(params, dt)
        out = super().resolve_params(params, DTYPES["f64"])
        if out["slope"] != 0:
            raise DtypeError(f"relu: slope={out['slope']} needs a float dtype; the input and "
                             f"output are {dt.name}, which supports slope=0 only")
        out["slope"] = 0
        return out

    def launches(self, inputs, output, params, device):
        dt = DTYPES[output.dtype]
        launches = super().launches(inputs, output, params, device)
        for launch in launches:
            launch.uniform["p0"] = float(params["slope"]) if dt.is_float else 0
        return launches


class Transpose(BuiltinKernel):
    """out (C×R) = a (R×C) transposed, through 32×32 tiles in workgroup memory so that both
    the reads and the writes are coalesced."""

    name = "transpose"
    inputs = ("a",)
    dtypes = ("f32", "f64", "f16", "s32", "s64", "u32")  # u8 lanes share words: not here
    description = "out = a.T for a 2-D a"
    not_in_place = "transpose writes each element of a to another place in out"
    tile = 32
    rows_per_pass = 8  # a 32×8 workgroup moves a 32×32 tile in four passes

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.ndim != 2:
            raise ShapeError(f"transpose: a must be 2-D, got shape {a.shape}")
        if a.dtype != output.dtype:
            raise DtypeError(f"transpose: a is {a.dtype} and out is {output.dtype}; dtypes "
                             f"must match")
        if output.shape != a.shape[::-1]:
            raise ShapeError(f"transpose: out is {output.shape}, expected {a.shape[::-1]} for "
                             f"a {a.shape}")

    def output_spec(self, inputs, params):
        (a,) = inputs
        if a.ndim != 2:
            raise ShapeError(f"transpose: a must be 2-D, got shape {a.shape}")
        return a.shape[::-1], a.dtype

    def render(self, key: PipelineKey):
        t = DTYPES[key.dtypes[0]].wgsl
        src = shaders.render(shaders.load("transpose.wgsl"), {
            "ENABLE": shaders.enable_directives([t]), "T": t, "TILE": self.tile,
            "ROWS": self.rows_per_pass})
        return src, (("R", "u32"), ("C", "u32"))

    def launches(self, inputs, output, params, device):
        r, c = inputs[0].shape
        if r == 0 or c == 0:
            return []
        limit = device.limit("max-compute-workgroups-per-dimension")
        gx, gy = math.ceil(c / self.tile), math.ceil(r / self.tile)
        if gx > limit or gy > limit:
            raise ShapeError(f"transpose: a {inputs[0].shape} needs a {gy}×{gx} grid; this "
                             f"adapter allows {limit} per dimension")
        return [Launch((gx, gy, 1), {"R": r, "C": c})]


class Copy(BuiltinKernel):
    """out = a bit for bit, as 16-byte words: any dtype, same element count (shapes may
    differ, as with the copy_buffer op)."""

    name = "copy"
    inputs = ("a",)
    dtypes = ALL
    workgroup_size = 256
    description = "out = a, bit for bit (same dtype and element count)"
    not_in_place = None

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.dtype != output.dtype:
            raise DtypeError(f"copy: input is {a.dtype} and output is {output.dtype}; "
                             f"dtypes must match")
        if a.size != output.size:
            raise ShapeError(f"copy: input {a.shape} has {a.size} elements, output "
                             f"{output.shape} has {output.size}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, ("u32",), ())  # one pipeline moves every dtype

    def render(self, key: PipelineKey):
        src = shaders.render(shaders.load("copy.wgsl"), {"WG": self.workgroup_size})
        return src, (("n", "u32"), ("p0", "u32"))

    def launches(self, inputs, output, params, device):
        words = -(-output.size * DTYPES[output.dtype].itemsize // 16)
        return linear_launches(words, 16, 2, self.workgroup_size, device, self.name, {"p0": 0})


def builtin_kernels() -> list[Kernel]:
    scalar = Param("scalar", "T", doc="the factor")
    return [
        Elementwise("elementwise_add", 2, "x + y", description="out = a + b"),
        Elementwise("elementwise_sub", 2, "x - y", description="out = a - b"),
        Elementwise("elementwise_multiply", 2, "x * y", description="out = a * b"),
        # x / 0 is x by WGSL's rule, but naga's GLSL output leaves it to GL, where it is
        # undefined (llvmpipe: 0, or all ones unsigned): divide by 1 instead, on every backend
        Elementwise("elementwise_divide", 2, "x / y", int_expr="x / select(y, V(1), y == V(0))",
                    description="out = a / b (integers: truncated; x / 0 gives x, as in WGSL)"),
        Elementwise("scale", 1, "x * p.p0", ALL, scalar, description="out = input * scalar"),
        Relu(),
        Elementwise("fill", 0, "V(p.p0)", ALL, Param("value", "T", doc="the value"),
                    description="out[...] = value"),
        Transpose(),
        Copy(),
        Matmul(),
        *reduce_kernels(),
    ]
