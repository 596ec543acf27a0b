"""The elementwise kernels behind Buffer's operators beyond the four arithmetic ones: a buffer
with a scalar (either side), floor division, remainder, power, negation, abs and comparisons
(u8 results), all broadcasting as numpy does, with numpy's integer semantics."""

from __future__ import annotations

import math

from .. import shaders
from ..dtypes import DTYPES, DType
from ..errors import DtypeError, ShapeError
from .base import Launch, Param, PipelineKey, fold_grid
from .builtin import ALL, Elementwise, _bound_bytes
from .layout import index_wgsl, uniform_fields, uniform_values

COMPARISONS = {"lt": "x < y", "le": "x <= y", "gt": "x > y", "ge": "x >= y", "eq": "x == y",
               "ne": "!(x == y)"}  # "!(==)": nan != nan holds whatever the comparison's order


def _arith(op: str, dt: DType) -> str:
    """WGSL of fn op(x, y) -> W for one operator, in the work type W (f32 for f16, u32 for
    u8 lanes, which the caller masks)."""
    w = "f32" if dt.name == "f16" else dt.wgsl
    signed = dt.kind == "i"
    if op == "add":
        return "return x + y;"
    if op == "sub":
        return "return x - y;"
    if op == "mul":
        return "return x * y;"
    if op == "div":  # floats only (the operators refuse integer true division)
        return "return x / y;"
    if op == "floordiv":
        if dt.is_float:
            return "return floor(x / y);"
        lines = [f"if (y == {w}(0)) {{", f"    return {w}(0);", "}", "var q = x / y;"]
        if signed:  # WGSL truncates; numpy floors. No `%` of a negative value: NVIDIA's
            # Vulkan driver took it of the unsigned bit pattern (docs/architecture.md)
            lines += [f"if (x - q * y != {w}(0) && ((x < {w}(0)) != (y < {w}(0)))) {{",
                      f"    q = q - {w}(1);", "}"]
        return "\n    ".join(lines + ["return q;"])
    if op == "mod":
        if dt.is_float:  # the sign of the divisor, as numpy's remainder
            return "return x - y * floor(x / y);"
        rem = "x - (x / y) * y" if signed else "x % y"  # (no signed `%`: see floordiv)
        lines = [f"if (y == {w}(0)) {{", f"    return {w}(0);", "}", f"var r = {rem};"]
        if signed:
            lines += [f"if (r != {w}(0) && ((r < {w}(0)) != (y < {w}(0)))) {{",
                      "    r = r + y;", "}"]
        return "\n    ".join(lines + ["return r;"])
    if op == "pow":
        if dt.is_float:
            # an integer exponent multiplies (exact for small ones, any sign of x, as numpy);
            # another takes WGSL's pow (exp2(y·log2(x))): nan for x < 0, as in numpy. f64
            # has no pow on Vulkan: the operators refuse non-integer f64 exponents.
            # (nan from its bits: NVIDIA's compiler folds a run-time 0 / 0 to 1, H100)
            nan = f"{w}(bitcast<f32>(0x7fc00000u))"
            general = (f"return {nan};" if dt.name == "f64" else
                       f"if (x < 0.0) {{\n        return {nan};\n    }}\n"
                       "    return pow(x, y);")
            return (f"if (y == floor(y) && abs(y) < {w}(16777216.0)) {{\n"
                    "        var e = u32(abs(y));\n"
                    f"        var b = x;\n        var r = {w}(1);\n"
                    "        loop {\n            if (e == 0u) { break; }\n"
                    "            if ((e & 1u) != 0u) { r = r * b; }\n"
                    "            b = b * b;\n            e = e >> 1u;\n        }\n"
                    f"        return select(r, {w}(1) / r, y < {w}(0));\n    }}\n"
                    f"    {general}")
        # integers: square and multiply, wrapping; a negative exponent gives the truncated
        # quotient 1 / x**|y|: 1 for x = 1, ±1 for x = -1, 0 otherwise
        lines = []
        if signed:
            lines += [f"if (y < {w}(0)) {{",
                      f"    if (x == {w}(1)) {{ return {w}(1); }}",
                      f"    if (x == {w}(-1)) {{ return select({w}(1), {w}(-1), "
                      f"(y & {w}(1)) != {w}(0)); }}",
                      f"    return {w}(0);", "}"]
        lines += [f"var r = {w}(1);", "var b = x;", "var e = y;",
                  "loop {", f"    if (e == {w}(0)) {{ break; }}",
                  f"    if ((e & {w}(1)) != {w}(0)) {{ r = r * b; }}",
                  "    b = b * b;", "    e = e >> 1u;",
                  "}", "return r;"]
        return "\n    ".join(lines)
    if op == "neg":
        return "return -x;" if dt.is_float else f"return {w}(0) - x;"
    if op == "abs":
        return "return abs(x);" if dt.kind != "u" else "return x;"
    if op in COMPARISONS:
        return f"return select(0u, 1u, {COMPARISONS[op]});"
    raise AssertionError(op)


class ArrayOp(Elementwise):
    """out = op(a, b), op(a, scalar) or op(scalar, a) (``reflected``), or op(a), elementwise
    with numpy broadcasting; comparisons give u8 (0 or 1). One element per item (a u32 word
    of four for u8 outputs), each operand read through its strides from its own offset."""

    def __init__(self, op: str, arity: int, scalar: bool = False, reflected: bool = False):
        name = f"array_{op}" + ("_scalar" if scalar else "") + ("_reflected" if reflected
                                                                 else "")
        dtypes = ("u8",) if op in COMPARISONS else ALL
        super().__init__(name, arity, "", dtypes, description=(
            f"numpy's {op} of " + ("a buffer and a scalar" if scalar else
                                   "two buffers" if arity == 2 else "a buffer")
            + (", the scalar on the left" if reflected else "")))
        self.op = op
        self.scalar = scalar
        self.reflected = reflected
        self.compare = op in COMPARISONS
        self.dtypes = ALL if not self.compare else ("u8",)
        if scalar:
            self.params = (Param("scalar", "S", doc="the scalar, in the input's dtype"),)

    # the scalar is in the INPUT's dtype (a comparison's output is u8)
    def resolve_params(self, params, dt):
        return dict(params or {})

    def in_dtype(self, inputs, output) -> str:
        return inputs[0].dtype

    def check(self, inputs, output, params) -> None:
        dt = self.in_dtype(inputs, output)
        for name, b in zip(self.inputs, inputs):
            if b.dtype != dt:
                raise DtypeError(f"{self.name}: input {name!r} is {b.dtype} and input 'a' is "
                                 f"{dt}; dtypes must match")
        want = "u8" if self.compare else dt
        if output.dtype != want:
            raise DtypeError(f"{self.name}: out is {output.dtype}, expected {want}")
        shape = self._broadcast(inputs)
        if shape != output.shape:
            raise ShapeError(f"{self.name}: the inputs broadcast to {shape} and out is "
                             f"{output.shape}")
        if self.scalar and "scalar" not in params:
            raise ShapeError(f"{self.name}: needs params scalar")
        self._plan(inputs, output, params)

    def output_spec(self, inputs, params):
        shape = self._broadcast(inputs)
        return shape, "u8" if self.compare else inputs[0].dtype

    def key(self, inputs, output, params) -> PipelineKey:
        full, sizes, _ = self._plan(inputs, output, params)
        return PipelineKey(self.name, (self.in_dtype(inputs, output), output.dtype),
                           (("ndim", len(sizes)), ("full", full)))

    def _plan(self, inputs, output, params):
        full, sizes, strided = super()._plan(inputs, output, params)
        if not strided and all(full):  # every operand full: a flat index, no strides
            return full, (), strided
        return full, sizes, strided

    def render(self, key: PipelineKey):
        src, dst = DTYPES[key.dtypes[0]], DTYPES[key.dtypes[1]]
        consts = dict(key.constants)
        ndim, full = consts["ndim"], consts["full"]
        w = "f32" if src.name == "f16" else src.wgsl  # work type
        at = "u32" if src.packed else src.wgsl  # input arrays' element
        ot = "u32" if dst.packed else dst.wgsl
        strided = tuple(n for n, f in zip(self.inputs, full) if not f)
        lines = [f"@group(0) @binding({i}) var<storage, read> {n}: array<{at}>;"
                 for i, n in enumerate(self.inputs)]
        lines.append(f"@group(0) @binding({len(self.inputs)}) var<storage, read_write> "
                     f"out: array<{ot}>;")
        loads = []
        for n, f in zip(self.inputs, full):
            at_ = "e" if f else f"i_{n}"
            if src.packed:
                loads.append(f"(({n}[{at_} / 4u] >> (({at_} % 4u) * 8u)) & 0xffu)")
            else:
                loads.append(f"{w}({n}[{at_}])")
        if self.scalar:
            s = f"{w}(p.s)"
            loads = [s, loads[0]] if self.reflected else [loads[0], s]
        args = ", ".join(loads)
        rt = "u32" if self.compare else w  # op's result type
        index = index_wgsl(ndim, strided) if ndim else ""
        if dst.packed:
            mask = " & 0xffu" if not self.compare else ""
            item = "\n".join([
                "var word = 0u;",
                "for (var l = 0u; l < 4u; l = l + 1u) {",
                "    let e = i * 4u + l;",
                "    let g = p.start + e;",
                "    if (g < p.total) {",
                *("        " + x for x in index.splitlines()),
                f"        word = word | (((op({args})){mask}) << (l * 8u));",
                "    }",
                "}",
                "out[i] = word;"])
        else:
            conv = f"{dst.wgsl}(op({args}))"
            item = "\n".join(["let e = i;", "let g = p.start + e;", index, f"out[i] = {conv};"])
        params = [f"x: {w}", f"y: {w}"][:2 if (self.scalar or len(self.inputs) == 2) else 1]
        body = _arith(self.op, src)
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"),
                  ("s", "u32" if src.packed else src.wgsl), *uniform_fields(ndim, strided))
        text = shaders.render(shaders.load("elementwise_broadcast.wgsl"), {
            "ENABLE": shaders.enable_directives([src.wgsl, dst.wgsl]),
            "T": rt,
            "DIMS": "\n".join(f"    {n}: {ft}," for n, ft in fields[3:]),
            "BINDINGS": "\n".join(lines),
            "UB": len(self.inputs) + 1,
            "WG": self.workgroup_size,
            "U": self.per_invocation,
            "ARGS": ", ".join(params),
            "EXPR": "0", "ITEM": item.replace("\n", "\n        "),
        }).replace("    return 0;", "    " + body)
        return text, fields

    def launches(self, inputs, output, params, device):
        total = output.size
        if total == 0:
            return []
        full, sizes, strided = self._plan(inputs, output, params)
        dst = DTYPES[output.dtype]
        max_bind = device.limit("max-storage-buffer-binding-size")
        for name, b, f in zip(self.inputs, inputs, full):
            if not f and _bound_bytes(b) > max_bind:
                raise ShapeError(f"{self.name}: input {name!r} {b.shape} {b.dtype} is "
                                 f"broadcast, so it is bound whole, and it is larger than "
                                 f"this adapter's max-storage-buffer-binding-size "
                                 f"({max_bind} bytes)")
        per_item = 4 if dst.packed else 1
        item_bytes = max(dst.itemsize, DTYPES[self.in_dtype(inputs, output)].itemsize)
        chunk = max(1024, (max_bind // item_bytes) // 1024 * 1024)
        s = params.get("scalar", 0) if self.scalar else 0
        dims = uniform_values(sizes, strided) if sizes else {}
        src_size = DTYPES[self.in_dtype(inputs, output)].itemsize
        out = []
        for start in range(0, total, chunk):
            count = min(chunk, total - start)
            items = -(-count // per_item)
            groups = math.ceil(items / (self.workgroup_size * self.per_invocation))
            ranges = None
            if total > chunk:
                src_piece = (start * src_size, (count * src_size + 3) // 4 * 4)
                out_piece = (start * dst.itemsize, (count * dst.itemsize + 3) // 4 * 4)
                ranges = tuple(src_piece if f else (0, _bound_bytes(b))
                               for b, f in zip(inputs, full)) + (out_piece,)
            out.append(Launch(fold_grid(groups, device, self.name),
                              dict(dims, n=items, start=start, total=total, s=s), ranges))
        return out


_OPS: dict[tuple, ArrayOp] = {}


def array_op(op: str, arity: int, scalar: bool = False, reflected: bool = False) -> ArrayOp:
    """The kernel of one operator form, made once (its name keys the pipeline cache). Not in
    the registry: Buffer's operators reach them."""
    key = (op, arity, scalar, reflected)
    k = _OPS.get(key)
    if k is None:
        k = _OPS.setdefault(key, ArrayOp(op, arity, scalar, reflected))
    return k
