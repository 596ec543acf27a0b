"""The reductions' WGSL: the accumulator types, identities and tilings they use, and the
rendering of their programs (rows, columns, full reductions, argmax) with subgroups or without."""

from __future__ import annotations

from ...dtypes import DType
from ..core import shaders
from ..core.base import (
    wgsl_is_nan,
)

ALL = ("f32", "f64", "f16", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "bool")
_ACC = {"f32": "f32", "f16": "f32", "f64": "f64", "s8": "i32", "s16": "i32", "s32": "i32",
        "s64": "i64", "u8": "u32", "u16": "u32", "u32": "u32", "u64": "u64", "bool": "u32"}
TRUTH = ("any", "all")  # reductions of truth values: u32 0 or 1 per element, max or min
_LOWEST = {"f32": float("-inf"), "f64": float("-inf"), "i32": -2**31, "i64": -2**63, "u32": 0,
           "u64": 0}
_HIGHEST = {"f32": float("inf"), "f64": float("inf"), "i32": 2**31 - 1, "i64": 2**63 - 1,
            "u32": 2**32 - 1, "u64": 2**64 - 1}
# inputs read four at a time (of the packed dtypes, those of four lanes: a word's)
_VEC_OK = ("f32", "s32", "u32", "f16", "u8", "bool")
_FULL_GROUPS = 512  # workgroups of a full argmax: enough to fill a GPU, few CAS rounds
_PARTIAL_GROUPS = 1024  # workgroups (partials) of the other full reductions: one wave on a GPU
_ACC_DTYPE = {"f32": "f32", "f64": "f64", "i32": "s32", "i64": "s64", "u32": "u32", "u64": "u64"}
_ARGMAX_MERGE = ("if (b.v > a.v || (b.v == a.v && b.i < a.i)) {\n        return b;\n    }\n"
                 "    return a;")
_F32_NAN = "bitcast<f32>(0x7fc00000u)"  # a quiet nan (subgroup results: f32 only)
_COLS = 64  # outputs per workgroup in column mode (times _SLICES invocations each)
_SLICES = 4
# Column mode splits the reduced axis into parts (two steps) while it has fewer outputs
# than this: each output's invocations would otherwise walk a long axis alone.
_COLS_BUSY = 16384


def _flagged(op: str, acc: str) -> bool:
    """f32 max and min carry, in VI.i, the largest magnitude bits seen (an element's own bits
    & 0x7fffffff): past inf's, a nan was seen, and value() gives nan. Per element that is an
    `and` and an integer max beside the float max; the nan is resolved where a result is
    written (max and min of a nan are undefined in WGSL, and NVIDIA's compiler assumes no
    nan in comparisons)."""
    return acc == "f32" and op in ("max", "min")


def _merge(op: str, acc: str) -> str:
    """Body of merge(a, b) -> VI. Floats follow numpy: max and min of anything with a nan are
    nan (f32: by the flag, see _flagged; f64: a select), and argmax takes the first nan (nan
    found by its bits, see wgsl_is_nan)."""
    if _flagged(op, acc):
        return f"return VI({op}(a.v, b.v), max(a.i, b.i));"
    if acc not in ("f32", "f64"):
        if op == "argmax":
            return _ARGMAX_MERGE
        return {"max": "return VI(max(a.v, b.v), 0u);", "min": "return VI(min(a.v, b.v), 0u);",
                "any": "return VI(max(a.v, b.v), 0u);", "all": "return VI(min(a.v, b.v), 0u);",
                "prod": "return VI(a.v * b.v, 0u);"}.get(op, "return VI(a.v + b.v, 0u);")
    if op in ("sum", "mean"):
        return "return VI(a.v + b.v, 0u);"
    if op == "prod":
        return "return VI(a.v * b.v, 0u);"
    na, nb = wgsl_is_nan("a.v", acc), wgsl_is_nan("b.v", acc)
    if op == "argmax":  # branch-free: b if it is larger or equal and earlier, or the first nan
        return (f"let na = {na};\n    let nb = {nb};\n"
                "    let later = b.v > a.v || (b.v == a.v && b.i < a.i);\n"
                "    let take = select(later, nb && (!na || b.i < a.i), na || nb);\n"
                "    return VI(select(a.v, b.v, take), select(a.i, b.i, take));")
    either = f"{na} || {nb}"  # f64 max and min
    return f"return VI(select({op}(a.v, b.v), a.v + b.v, {either}), 0u);"  # a nan + b: nan


def _elem_vi(op: str, acc: str) -> str:
    """Body of elem_vi(v, i) -> VI: element v at index i as a VI to merge."""
    if _flagged(op, acc):
        return "return VI(v, bitcast<u32>(v) & 0x7fffffffu);"
    return "return VI(v, i);"


def _value(op: str, acc: str) -> str:
    """Body of value(r: VI) -> ACC: the result a merged VI stands for."""
    if _flagged(op, acc):
        return f"return select(r.v, {_F32_NAN}, r.i > 0x7f800000u);"
    return "return r.v;"


def _truth(v: str, t: str) -> str:
    """WGSL: whether ``v`` (of WGSL type ``t``, a scalar or vec4) is not zero, per lane; a
    nan is (f32 and f16 by their bits: no comparison of a nan is trusted, see cast._truth)."""
    vec = t.startswith("vec4")
    u = "vec4<u32>" if vec else "u32"
    if "f32" in t or "f16" in t:
        f = f"vec4<f32>({v})" if vec else f"f32({v})"
        return f"(bitcast<{u}>({f}) & {u}(0x7fffffffu)) != {u}(0u)"
    if "f64" in t:  # `!=` is an ordered comparison in SPIR-V (false for nan): not `==`
        return f"!({v} == {t}(0))"
    return f"{v} != {t}(0)"


def _lane(xd: DType) -> str:
    """Element i of packed x (its lane of word i / lanes) as xd's work type: i32 sign-extended
    or u32 (see elementwise/packed.wgsl)."""
    word = f"x[i / {xd.lanes}u]" if xd.kind != "i" else f"bitcast<i32>(x[i / {xd.lanes}u])"
    return f"extractBits({word}, (i % {xd.lanes}u) * {xd.bits}u, {xd.bits}u)"


def _elem(xd: DType, acc: str, vec: bool, truth: bool = False) -> str:
    if truth:  # any, all: 1 for an element that is not zero (nan is not), else 0
        if xd.packed:
            return f"return select(0u, 1u, {_lane(xd)} != {xd.wgsl}(0));"
        v, t = ("x[i / 4u][i % 4u]", xd.wgsl) if vec else ("x[i]", xd.wgsl)
        return f"return select(0u, 1u, {_truth(v, t)});"
    if xd.packed:
        return f"return {acc}({_lane(xd)});"
    if vec:
        return f"return {acc}(x[i / 4u][i % 4u]);"
    return f"return {acc}(x[i]);"


def _load4(xd: DType, acc: str, truth: bool = False) -> str:
    if truth:
        w = ("vec4<u32>(w & 0xffu, (w >> 8u) & 0xffu, (w >> 16u) & 0xffu, w >> 24u)"
             if xd.packed else "x[q]")
        t = "vec4<u32>" if xd.packed else f"vec4<{xd.wgsl}>"
        body = ("let w = x[q];\n    return select(vec4<u32>(0u), vec4<u32>(1u), "
                f"{_truth(w, t)});")
    elif xd.packed:
        body = (f"let w = x[q];\n    return vec4<{acc}>(vec4<u32>(w & 0xffu, (w >> 8u) & 0xffu, "
                "(w >> 16u) & 0xffu, w >> 24u));")
    else:
        body = f"return vec4<{acc}>(x[q]);"
    return f"fn load4(q: u32) -> vec4<{acc}> {{\n    {body}\n}}"


def _take(op: str, acc: str, val: str, idx: str, to: str) -> str:
    """WGSL merging element ``val`` (index ``idx``) into ``to``, in a loop over increasing
    indices. A float argmax leaves the loop at its first nan (nothing after it can win), so
    that the elements before it merge with plain comparisons, one nan test each."""
    if op == "argmax" and acc in ("f32", "f64"):
        return (f"if ({wgsl_is_nan(val, acc)}) {{ {to} = VI({val}, {idx}); break; }} "
                f"{to} = merge_ordered({to}, VI({val}, {idx}));")
    return f"{to} = merge({to}, elem_vi({val}, {idx}));"


def _fns(op: str, acc: str) -> str:
    """Functions beside merge: merge_ordered (a float argmax's merge of two non-nan VIs)."""
    if op == "argmax" and acc in ("f32", "f64"):
        return f"fn merge_ordered(a: VI, b: VI) -> VI {{\n    {_ARGMAX_MERGE}\n}}\n"
    return ""


def _scan(vec: bool, only_equal: bool, acc: str = "", op: str = "") -> str:
    """Loop body of scan(): every element, or (argmax phase 2) those equal to the max m (or,
    ``acc`` given, those that are nan)."""
    def take(val: str, idx: str) -> str:
        if only_equal:
            same = wgsl_is_nan(val, acc) if acc in ("f32", "f64") else f"{val} == m"
            return f"if ({same}) {{ acc = merge(acc, VI(m, {idx})); }}"
        return _take(op, acc, val, idx, "acc")

    if not vec:
        return ("for (var i = start; i < count; i = i + stride) {\n"
                f"        let v = elem(base + i);\n        {take('v', 'i')}\n    }}")
    lines = ["let q0 = base / 4u;",
             "for (var q = start; q * 4u < count; q = q + stride) {",
             "        let v = load4(q0 + q);",
             "        let i0 = q * 4u;",
             f"        {take('v.x', 'i0')}"]
    for c, comp in ((1, "y"), (2, "z"), (3, "w")):
        lines.append(f"        if (i0 + {c}u < count) {{ {take('v.' + comp, f'i0 + {c}u')} }}")
    lines.append("    }")
    return "\n    ".join(lines)


def _wgreduce(sub: bool, op: str, wg: int, acc: str = "") -> str:
    tail = ("let r = VI(wv[0], wi[0]);\n    workgroupBarrier();  // wv is reused by the next row\n"
            "    return r;")
    if not sub:
        return (f"wv[lid] = mine.v;\n    wi[lid] = mine.i;\n    workgroupBarrier();\n"
                f"    for (var s = {wg // 2}u; s > 0u; s = s >> 1u) {{\n"
                "        if (lid < s) {\n"
                "            let r = merge(VI(wv[lid], wi[lid]), VI(wv[lid + s], wi[lid + s]));\n"
                "            wv[lid] = r.v;\n            wi[lid] = r.i;\n        }\n"
                "        workgroupBarrier();\n    }\n    " + tail)
    nan = acc == "f32" and op == "argmax"  # subgroups: never 64-bit
    if nan:  # subgroupMax / Min of a nan are undefined: whether any lane holds one, by bits
        first = (f"let mine_nan = {wgsl_is_nan('mine.v', acc)};\n"
                 "    let any_nan = subgroupMax(select(0u, 1u, mine_nan)) != 0u;\n    ")
    else:
        first = ""
    if op == "argmax":
        hit = "select(mine.v == m, mine_nan, any_nan)" if nan else "mine.v == m"
        m = f"select(m, {_F32_NAN}, any_nan)" if nan else "m"
        first += ("let m = subgroupMax(mine.v);\n"
                  f"    let s = VI({m}, subgroupMin(select(0xffffffffu, mine.i, {hit})));")
    else:
        fn = {"sum": "subgroupAdd", "mean": "subgroupAdd", "prod": "subgroupMul",
              "max": "subgroupMax", "min": "subgroupMin", "any": "subgroupMax",
              "all": "subgroupMin"}[op]
        flag = "subgroupMax(mine.i)" if _flagged(op, acc) else "0u"
        first += f"let s = VI({fn}(mine.v), {flag});"
    # each subgroup's leader takes a slot atomically: no assumption on how subgroups are laid
    # out over local_invocation_index
    return (first + "\n    if (sid == 0u) {\n        let slot = atomicAdd(&wslot, 1u);\n"
            "        wv[slot] = s.v;\n        wi[slot] = s.i;\n    }\n    workgroupBarrier();\n"
            "    if (lid == 0u) {\n        let count = atomicLoad(&wslot);\n"
            "        var r = VI(wv[0], wi[0]);\n"
            "        for (var k = 1u; k < count; k = k + 1u) {\n"
            "            r = merge(r, VI(wv[k], wi[k]));\n        }\n"
            "        wv[0] = r.v;\n        wi[0] = r.i;\n        atomicStore(&wslot, 0u);\n    }\n"
            "    workgroupBarrier();\n    " + tail)


def _final(op: str, acc: str, val: str, count: str = "p.n") -> str:
    return f"{val} / {acc}({count})" if op == "mean" else val


def _main_rows(op: str, od: DType, acc: str, wg: int) -> str:
    rpw = od.lanes
    lines = []
    for r in range(rpw):
        lines += [f"let row{r} = g * {rpw}u + {r}u;",
                  f"    var mine{r} = VI(p.ident, NONE);",
                  f"    if (row{r} < p.rows) {{",
                  f"        mine{r} = scan(p.xoff + row{r} * p.n, p.n, lid, {wg}u);",
                  "    }",
                  f"    let r{r} = reduce_wg(lid, sid, mine{r});"]
    lines.append("if (lid == 0u) {")
    if od.packed:  # several rows' results share one u32 word
        mask = f"{(1 << od.bits) - 1}u"
        word = " | ".join(f"(select(0u, u32(r{r}.v) & {mask}, row{r} < p.rows) << "
                          f"{od.bits * r}u)" for r in range(rpw))
        lines.append(f"        if (row0 < p.rows) {{ out[p.first / {rpw}u + g] = {word}; }}")
    else:
        val = "r0.i" if op == "argmax" else f"{od.wgsl}({_final(op, acc, 'value(r0)')})"
        lines.append(f"        if (row0 < p.rows) {{ out[p.first + row0] = {val}; }}")
    lines.append("    }")
    return "\n    ".join(lines)


def _main_argmax_full(acc: str, wg: int) -> str:
    """argmax over everything, in four launches (the other full reductions use passes()):
    0 init, 1 each workgroup's max into out[1] by compare-and-swap (it rarely changes, so
    it rarely retries), 2 the first index holding that max into out[2] by atomicMin, 3 the
    index into out[0]."""
    return ("if (p.phase == 0u) {\n"
            "        if (g == 0u && lid == 0u) {\n"
            "            atomicStore(&out[1], bitcast<u32>(p.ident));\n"
            "            atomicStore(&out[2], 0xffffffffu);\n        }\n        return;\n    }\n"
            "    if (p.phase == 3u) {\n"
            "        if (g == 0u && lid == 0u) {\n"
            "            atomicStore(&out[0], atomicLoad(&out[2]));\n"
            "        }\n        return;\n    }\n"
            "    if (p.phase == 1u) {\n"
            f"        let r = reduce_wg(lid, sid, scan(0u, p.n, g * {wg}u + lid, "
            f"p.groups * {wg}u));\n"
            "        if (lid == 0u) {\n"
            "            var old = atomicLoad(&out[1]);\n            loop {\n"
            f"                let nv = bitcast<u32>(merge(VI(bitcast<{acc}>(old), 0u), r).v);\n"
            "                if (nv == old) { break; }\n"
            "                let res = atomicCompareExchangeWeak(&out[1], old, nv);\n"
            "                if (res.exchanged) { break; }\n"
            "                old = res.old_value;\n            }\n"
            "        }\n    } else {\n"
            f"        let m = bitcast<{acc}>(atomicLoad(&out[1]));\n"
            f"        let r = reduce_wg(lid, sid, scan_eq(m, 0u, p.n, g * {wg}u + lid, "
            f"p.groups * {wg}u));\n"
            "        if (lid == 0u && r.i != 0xffffffffu) {\n"
            "            atomicMin(&out[2], p.first + r.i);\n        }\n"
            "    }")


def _main_cols(op: str, od: DType, acc: str, finish: bool) -> str:
    """Column mode: workgroup g owns outputs g·COLS.. (+ COLS); invocation lid reads column
    lid % COLS, rows lid / COLS, + SLICES, ...; the slices meet in workgroup memory. Output o
    is (outer q, part, inner c) with o = (q·parts + part)·inner + c; its rows are part·chunk
    .. (+ chunk). ``finish`` False (colpart): the accumulator is written, undivided."""
    lines = [f"let col = lid % {_COLS}u;",
             f"let s = lid / {_COLS}u;",
             f"let o = g * {_COLS}u + col;",
             "var mine = VI(p.ident, NONE);",
             "if (o < p.rows) {",
             "    let c = o % p.inner;",
             "    let q = o / p.inner;",
             "    let r0 = (q % p.parts) * p.chunk;",
             "    let r1 = min(p.n, r0 + p.chunk);",
             "    let base = (q / p.parts) * p.n * p.inner + c;",
             f"    for (var r = r0 + s; r < r1; r = r + {_SLICES}u) {{",
             "        let v = elem(base + r * p.inner);",
             "        " + _take(op, acc, "v", "r", "mine"),
             "    }",
             "}",
             "wv[lid] = mine.v;",
             "wi[lid] = mine.i;",
             "workgroupBarrier();",
             "var m = mine;",
             "if (s == 0u) {",
             f"    for (var k = 1u; k < {_SLICES}u; k = k + 1u) {{",
             f"        m = merge(m, VI(wv[col + k * {_COLS}u], wi[col + k * {_COLS}u]));",
             "    }",
             "}"]
    if od.packed:  # several outputs share a u32 word: pack them through workgroup memory
        k, mask = od.lanes, f"{(1 << od.bits) - 1}u"
        lines += ["workgroupBarrier();",
                  "if (s == 0u) {",
                  "    wv[col] = m.v;",
                  "}",
                  "workgroupBarrier();",
                  f"if (lid < {_COLS // k}u) {{",
                  f"    let o0 = g * {_COLS}u + lid * {k}u;",
                  "    var w = 0u;",
                  f"    for (var l = 0u; l < {k}u; l = l + 1u) {{",
                  "        if (o0 + l < p.rows) {",
                  f"            w = w | ((u32(wv[lid * {k}u + l]) & {mask}) << (l * {od.bits}u));",
                  "        }",
                  "    }",
                  "    if (o0 < p.rows) {",
                  f"        out[o0 / {k}u] = w;",
                  "    }",
                  "}"]
        return "\n    ".join(lines)
    if op == "argmax":
        val = "m.i"
    elif not finish:
        val = "value(m)"
    else:
        val = f"{od.wgsl}({_final(op, acc, 'value(m)', 'p.total')})"
    lines += ["if (s == 0u && o < p.rows) {", f"    out[o] = {val};", "}"]
    return "\n    ".join(lines)


def render_reduce(xd: DType, od: DType, acc: str, mode: str, vec: bool, sub: bool, op: str,
                  merge: str, wg: int) -> str:
    if xd.packed:
        xt = "u32"
    else:
        xt = f"vec4<{xd.wgsl}>" if vec else xd.wgsl
    if mode == "full":
        ot = "atomic<u32>"
    elif mode in ("partial", "colpart"):
        ot = acc
    else:
        ot = "u32" if od.packed else od.wgsl
    scan = _scan(vec, False, acc, op)
    load4 = _load4(xd, acc, op in TRUTH) if vec else ""
    if op == "argmax" and mode == "full":
        body = _scan(vec, True)
        if acc == "f32":  # a nan maximum: the first nan (m is uniform: one branch)
            body = (f"if ({wgsl_is_nan('m', acc)}) {{\n        {_scan(vec, True, acc)}\n"
                    f"        return acc;\n    }}\n    {body}")
        load4 += ("\n\n// argmax phase 2: the first index whose element equals the maximum m\n"
                  f"fn scan_eq(m: {acc}, base: u32, count: u32, start: u32, stride: u32) -> VI {{\n"
                  f"    var acc = VI(p.ident, 0xffffffffu);\n"
                  f"    {body}\n    return acc;\n}}")
    if mode == "full":
        main = _main_argmax_full(acc, wg)
    elif mode == "partial":
        main = (f"let r = reduce_wg(lid, sid, scan(0u, p.n, g * {wg}u + lid, p.groups * {wg}u));"
                "\n    if (lid == 0u) {\n        out[p.first + g] = value(r);\n    }")
    elif mode == "finish":
        val = f"u32(r.v) & {(1 << od.bits) - 1}u" if od.packed else \
            f"{od.wgsl}({_final(op, acc, 'value(r)', 'p.total')})"
        main = (f"let r = reduce_wg(lid, sid, scan(0u, p.n, lid, {wg}u));\n"
                f"    if (lid == 0u) {{\n        out[0] = {val};\n    }}")
    elif mode in ("cols", "colpart"):
        assert wg == _COLS * _SLICES
        main = _main_cols(op, od, acc, mode == "cols")
    else:
        main = _main_rows(op, od, acc, wg)
    if not sub:
        main = "let sid = 0u;\n    " + main
    else:  # zero-initialized workgroup memory proved unreliable on lavapipe: set the counter
        main = ("if (lid == 0u) {\n        atomicStore(&wslot, 0u);\n    }\n"
                "    workgroupBarrier();\n    " + main)
    return shaders.render(shaders.load("reduce/reduce.wgsl"), {
        "ENABLE": shaders.enable_directives([xd.wgsl, od.wgsl]), "ACC": acc, "XT": xt,
        "OT": ot, "WG": wg, "MERGE": merge,
        "ELEM": _elem(xd, acc, vec and not xd.packed, op in TRUTH),
        "ELEMVI": _elem_vi(op, acc), "VALUE": _value(op, acc),
        "NONE": "0u" if _flagged(op, acc) else "0xffffffffu", "FNS": _fns(op, acc),
        "LOAD4": load4, "SCAN": scan, "WGREDUCE": _wgreduce(sub, op, wg, acc), "MAIN": main,
        "SGARG": ",\n        @builtin(subgroup_invocation_id) sid: u32" if sub else ""})
