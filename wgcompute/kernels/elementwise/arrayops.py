"""The elementwise kernels behind Buffer's operators beyond the four arithmetic ones: a buffer
with a scalar (either side), floor division, remainder, power, negation, abs and comparisons
(u8 results), all broadcasting as numpy does, with numpy's integer semantics and its float
values for nan, ±inf and ±0 (float // and % bit for bit)."""

from __future__ import annotations

import math

from ...dtypes import DTYPES, DType
from ...errors import DtypeError, ShapeError, UnsupportedDtypeError
from ..core import shaders
from ..core.base import Launch, Param, PipelineKey, fold_grid
from ..core.layout import index_wgsl, uniform_fields, uniform_values
from .builtin import ALL, Elementwise, split_launches
from .optable import OPS

# Buffer's operators: the op table rows they run (name -> row)
ARRAY_OPS = {n: OPS[n] for n in ("add", "sub", "mul", "div", "floordiv", "mod", "pow", "neg",
                                 "abs", "lt", "le", "gt", "ge", "eq", "ne")}
COMPARISONS = {n: row.wgsl for n, row in ARRAY_OPS.items() if row.dtypes == "compare"}


# Bit layouts of the float work types: (unsigned type, literal suffix, mantissa bits, the
# most bits a remainder below 2**(mantissa bits + 1) may be shifted left by and still fit)
_FLOAT_BITS = {"f32": ("u32", "u", 23, 8), "f64": ("u64", "lu", 52, 11)}


def _float_divmod(w: str) -> str:
    """WGSL fns remainder(a, b) and floor_divide(a, b): numpy's (npy_divmod, with its cases
    for nan, ±inf and ±0), bit for bit, in float work type ``w`` (f32, f16's too; f64 needs
    64-bit integers).

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

    def lit(v):
        return f"{hex(v)}{sfx}"

    if u == "u64":  # naga has no 64-bit countLeadingZeros
        clz = ("let hi = u32(v >> 32u);\n"
               "    return select(countLeadingZeros(hi), 32u + countLeadingZeros(u32(v)), "
               "hi == 0u);")
    else:
        clz = "return countLeadingZeros(v);"
    return f"""fn clz(v: {u}) -> u32 {{
    {clz}
}}

// nonzero finite |v| as an integer mantissa m (top bit at bit {mb}) and an exponent e:
// |v| = m·2^(e - {bias} - {mb}), subnormals normalized (e < 1)
fn unpack(v: {w}) -> vec2<{u}> {{
    let a = bitcast<{u}>(v) & {lit(absm)};
    var e = i32(u32(a >> {mb}u));
    var m = a & {lit(mmask)};
    if (e == 0) {{
        let lz = clz(m) - {bits - 1 - mb}u;
        m = m << lz;
        e = 1 - i32(lz);
    }} else {{
        m = m | {lit(hid)};
    }}
    return vec2<{u}>(m, {u}(bitcast<u32>(e)));
}}

fn exponent(p: vec2<{u}>) -> i32 {{
    return bitcast<i32>(u32(p.y));
}}

// s | r·2^(e - {bias} - {mb}) for 0 < r < 2^{mb + 1}, exactly representable (subnormal too)
fn pack(s: {u}, r: {u}, e0: i32) -> {w} {{
    let lz = clz(r) - {bits - 1 - mb}u;
    let e = e0 - i32(lz);
    if (e >= 1) {{
        return bitcast<{w}>(s | ({u}(u32(e)) << {mb}u) | ((r << lz) & {lit(mmask)}));
    }}
    return bitcast<{w}>(s | ((r << lz) >> u32(1 - e)));
}}

// C's fmod(x, y)·2^k for finite x and y != 0 (or ±inf), exactly: the remainder of
// mx·2^(ex - ey) by my, scaled back by 2^ey
fn fmod_scaled(x: {w}, y: {w}, k: i32) -> {w} {{
    let ux = bitcast<{u}>(x);
    let s = ux & {lit(sign)};
    if ((ux & {lit(absm)}) == {lit(0)}) {{
        return x;
    }}
    let px = unpack(x);
    if ((ux & {lit(absm)}) < (bitcast<{u}>(y) & {lit(absm)})) {{
        return pack(s, px.x, exponent(px) + k);
    }}
    let py = unpack(y);
    let my = py.x;
    var r = px.x;
    var d = exponent(px) - exponent(py);  // >= 0
    loop {{  // one step while x / y < 2^{step + 1}
        let n = min(d, {step});
        r = (r << u32(n)) % my;
        d = d - n;
        if (d <= 0 || r == {lit(0)}) {{ break; }}
    }}
    if (r == {lit(0)}) {{
        return bitcast<{w}>(s);
    }}
    return pack(s, r, exponent(py) + k);
}}

// z / b correctly rounded, for finite z, b != 0 (see _float_divmod)
fn div_rn(z: {w}, b: {w}) -> {w} {{
    let q0 = z / b;
    let aq = bitcast<{u}>(q0) & {lit(absm)};
    if (aq < {lit(big)} && (bitcast<{u}>(b) & {lit(absm)}) < {lit(huge_b)}) {{
        return q0;
    }}
    let pz = unpack(z);
    let pb = unpack(b);
    let mb = pb.x;
    // {mb + 2} bits of mz / mb (in [1/2, 2)) below the point, and whether a remainder is left
    var q = pz.x / mb;
    var r = pz.x % mb;
    var need = {mb + 2};
    loop {{
        if (need <= 0) {{ break; }}
        let n = min(need, {step});
        r = r << u32(n);
        q = (q << u32(n)) | (r / mb);
        r = r % mb;
        need = need - n;
    }}
    let shift = select(1u, 2u, (q >> {mb + 2}u) != {lit(0)});  // keep {mb + 1} bits
    var m = q >> shift;
    let rest = q & ((({lit(1)}) << shift) - {lit(1)});
    let half = {lit(1)} << (shift - 1u);
    if (rest > half || (rest == half && (r != {lit(0)} || (m & {lit(1)}) != {lit(0)}))) {{
        m = m + {lit(1)};
    }}
    let s = (bitcast<{u}>(z) ^ bitcast<{u}>(b)) & {lit(sign)};
    // m·2^(shift - {mb + 2})·2^(ez - eb) as m·2^(e - bias - {mb})
    var e = i32(shift) - 2 + exponent(pz) - exponent(pb) + {bias};
    if (m == ({lit(hid)} << 1u)) {{
        m = m >> 1u;
        e = e + 1;
    }}
    if (e >= {2 * bias + 1}) {{
        return bitcast<{w}>(s | {lit(inf)});
    }}
    if (e < 1) {{
        return pack(s, m, e);
    }}
    return bitcast<{w}>(s | ({u}(u32(e)) << {mb}u) | (m & {lit(mmask)}));
}}

// numpy's remainder(a, b): fmod, then b's sign
fn remainder(a: {w}, b: {w}) -> {w} {{
    let ua = bitcast<{u}>(a);
    let ub = bitcast<{u}>(b);
    let ab = ub & {lit(absm)};
    if ((ua & {lit(absm)}) >= {lit(inf)} || ab > {lit(inf)} || ab == {lit(0)}) {{
        return bitcast<{w}>({lit(qnan)});  // nan in, a = ±inf, b = ±0: fmod's nan
    }}
    let m = fmod_scaled(a, b, 0);
    let um = bitcast<{u}>(m);
    if ((um & {lit(absm)}) == {lit(0)}) {{
        return bitcast<{w}>(ub & {lit(sign)});
    }}
    if ((ub & {lit(sign)}) == (um & {lit(sign)})) {{
        return m;
    }}
    if (ab >= {lit(tiny)}) {{  // m + b, both large enough to stay normal
        return m + b;
    }}
    let r = fmod_scaled(a, b, 64) + b * {w}(18446744073709551616.0);  // scaled by 2^64
    let pr = unpack(r);
    return pack(bitcast<{u}>(r) & {lit(sign)}, pr.x, exponent(pr) - 64);
}}

// numpy's floor_divide(a, b): (a - fmod(a, b)) / b, then the floor of the quotient
fn floor_divide(a: {w}, b: {w}) -> {w} {{
    let ua = bitcast<{u}>(a);
    let ub = bitcast<{u}>(b);
    let aa = ua & {lit(absm)};
    let ab = ub & {lit(absm)};
    let nan = bitcast<{w}>({lit(qnan)});
    let sq = (ua ^ ub) & {lit(sign)};  // the sign of a / b
    if (aa > {lit(inf)} || ab > {lit(inf)}) {{
        return nan;
    }}
    if (ab == {lit(0)}) {{  // a / ±0
        return select(bitcast<{w}>(sq | {lit(inf)}), nan, aa == {lit(0)});
    }}
    if (aa == {lit(inf)}) {{
        return nan;
    }}
    let small = ab < {lit(tiny)};
    if (small && aa >= {lit(huge_a)}) {{  // the quotient overflows
        return bitcast<{w}>(sq | {lit(inf)});
    }}
    // a small b: a, b and fmod scaled by 2^64 (exact), so that nothing is subnormal
    let k = select(0, 64, small);
    let f = select({w}(1), {w}(18446744073709551616.0), small);
    let m = fmod_scaled(a, b, k);
    let z = a * f - m;
    var d = bitcast<{w}>(sq);  // z = ±0: numpy's division gives a signed zero
    if ((bitcast<{u}>(z) & {lit(absm)}) != {lit(0)}) {{
        d = div_rn(z, b * f);
    }}
    let um = bitcast<{u}>(m);
    if ((um & {lit(absm)}) != {lit(0)} && (ub & {lit(sign)}) != (um & {lit(sign)})) {{
        d = d - {w}(1);  // the remainder takes b's sign
    }}
    var q = bitcast<{w}>(sq);
    if ((bitcast<{u}>(d) & {lit(absm)}) != {lit(0)}) {{
        q = floor(d);
        if (d - q > {w}(0.5)) {{
            q = q + {w}(1);
        }}
    }}
    return q;
}}
"""


def _arith(op: str, dt: DType) -> str:
    """WGSL of fn op(x, y) -> W for one operator, from its op table row, in the work type W
    (f32 for f16, u32 for u8 lanes, which the caller masks); comparisons give u32 0 or 1."""
    w = "f32" if dt.name == "f16" else dt.wgsl
    row = ARRAY_OPS[op]
    if row.body is not None:
        return row.body(dt, w)
    expr = row.expr(dt, w, w, where=f"array_{op}")
    if row.dtypes == "compare":
        return f"return select(0u, 1u, {expr});"
    return f"return {expr};"


class ArrayOp(Elementwise):
    """out = op(a, b), op(a, scalar) or op(scalar, a) (``reflected``), or op(a), elementwise
    with numpy broadcasting; comparisons give u8 (0 or 1). One element per item (a u32 word
    of four for u8 outputs), each operand read through its strides from its own offset."""

    def __init__(self, op: str, arity: int, scalar: bool = False, reflected: bool = False):
        name = f"array_{op}" + ("_scalar" if scalar else "") + ("_reflected" if reflected
                                                                 else "")
        dtypes = ("u8",) if op in COMPARISONS else ALL
        super().__init__(name, ARRAY_OPS[op], dtypes, description=(
            f"numpy's {op} of " + ("a buffer and a scalar" if scalar else
                                   "two buffers" if arity == 2 else "a buffer")
            + (", the scalar on the left" if reflected else "")))
        self.inputs = ("a", "b")[:arity]  # the scalar forms read one buffer
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
            item = [
                "var word = 0u;",
                "for (var l = 0u; l < 4u; l = l + 1u) {",
                "    let e = i * 4u + l;",
                "    let g = p.start + e;",
                "    if (g < p.total) {",
                *("        " + x for x in index.splitlines()),
                f"        word = word | (((op({args})){mask}) << (l * 8u));",
                "    }",
                "}",
                "out[i] = word;"]
        else:
            conv = f"{dst.wgsl}(op({args}))"
            item = ["let e = i;", "let g = p.start + e;", *index.split("\n"),
                    f"out[i] = {conv};"]
        params = [f"x: {w}", f"y: {w}"][:2 if (self.scalar or len(self.inputs) == 2) else 1]
        fields = (("n", "u32"), ("start", "u32"), ("total", "u32"),
                  ("s", "u32" if src.packed else src.wgsl), *uniform_fields(ndim, strided))
        text = shaders.render(shaders.load("elementwise/elementwise_broadcast.wgsl"), {
            "ENABLE": shaders.enable_directives([src.wgsl, dst.wgsl]),
            "T": rt,
            "DIMS": "\n".join(f"    {n}: {ft}," for n, ft in fields[3:]),
            "BINDINGS": "\n".join(lines),
            "UB": len(self.inputs) + 1,
            "WG": self.workgroup_size,
            "U": self.per_invocation,
            "ARGS": ", ".join(params),
            "BODY": _arith(self.op, src),
            "ITEM": item,
            "HELPERS": _float_divmod(w) if src.is_float and self.row.helpers == "divmod"
            else "",
        })
        return text, fields

    def launches(self, inputs, output, params, device):
        total = output.size
        if total == 0:
            return []
        full, sizes, strided = self._plan(inputs, output, params)
        dst = DTYPES[output.dtype]
        per_item = 4 if dst.packed else 1
        # the chunk by the wider of the input and output items (a comparison's output is u8)
        item_bytes = max(dst.itemsize, DTYPES[self.in_dtype(inputs, output)].itemsize)
        s = params.get("scalar", 0) if self.scalar else 0
        dims = uniform_values(sizes, strided) if sizes else {}
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
