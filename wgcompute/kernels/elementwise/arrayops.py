"""The elementwise kernels behind Buffer's operators beyond the four arithmetic ones: a buffer
with a scalar (either side), floor division, remainder, power, negation, abs, comparisons
(bool results) and the logical ops of bools (& | ^ ~), all broadcasting as numpy does, with
numpy's integer semantics and its float values for nan, ±inf and ±0 (float // and % bit for
bit)."""

from __future__ import annotations

import math

from ...dtypes import DTYPES, DType
from ...errors import DtypeError, ShapeError, UnsupportedDtypeError
from ..core import shaders
from ..core.base import Launch, Param, PipelineKey, fold_grid
from ..core.layout import index_wgsl, step_values, uniform_fields, uniform_values
from . import packing
from .builtin import BUILTIN_OPS, Elementwise, split_launches
from .elementwise import broadcast_source, packed_item, stepped_index
from .optable import OPS

# Buffer's operators: the op table rows they run (name -> row)
ARRAY_OPS = {n: OPS[n] for n in ("add", "sub", "mul", "div", "floordiv", "mod", "pow", "neg",
                                 "abs", "lt", "le", "gt", "ge", "eq", "ne", "logical_and",
                                 "logical_or", "logical_xor", "logical_not")}
COMPARISONS = {n: row.wgsl for n, row in ARRAY_OPS.items()
               if row.dtypes in ("compare", "equality")}


# Bit layouts of the float work types: (unsigned type, literal suffix, mantissa bits, the
# most bits a remainder below 2**(mantissa bits + 1) may be shifted left by and still fit)
_FLOAT_BITS = {"f32": ("u32", "u", 23, 8), "f64": ("u64", "lu", 52, 11)}


def _float_divmod(w: str) -> str:
    """WGSL fns remainder(a, b) and floor_divide(a, b): numpy's (npy_divmod, with its cases
    for nan, ±inf and ±0), bit for bit, in float work type ``w`` (f32, f16's too; f64 needs
    64-bit integers), from elementwise/float_divmod.wgsl.

    fmod is exact by long division of the two mantissas as integers, several bits a step
    (x - y·floor(x / y) loses the remainder once x / y is past 2**24, and is nan for y = inf).
    WGSL's division may be off by 2.5 ulp (NVIDIA's by one, and 0 for divisors past 2**126):
    where the quotient's ulp is 1/8 or more, or the divisor is that large, it too is a long
    division of the mantissas, rounded to nearest even. Divisors below 2**(mantissa bits + 4
    - bias) leave remainders a GPU may flush to zero (NVIDIA does): the arithmetic on them
    runs scaled by 2**64. nan, zero and signs are read from the bits: NVIDIA's compiler
    assumes no nan in comparisons (a nan remainder must still count as nonzero, as numpy's
    ``if (mod)``)."""
    u, sfx, mb, step = _FLOAT_BITS[w]
    bits = int(u[1:])
    sign, inf, absm = 1 << (bits - 1), ((1 << (bits - mb - 1)) - 1) << mb, (1 << (bits - 1)) - 1
    hid, mmask, qnan = 1 << mb, (1 << mb) - 1, inf | (1 << (mb - 1))
    bias = (1 << (bits - mb - 2)) - 1
    big = (bias + mb - 3) << mb  # 2^(mb - 3): quotients whose ulp is 1/8 or more
    huge_b = (2 * bias - 1) << mb  # 2^(bias - 1): divisors NVIDIA's division gets wrong
    tiny = (mb + 4) << mb  # divisors whose remainders may be subnormal (ulp(b) < 2^(1 - bias))
    huge_a = (2 * bias + 1 - 64) << mb  # |a| / tiny overflows; a·2^64 would

    return shaders.render(shaders.load("elementwise/float_divmod.wgsl"), {
        "w": w, "u": u, "bits": bits, "mb": mb, "step": step, "bias": bias,
        # the bit patterns, as literals of the unsigned type u
        **{name: f"{hex(v)}{sfx}" for name, v in (
            ("ABSM", absm), ("MMASK", mmask), ("HID", hid), ("SIGN", sign), ("INF", inf),
            ("QNAN", qnan), ("BIG", big), ("HUGE_B", huge_b), ("TINY", tiny),
            ("HUGE_A", huge_a), ("ZERO", 0), ("ONE", 1))},
    }, name="elementwise/float_divmod.wgsl")


def _arith(op: str, dt: DType) -> str:
    """WGSL of fn op(x, y) -> W for one operator, from its op table row, in the work type W
    (f32 for f16, u32 for u8 and bool lanes, which the caller masks); comparisons give u32
    0 or 1."""
    w = "f32" if dt.name == "f16" else dt.wgsl
    row = OPS[op]  # (the array namespace runs every row through ArrayOp)
    if row.body is not None:
        return row.body(dt, w)
    expr = row.expr(dt, w, w, where=f"array_{op}")
    if row.truth:
        return f"return select(0u, 1u, {expr});"
    return f"return {expr};"


class ArrayOp(Elementwise):
    """out = op(a, b), op(a, scalar) or op(scalar, a) (``reflected``), or op(a), elementwise
    with numpy broadcasting, for the dtypes its op table row accepts; comparisons and the
    logical ops give bool. One element per item (a u32 word of four for u8 and bool outputs),
    each operand read through its strides from its own offset."""

    def __init__(self, op: str, arity: int, scalar: bool = False, reflected: bool = False):
        name = f"array_{op}" + ("_scalar" if scalar else "") + ("_reflected" if reflected
                                                                 else "")
        row = OPS[op]
        dtypes = tuple(dict.fromkeys(row.out_dtype(d) for d in row.accepts()))  # outputs
        super().__init__(name, row, dtypes, description=(
            f"numpy's {op} of " + ("a buffer and a scalar" if scalar else
                                   "two buffers" if arity == 2 else "a buffer")
            + (", the scalar on the left" if reflected else "")))
        self.inputs = ("a", "b")[:arity]  # the scalar forms read one buffer
        self.op = op
        self.scalar = scalar
        self.reflected = reflected
        self.compare = row.truth
        if scalar:
            self.params = (Param("scalar", "S", doc="the scalar, in the input's dtype"),)

    # the scalar is in the INPUT's dtype (a comparison's output is bool)
    def resolve_params(self, params, dt):
        return dict(params or {})

    def in_dtype(self, inputs, output) -> str:
        return inputs[0].dtype

    def _out_dtype(self, inputs) -> str:
        """The output's dtype for these inputs' (the row's rule), or a DtypeError naming
        an input dtype the row does not take."""
        dt = inputs[0].dtype
        accepts = self.row.accepts()
        if dt not in accepts:
            raise DtypeError(f"{self.name}: input 'a' is {dt}; {self.op} takes "
                             f"{', '.join(accepts)}")
        return self.row.out_dtype(str(dt))

    def check(self, inputs, output, params) -> None:
        dt = self.in_dtype(inputs, output)
        for name, b in zip(self.inputs, inputs):
            if b.dtype != dt:
                raise DtypeError(f"{self.name}: input {name!r} is {b.dtype} and input 'a' is "
                                 f"{dt}; dtypes must match")
        want = self._out_dtype(inputs)
        if output.dtype != want:
            raise DtypeError(f"{self.name}: out is {output.dtype}, expected {want}")
        shape = self._broadcast(inputs)
        if shape != output.shape:
            raise ShapeError(f"{self.name}: the inputs broadcast to {shape} and out is "
                             f"{output.shape}")
        if self.scalar and "scalar" not in params:
            raise ShapeError(f"{self.name}: needs params scalar")
        device = output.device
        if dt == "f64" and self.op in ("floordiv", "mod") and device is not None \
                and not device.has("shader-int64"):
            raise UnsupportedDtypeError(
                f"{self.name}: f64 // and % take the bits of f64 values apart in 64-bit "
                f"integers, which need the adapter feature 'shader-int64'; {device.name} does "
                f"not have it", "shader-int64")
        self._plan(inputs, output, params)

    def output_spec(self, inputs, params):
        shape = self._broadcast(inputs)
        return shape, self._out_dtype(inputs)

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
                loads.append(packing.load(src, n, at_))
            else:
                loads.append(f"{w}({n}[{at_}])")
        if self.scalar:
            s = f"{w}(p.s)"
            loads = [s, loads[0]] if self.reflected else [loads[0], s]
        args = ", ".join(loads)
        rt = "u32" if self.compare else w  # op's result type
        index = index_wgsl(ndim, strided) if ndim else ""
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"),
                  # (complex64 takes no scalar: the uniform has no complex field type)
                  ("s", "u32" if src.kind == "c" else src.wgsl),
                  *uniform_fields(ndim, strided))
        head = []
        if dst.packed:
            fields, head, item = packed_item(dst, ndim, strided, fields, packing.put(
                dst, f"{dst.wgsl}(op({args}))", "l"), "word")
        else:
            item = ["let e = i;", "let g = p.start + e;", *index.split("\n")]
            stepped = stepped_index(fields, ndim, strided, "p.start + base")
            if stepped is not None:
                fields, head, item, advance = stepped
                item = ["let e = i;", *item, *advance]
            item.append(f"out[i] = {dst.wgsl}(op({args}));")
        params = [f"x: {w}", f"y: {w}"][:2 if (self.scalar or len(self.inputs) == 2) else 1]
        helpers = _float_divmod(w) if src.is_float and self.row.helpers == "divmod" else ""
        text = broadcast_source(self, [src.wgsl, dst.wgsl], rt, fields, lines,
                                ", ".join(params), _arith(self.op, src), item, helpers,
                                packed=src.packed or dst.packed, head=head)
        return text, fields

    def launches(self, inputs, output, params, device):
        total = output.size
        if total == 0:
            return []
        full, sizes, strided = self._plan(inputs, output, params)
        dst = DTYPES[output.dtype]
        per_item = dst.lanes
        # the chunk by the wider of the input and output items (a comparison's output is u8)
        item_bytes = max(dst.itemsize, DTYPES[self.in_dtype(inputs, output)].itemsize)
        s = params.get("scalar", 0) if self.scalar else 0
        dims = uniform_values(sizes, strided) if sizes else {}
        dims.update(step_values(sizes, self.workgroup_size * per_item))  # (stepped decode)
        out = []
        for start, count, ranges, offsets in split_launches(
                self.name, list(zip(self.inputs, inputs)), full, sizes, strided, total,
                item_bytes, device):
            items = -(-count // per_item)
            groups = math.ceil(items / (self.workgroup_size * self.per_invocation))
            if ranges is not None:  # the output's piece in its own item size
                ranges = ranges[:-1] + ((start * dst.itemsize,
                                         (count * dst.itemsize + 3) // 4 * 4),)
            u = dict(dims, n=items, start=start, total=total, s=s)
            u.update({f"o{n}": off for n, off in offsets.items()})
            out.append(Launch(fold_grid(groups, device, self.name), u, ranges))
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


# A row parameter that is the literal 0 in a fused program, not a uniform's scalar: relu's
# slope 0 then folds away, as its ``slope == 0`` test selects the literal (a product and a
# compare fewer per relu: ten relu(x + b) on 1M f32 5.29 -> 4.15 ms a call on lavapipe; on
# an H200 what bounds that program is its integer arithmetic).
ZERO = -1


def row_of(k, params):
    """(op table row, scalar value or None, reflected[, the fused node's row parameters]) of
    a fusable operator kernel, or None: the built-in + - * / of equal shapes, scale, relu
    without a slope (a slope of 0, ZERO: every dtype takes it as it is), and Buffer's and the
    namespace's ArrayOp forms."""
    if type(k) is ArrayOp:
        if k.scalar:
            if not params or "scalar" not in params:
                return None
            return k.row.name, params["scalar"], k.reflected
        return k.row.name, None, False
    name = k.name
    if name in BUILTIN_OPS and not params:
        return BUILTIN_OPS[name], None, False
    if name == "scale" and params and "scalar" in params:
        return "mul", params["scalar"], False
    if name == "relu" and params and len(params) == 1:
        slope = params.get("slope")
        if type(slope) in (int, float) and slope == 0:
            return "relu", None, False, (ZERO,)
    return None
