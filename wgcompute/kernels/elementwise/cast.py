"""Conversions between every pair of the dtype table: the "astype" kernel (defined results
for every value: integers wrap, floats round to nearest or overflow to inf, floats become
integers by a rounding mode and saturate; to bool x != 0, nan giving True; from bool 0 or
1) and the check that finds the first value a conversion would change (wgc.astype runs both
and reads the check back)."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES, DType
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from . import packing

ALL = ("f32", "f64", "f16", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "bool")
ROUNDINGS = ("trunc", "round", "floor", "ceil")
CASTINGS = ("exact", "unsafe")


def _holds(s: DType, t: DType) -> bool:
    """Whether every value of ``s`` is a value of ``t`` (bool's 0 and 1 are every dtype's)."""
    if s.kind == "b":
        return True
    if s.kind in "iu" and t.kind == "f":  # the integer's magnitude bits fit the significand
        return s.bits - (s.kind == "i") <= np.finfo(t.numpy).nmant + 1
    return t.kind != "b" and bool(np.can_cast(s.numpy, t.numpy, "safe"))


# (from, to) pairs that hold every value of the source exactly, and the truth value of
# anything (x != 0: converting to bool means that, as numpy's and the array API's astype)
_NO_CHECK = {(s, t) for s in ALL for t in ALL if t == "bool" or _holds(DTYPES[s], DTYPES[t])}
_WG = 256
_PER = 4  # items per invocation


def exact_by_type(src: str, dst: str) -> bool:
    """Whether every value of dtype ``src`` is exactly a value of ``dst``."""
    return src == dst or (src, dst) in _NO_CHECK


def check_options(src: str, dst: str, rounding, casting, where: str) -> None:
    if casting not in CASTINGS:
        raise ArgumentError(f"{where}: casting must be 'exact' or 'unsafe', got {casting!r}")
    if rounding is None:
        return
    if rounding not in ROUNDINGS:
        raise ArgumentError(f"{where}: rounding must be one of "
                            f"{', '.join(map(repr, ROUNDINGS))} or None, got {rounding!r}")
    if not (DTYPES[src].is_float and DTYPES[dst].kind in "iu"):
        raise ArgumentError(f"{where}: rounding={rounding!r} applies to float -> integer "
                            f"conversions; {src} -> {dst} is not one")


def _lit(value, t: str) -> str:
    """A WGSL literal of type t holding ``value`` exactly (t's own value)."""
    if t in ("f32", "f64", "f16"):
        v = float(value)
        if math.isinf(v):
            raise AssertionError("no inf literals")
        return f"{t}({v!r})"
    if t == "i64":
        return f"{int(value)}li" if value >= 0 else f"(-{-int(value) - 1}li - 1li)"
    if t == "i32":
        return f"{int(value)}i" if value >= 0 else f"(-{-int(value) - 1}i - 1i)"
    if t == "u64":
        return f"{int(value)}lu"
    return f"{int(value)}u"


_INF = {"f32": "inf_f32()", "f16": "inf_f16()"}
_INF_FNS = {"f32": "fn inf_f32() -> f32 {\n    return bitcast<f32>(0x7f800000u);\n}\n",
            "f16": "fn inf_f16() -> f16 {\n    return f16(bitcast<f32>(0x7f800000u));\n}\n"}
# below these magnitudes a value rounds to a finite f32 / f16 (max + half an ulp)
_OVERFLOW = {"f32": 3.4028235677973366e38, "f16": 65520.0}
_MAXF = {"f32": 3.4028234663852886e38, "f64": 1.7976931348623157e308}


def _work_type(d: DType) -> str:
    """The WGSL type a value of dtype d is computed in (f16 in f32, u8 in u32)."""
    return "f32" if d.name == "f16" else d.wgsl


def _is_nan(v: str, w: str) -> str:
    """WGSL: whether ``v`` (of float type ``w``) is nan. f32 by its bits: NVIDIA's compiler
    assumes no nan in comparisons (``!(r <= big) && !(r > big)`` let nan through to i64 as
    -2**63, measured on an H100); f64 has no bitcast in WGSL, so ordered comparisons."""
    if w == "f32":
        return f"(bitcast<u32>({v}) & 0x7fffffffu) > 0x7f800000u"
    big = _lit(_MAXF[w], w)
    return f"!(abs({v}) <= {big}) && !(abs({v}) > {big})"


def _not_finite(v: str, w: str) -> str:
    """WGSL: whether ``v`` is nan or ±inf (f32 by its bits, as _is_nan)."""
    if w == "f32":
        return f"(bitcast<u32>({v}) & 0x7fffffffu) >= 0x7f800000u"
    return f"!(abs({v}) <= {_lit(_MAXF[w], w)})"


def _truth(v: str, w: str) -> str:
    """WGSL: whether ``v`` (of work type ``w``) is not zero; a nan is (f32 by its bits, as
    _is_nan: -0.0 is zero, and no comparison of a nan is trusted)."""
    if w == "f32":
        return f"(bitcast<u32>({v}) & 0x7fffffffu) != 0u"
    if w == "f64":
        return f"!({v} == 0.0)"
    return f"{v} != {w}(0)"


def convert_wgsl(src: DType, dst: DType, rounding: str | None) -> str:
    """Body of ``fn conv(v: W) -> D``: v in the source's work type, D the target's WGSL type
    (u32 for u8 and bool, masked by the caller)."""
    w = _work_type(src)
    d = dst.wgsl
    if dst.kind == "b":  # the truth value: 1 where v != 0 (nan too), else 0
        return f"return select(0u, 1u, {_truth('v', w)});"
    if src.is_float and dst.is_float:
        if dst.itemsize >= src.itemsize or dst.name == src.name:
            return f"return {d}(v);"
        limit = _lit(_OVERFLOW[d], w)
        inf = _INF[d]
        return (f"if (abs(v) >= {limit}) {{\n        return select({inf}, -{inf}, v < {w}(0));"
                f"\n    }}\n    return {d}(v);")
    if src.is_float:  # float -> integer: round, saturate, NaN -> 0
        r = {"trunc": "trunc(v)", "round": "round(v)", "floor": "floor(v)",
             "ceil": "ceil(v)", None: "trunc(v)"}[rounding]
        info = np.iinfo(dst.numpy)
        it = d  # (packed dtypes: their work type, i32 or u32, masked by the caller)
        return (f"let r = {r};\n    if ({_is_nan('r', w)}) {{\n"
                f"        return {d}(0);\n    }}\n"
                f"    if (r >= {_lit(float(info.max) + 1.0, w)}) {{\n"
                f"        return {_lit(info.max, it)};\n    }}\n"
                f"    if (r < {_lit(float(info.min), w)}) {{\n"
                f"        return {_lit(info.min, it)};\n    }}\n"
                f"    return {d}({it}(r));")
    if dst.is_float:  # integer -> float: nearest; f16 through f32 (overflow -> inf)
        if d == "f16":
            limit = _lit(_OVERFLOW["f16"], "f32")
            inf = _INF["f16"]
            return (f"let f = f32(v);\n    if (abs(f) >= {limit}) {{\n"
                    f"        return select({inf}, -{inf}, f < 0.0);\n    }}\n"
                    f"    return f16(f);")
        return f"return {d}(v);"
    # integer -> integer: the low bits, as numpy's unsafe casts (packed ones masked by the
    # caller)
    wide = ("i64", "u64")
    if src.wgsl in wide and d in wide:  # the same 64 bits
        return f"return bitcast<{d}>(v);"
    if src.wgsl in wide:  # the low 32 bits, reinterpreted
        return f"return {d}(u32(v & {_lit(2**32 - 1, src.wgsl)}));"
    if src.wgsl == "u32" and d in wide:  # two halves below 2**31: no sign extension either way
        return f"return {d}(v >> 1u) * {_lit(2, d)} + {d}(v & 1u);"
    if src.wgsl == "i32" and d == "u64":  # sign-extended to 64 bits, then reinterpreted
        return "return bitcast<u64>(i64(v));"
    return f"return {d}(v);"


def check_wgsl(src: DType, dst: DType, rounding: str | None) -> str:
    """Body of ``fn bad(v: W) -> bool``: whether converting v changes its value."""
    w = _work_type(src)
    if src.is_float and dst.is_float:  # narrowing: only overflow is refused (floats round)
        if dst.itemsize >= src.itemsize:
            return "return false;"
        finite = f"abs(v) <= {_lit(_MAXF[w], w)}"
        return f"return {finite} && abs(v) >= {_lit(_OVERFLOW[dst.wgsl], w)};"
    if src.is_float:
        info = np.iinfo(dst.numpy)
        r = {"trunc": "trunc(v)", "round": "round(v)", "floor": "floor(v)",
             "ceil": "ceil(v)", None: "v"}[rounding]
        # bounds are exact powers of two (or 0) in every float type
        return (f"let r = {r};\n    if ({_not_finite('r', w)}) {{\n"
                f"        return true;\n    }}\n"
                f"    return trunc(r) != r || r < {_lit(float(info.min), w)} || "
                f"r >= {_lit(float(info.max) + 1.0, w)};")
    if dst.is_float and w in ("i32", "u32"):
        # integer -> float: exact when its significant bits fit the float's (24 for f32, 11
        # for f16, which ends at 65504). Counted, not tried: Mesa's GL compiler (llvmpipe)
        # folded the round trip i32(f32(v)) != v to false, passing every value.
        magnitude = "select(u32(v), 0u - u32(v), v < 0i)" if w == "i32" else "v"
        bits = {"f32": 24, "f16": 11}.get(dst.name)
        if bits is None:  # f64 holds every 32-bit integer
            return "return false;"
        cond = f"(a >> min(countTrailingZeros(a), 31u)) >= {1 << bits}u"
        if dst.name == "f16":
            cond += " || a > 65504u"
        return f"let a = {magnitude};\n    return {cond};"
    if dst.is_float:  # a 64-bit integer -> float: the value must come back unchanged
        info = np.iinfo(src.numpy)
        wide = "f64" if dst.name == "f64" else "f32"
        lines = [f"let f = {wide}(v);",
                 f"    if (f < {_lit(float(info.min), wide)} || "
                 f"f >= {_lit(float(info.max) + 1.0, wide)}) {{",
                 "        return true;",
                 "    }"]
        cond = f"{w}(f) != v"
        if dst.name == "f16":
            cond += " || abs(f) > 65504.0 || f32(f16(f)) != f"
        lines.append(f"    return {cond};")
        return "\n".join(lines)
    # integer -> integer: inside the target's range
    si, di = np.iinfo(src.numpy), np.iinfo(dst.numpy)
    tests = []
    if di.min > si.min:
        tests.append(f"v < {_lit(di.min, w)}")
    if di.max < si.max:
        tests.append(f"v > {_lit(di.max, w)}")
    return f"return {' || '.join(tests) or 'false'};"


def _load(src: DType) -> str:
    w = _work_type(src)
    if src.packed:
        return f"return {packing.load(src, 'x', 'i')};"
    return f"return {w}(x[i]);"


class AsType(BuiltinKernel):
    """out = x converted to out's dtype, for every pair of dtypes, with defined results for
    every value (see the module docstring); a conversion that can lose information runs as a
    kernel only with params casting='unsafe' (wgc.astype checks it instead)."""

    name = "astype"
    inputs = ("x",)
    dtypes = ALL
    not_in_place = "astype writes another dtype than it reads"
    description = ("out = x converted to out's dtype (casting='unsafe': integers wrap, floats "
                   "round to nearest or overflow to inf, floats to integers by `rounding` "
                   "(default trunc), saturating, nan -> 0)")
    params = (Param("rounding", "rounding", None, "float -> integer: 'trunc' (default), "
                    "'round' (half to even), 'floor' or 'ceil'"),
              Param("casting", "casting", "exact", "'unsafe' to allow a conversion that can "
                    "lose information (a kernel cannot check the values)"))

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if x.shape != output.shape and x.size != output.size:
            raise ShapeError(f"astype: x is {x.shape} and out is {output.shape}; they must "
                             f"hold as many elements")
        check_options(x.dtype, output.dtype, params["rounding"], params["casting"], "astype")
        if params["casting"] == "exact" and not exact_by_type(x.dtype, output.dtype):
            raise DtypeError(
                f"astype: {x.dtype} -> {output.dtype} can change values, and a kernel run "
                f"cannot check them; pass params casting='unsafe' (integers wrap, floats round "
                f"or overflow to inf, floats to integers saturate), or call wgc.astype, which "
                f"checks and reads the result of the check back")

    def output_spec(self, inputs, params):
        raise ArgumentError("astype: needs an output buffer (its dtype is the target)")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (inputs[0].dtype, output.dtype),
                           (("rounding", params["rounding"]),))

    def render(self, key: PipelineKey):
        src, dst = DTYPES[key.dtypes[0]], DTYPES[key.dtypes[1]]
        rounding = dict(key.constants)["rounding"]
        w = _work_type(src)
        d = dst.wgsl
        if dst.packed:  # several results per word: an item is one output word
            item = ("var word = 0u;\n"
                    f"        for (var l = 0u; l < {dst.lanes}u; l = l + 1u) {{\n"
                    f"            let e = i * {dst.lanes}u + l;\n"
                    "            if (e < p.total) {\n"
                    f"                word = word | {packing.put(dst, 'conv(load(e))', 'l')};\n"
                    "            }\n"
                    "        }\n"
                    "        out[i] = word;")
        else:
            item = "out[i] = conv(load(i));"
        helper = _INF_FNS.get(d, "") if not dst.packed else ""
        src_text = _render(src, dst, f"{helper}fn conv(v: {w}) -> {d} {{\n    "
                           f"{convert_wgsl(src, dst, rounding)}\n}}", item,
                           "u32" if dst.packed else d)
        return src_text, (("n", "u32"), ("total", "u32"))

    def launches(self, inputs, output, params, device):
        total = output.size
        items = -(-total // DTYPES[output.dtype].lanes)
        if items == 0:
            return []
        groups = -(-items // (_WG * _PER))
        return [Launch(fold_grid(groups, device, self.name), {"n": items, "total": total})]


class AsTypeCheck(BuiltinKernel):
    """out[0] = the smallest index i whose x[i] converting to ``target`` would change (out
    holds 0xffffffff before: wgc.astype fills it). Internal: bound by wgc.astype."""

    name = "astype_check"
    inputs = ("x",)
    dtypes = ("u32",)
    params = (Param("target", "dtype", "f32"), Param("rounding", "rounding", None))

    def check(self, inputs, output, params) -> None:
        if output.dtype != "u32" or output.size < 1:
            raise DtypeError("astype_check: out must be a u32 buffer of one element")
        if inputs[0].size >= 2**32 - 1:
            raise ShapeError(f"astype: x {inputs[0].shape} has too many elements to check "
                             f"(2**32 - 1 at most)")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (inputs[0].dtype, params["target"]),
                           (("rounding", params["rounding"]),))

    def render(self, key: PipelineKey):
        src, dst = DTYPES[key.dtypes[0]], DTYPES[key.dtypes[1]]
        rounding = dict(key.constants)["rounding"]
        w = _work_type(src)
        item = "if (bad(load(i))) {\n            atomicMin(&out[0], i);\n        }"
        text = _render(src, dst, f"fn bad(v: {w}) -> bool {{\n    "
                       f"{check_wgsl(src, dst, rounding)}\n}}", item, "atomic<u32>")
        return text, (("n", "u32"), ("total", "u32"))

    def launches(self, inputs, output, params, device):
        n = inputs[0].size
        if n == 0:
            return []
        return [Launch(fold_grid(-(-n // (_WG * _PER)), device, self.name),
                       {"n": n, "total": n})]


def _render(src: DType, dst: DType, fn: str, item: str, out_type: str) -> str:
    types = [_work_type(src), dst.wgsl, src.wgsl if not src.packed else "u32"]
    x_type = "u32" if src.packed else src.wgsl
    return shaders.render(shaders.load("elementwise/astype.wgsl"), {
        "ENABLE": shaders.enable_directives(types),
        "XT": x_type, "OT": out_type, "W": _work_type(src), "LOAD": _load(src), "FN": fn,
        "ITEM": item, "WG": _WG, "U": _PER, "HEAD": (), "PACKED": src.packed or dst.packed})


ASTYPE_CHECK = AsTypeCheck()


def cast_kernels() -> list:
    return [AsType()]
