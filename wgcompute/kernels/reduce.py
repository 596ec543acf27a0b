"""Reduction kernels sum, max, min, mean, argmax and softmax, over the last axis (axis=-1) or
over everything (axis=None); subgroup operations where the adapter has "subgroup".

Output shapes follow numpy: the last-axis reduction of (..., n) is (...), a full reduction
is 0-d (shape ()). Output dtypes: sum keeps the dtype (integers wrap around, like
``np.sum(x, dtype=x.dtype)``) except u8, which sums into u32; max and min keep the dtype;
mean is f32 for f32 and every integer dtype (accumulated in f32), f16 for f16 (accumulated
in f32), f64 for f64; argmax is u32 (first index of the maximum; NaN handling unspecified);
softmax (f32, f16; computed in f32) keeps shape and dtype. max, min, mean and argmax of an
empty axis are errors, as in numpy; the sum of an empty axis is 0."""

from __future__ import annotations

import math

from .. import shaders
from ..buffer import _ALIGN
from ..dtypes import DTYPES, DType
from ..errors import ArgumentError, DtypeError, ShapeError
from ..runtime import Device
from .base import BuiltinKernel, Kernel, Launch, Param, PipelineKey, fold_grid

ALL = ("f32", "f64", "f16", "s32", "s64", "u32", "u8")
_ACC = {"f32": "f32", "f16": "f32", "f64": "f64", "s32": "i32", "s64": "i64", "u32": "u32",
        "u8": "u32"}
_LOWEST = {"f32": float("-inf"), "f64": float("-inf"), "i32": -2**31, "i64": -2**63, "u32": 0}
_HIGHEST = {"f32": float("inf"), "f64": float("inf"), "i32": 2**31 - 1, "i64": 2**63 - 1,
            "u32": 2**32 - 1}
_VEC_OK = ("f32", "s32", "u32", "f16", "u8")  # inputs read four at a time
# Tests set this False to exercise the workgroup-memory path on adapters that have subgroups.
use_subgroups = True
_FULL_GROUPS = 512  # workgroups of a full argmax: enough to fill a GPU, few CAS rounds
_PARTIAL_GROUPS = 1024  # workgroups (partials) of the other full reductions: one wave on a GPU
_ACC_DTYPE = {"f32": "f32", "f64": "f64", "i32": "s32", "i64": "s64", "u32": "u32"}
_ARGMAX_MERGE = ("if (b.v > a.v || (b.v == a.v && b.i < a.i)) {\n        return b;\n    }\n"
                 "    return a;")


def _axis_doc() -> Param:
    return Param("axis", "axis", -1, "-1 (the last axis) or None (every element)")


def check_axis(name: str, axis, ndim: int):
    """Normalized axis: "last" or "all"."""
    if axis is None:
        return "all"
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ArgumentError(f"{name}: param 'axis' must be -1 (last axis) or None (all), got "
                            f"{type(axis).__name__} {axis!r}")
    if ndim == 0:
        if axis in (-1, 0):
            return "all"
    elif axis in (-1, ndim - 1):
        return "last" if ndim > 1 else "all"
    raise ArgumentError(f"{name}: param 'axis'={axis} is not supported for a {ndim}-D input; "
                        f"expected -1 (the last axis) or None (every element)")


def _binding_check(name: str, x, device: Device) -> None:
    limit = device.limit("max-storage-buffer-binding-size")
    if x.nbytes > limit:
        raise ShapeError(f"{name}: x {x.shape} is {x.nbytes} bytes; this adapter binds at "
                         f"most {limit} bytes per buffer")


class Reduce(BuiltinKernel):
    """sum / max / min / mean / argmax over the last axis or everything."""

    inputs = ("x",)
    workgroup_size = 256
    not_in_place = "a reduction combines many elements of x into each output element"

    def __init__(self, op: str, description: str):
        self.name = op
        self.op = op
        self.params = (_axis_doc(),)
        self.description = description
        self.dtypes = tuple(sorted({self.out_dtype(d) for d in ALL}, key=list(DTYPES).index))

    def out_dtype(self, dt: str) -> str:
        if self.op == "argmax":
            return "u32"
        if self.op == "sum" and dt == "u8":
            return "u32"
        if self.op == "mean":
            return dt if dt in ("f64", "f16") else "f32"
        return dt

    def acc(self, dt: str) -> str:
        if self.op == "mean":
            return "f64" if dt == "f64" else "f32"
        return _ACC[dt]

    def identity(self, acc: str):
        if self.op in ("max", "argmax"):
            return _LOWEST[acc]
        if self.op == "min":
            return _HIGHEST[acc]
        return 0.0 if acc.startswith("f") else 0

    # -- boundary ----------------------------------------------------------------------------------
    def output_spec(self, inputs, params):
        (x,) = inputs
        axis = (params or {}).get("axis", -1)
        how = check_axis(self.name, axis, x.ndim)
        shape = () if how == "all" else x.shape[:-1]
        return shape, self.out_dtype(x.dtype)

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if x.dtype not in ALL:
            raise DtypeError(f"{self.name}: x is {x.dtype}; expected one of {', '.join(ALL)}")
        shape, dt = self.output_spec(inputs, params)
        if output.dtype != dt:
            raise DtypeError(f"{self.name}: out is {output.dtype}; {self.name} of {x.dtype} "
                             f"gives {dt}")
        if output.shape != shape:
            raise ShapeError(f"{self.name}: out is {output.shape}, expected {shape} for x "
                             f"{x.shape} with axis={params.get('axis')!r}")
        n = x.size if check_axis(self.name, params.get("axis"), x.ndim) == "all" else x.shape[-1]
        if n == 0 and self.op != "sum" and (x.size or not shape):
            raise ShapeError(f"{self.name}: x {x.shape} has no elements along the reduced "
                             f"axis; {self.name} of nothing is undefined")
        _binding_check(self.name, x, x.device)

    # -- plan --------------------------------------------------------------------------------------
    def _plan(self, x, params, device: Device):
        """(mode, rows, n, vec, subgroup): how this input is reduced."""
        how = check_axis(self.name, params.get("axis", -1), x.ndim)
        rows, n = (1, x.size) if how == "all" else (x.size // max(x.shape[-1], 1), x.shape[-1])
        if how == "last" and x.shape[-1] == 0:
            rows = math.prod(x.shape[:-1])
        acc = self.acc(x.dtype)
        wide = acc in ("f64", "i64")
        # "full": argmax over everything; the other full reductions go through passes()
        mode = "full" if how == "all" and not wide and self.op == "argmax" else "rows"
        vec = x.dtype in _VEC_OK and (mode == "full" or rows == 1 or n % 4 == 0)
        sub = use_subgroups and device.has("subgroup") and not wide
        return mode, rows, n, vec, sub

    def passes(self, inputs, output, params):
        """Over everything (except argmax): each workgroup's partial into a temporary, then
        one workgroup combines them. Partials by atomics on one word cost sum 3× torch's time
        on an H200: every workgroup's compare-and-swap retried against all the others."""
        (x,) = inputs
        if self.op == "argmax" or check_axis(self.name, params.get("axis", -1),
                                             x.ndim) != "all":
            return None
        acc = self.acc(x.dtype)
        items = -(-x.size // 4) if x.dtype in _VEC_OK else x.size
        groups = max(1, min(_PARTIAL_GROUPS, -(-items // (self.workgroup_size * 8))))
        step = _steps(self)
        return [((groups,), _ACC_DTYPE[acc])], [
            (step["partial"], ["in0"], "tmp0", {"total": x.size}),
            (step["finish"], ["tmp0"], "out", {"total": x.size})]

    def key(self, inputs, output, params) -> PipelineKey:
        (x,) = inputs
        mode, _, _, vec, sub = self._plan(x, params, x.device)
        return PipelineKey(self.name, (x.dtype, output.dtype),
                           (("mode", mode), ("vec", vec), ("subgroup", sub)))

    def render(self, key: PipelineKey):
        xd, od = key.dtypes
        c = dict(key.constants)
        acc = self.acc(xd)
        merge = _ARGMAX_MERGE if self.op == "argmax" else {
            "sum": "return VI(a.v + b.v, 0u);", "mean": "return VI(a.v + b.v, 0u);",
            "max": "return VI(max(a.v, b.v), 0u);", "min": "return VI(min(a.v, b.v), 0u);",
        }[self.op]
        return render_reduce(DTYPES[xd], DTYPES[od], acc, c["mode"], c["vec"], c["subgroup"],
                             self.op, merge, self.workgroup_size), _uniform_fields(acc)

    def launches(self, inputs, output, params, device):
        (x,) = inputs
        mode, rows, n, vec, _ = self._plan(x, params, device)
        u = {"rows": rows, "n": n, "phase": 0, "groups": 1, "total": n,
             "ident": self.identity(self.acc(x.dtype))}
        if mode == "rows":
            if rows == 0:
                return []
            rpw = 4 if output.dtype == "u8" else 1
            return [Launch(fold_grid(-(-rows // rpw), device, self.name), u)]
        items = -(-n // 4) if vec else n
        groups = max(1, min(_FULL_GROUPS, -(-items // (self.workgroup_size * 8))))
        grid = fold_grid(groups, device, self.name)
        phases = [(0, (1, 1, 1)), (1, grid)] + ([(2, grid)] if self.op == "argmax" else []) \
            + [(3, (1, 1, 1))]
        return [Launch(wg, dict(u, phase=ph, groups=grid[0] * grid[1])) for ph, wg in phases]


def _uniform_fields(acc: str):
    return (("rows", "u32"), ("n", "u32"), ("phase", "u32"), ("groups", "u32"),
            ("total", "u32"), ("ident", acc))


class ReduceStep(BuiltinKernel):
    """One step of a full reduction, bound by Reduce.passes: "partial" (workgroup g's
    grid-stride partial of x into tmp[g]) or "finish" (one workgroup merges tmp into out).
    Not in the registry; the parent kernel checked the buffers."""

    inputs = ("x",)
    workgroup_size = 256

    def __init__(self, parent: Reduce, step: str):
        self.parent = parent
        self.step = step
        self.name = f"{parent.op}.{step}"
        self.dtypes = ALL
        self.params = (Param("total", "u32", 0, "elements of the whole reduction"),)
        self.description = f"{step} step of {parent.op} over every element"

    def key(self, inputs, output, params) -> PipelineKey:
        (x,) = inputs
        wide = self.parent.acc(x.dtype) in ("f64", "i64")
        sub = use_subgroups and x.device.has("subgroup") and not wide
        return PipelineKey(self.name, (x.dtype, output.dtype),
                           (("mode", self.step), ("vec", x.dtype in _VEC_OK), ("subgroup", sub)))

    def render(self, key: PipelineKey):
        return self.parent.render(key)

    def launches(self, inputs, output, params, device):
        (x,) = inputs
        groups = output.shape[0] if self.step == "partial" else 1
        u = {"rows": 1, "n": x.size, "phase": 0, "groups": groups, "total": params["total"],
             "ident": self.parent.identity(self.parent.acc(x.dtype))}
        return [Launch(fold_grid(groups, device, self.name), u)]


_STEPS: dict[str, dict[str, ReduceStep]] = {}


def _steps(parent: Reduce) -> dict[str, ReduceStep]:
    """The parent's two step kernels, made once (their names key the pipeline cache)."""
    s = _STEPS.get(parent.op)
    if s is None:
        s = _STEPS[parent.op] = {k: ReduceStep(parent, k) for k in ("partial", "finish")}
    return s


def _elem(xd: DType, acc: str, vec: bool) -> str:
    if xd.packed:
        return f"return {acc}((x[i / 4u] >> ((i % 4u) * 8u)) & 0xffu);"
    if vec:
        return f"return {acc}(x[i / 4u][i % 4u]);"
    return f"return {acc}(x[i]);"


def _load4(xd: DType, acc: str) -> str:
    if xd.packed:
        body = (f"let w = x[q];\n    return vec4<{acc}>(vec4<u32>(w & 0xffu, (w >> 8u) & 0xffu, "
                "(w >> 16u) & 0xffu, w >> 24u));")
    else:
        body = f"return vec4<{acc}>(x[q]);"
    return f"fn load4(q: u32) -> vec4<{acc}> {{\n    {body}\n}}"


def _scan(vec: bool, only_equal: bool) -> str:
    """Loop body of scan(): every element, or (argmax phase 2) those equal to the max m."""
    def take(val: str, idx: str) -> str:
        if only_equal:
            return f"if ({val} == m) {{ acc = merge(acc, VI(m, {idx})); }}"
        return f"acc = merge(acc, VI({val}, {idx}));"

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


def _wgreduce(sub: bool, op: str, wg: int) -> str:
    tail = ("let r = VI(wv[0], wi[0]);\n    workgroupBarrier();  // wv is reused by the next row\n"
            "    return r;")
    if not sub:
        return (f"wv[lid] = mine.v;\n    wi[lid] = mine.i;\n    workgroupBarrier();\n"
                f"    for (var s = {wg // 2}u; s > 0u; s = s >> 1u) {{\n"
                "        if (lid < s) {\n"
                "            let r = merge(VI(wv[lid], wi[lid]), VI(wv[lid + s], wi[lid + s]));\n"
                "            wv[lid] = r.v;\n            wi[lid] = r.i;\n        }\n"
                "        workgroupBarrier();\n    }\n    " + tail)
    if op == "argmax":
        first = ("let m = subgroupMax(mine.v);\n"
                 "    let s = VI(m, subgroupMin(select(0xffffffffu, mine.i, mine.v == m)));")
    else:
        fn = {"sum": "subgroupAdd", "mean": "subgroupAdd", "max": "subgroupMax",
              "min": "subgroupMin"}[op]
        first = f"let s = VI({fn}(mine.v), 0u);"
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
    rpw = 4 if od.packed else 1
    lines = []
    for r in range(rpw):
        lines += [f"let row{r} = g * {rpw}u + {r}u;",
                  f"    var mine{r} = VI(p.ident, 0xffffffffu);",
                  f"    if (row{r} < p.rows) {{",
                  f"        mine{r} = scan(row{r} * p.n, p.n, lid, {wg}u);",
                  "    }",
                  f"    let r{r} = reduce_wg(lid, sid, mine{r});"]
    lines.append("if (lid == 0u) {")
    if od.packed:  # four rows' u8 results share one u32 word
        word = " | ".join(f"(select(0u, r{r}.v & 0xffu, row{r} < p.rows) << {8 * r}u)"
                          for r in range(rpw))
        lines.append(f"        if (row0 < p.rows) {{ out[g] = {word}; }}")
    else:
        val = "r0.i" if op == "argmax" else f"{od.wgsl}({_final(op, acc, 'r0.v')})"
        lines.append(f"        if (row0 < p.rows) {{ out[row0] = {val}; }}")
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
            "        if (lid == 0u) {\n            atomicMin(&out[2], r.i);\n        }\n"
            "    }")


def render_reduce(xd: DType, od: DType, acc: str, mode: str, vec: bool, sub: bool, op: str,
                  merge: str, wg: int) -> str:
    if xd.packed:
        xt = "u32"
    else:
        xt = f"vec4<{xd.wgsl}>" if vec else xd.wgsl
    if mode == "full":
        ot = "atomic<u32>"
    elif mode == "partial":
        ot = acc
    else:
        ot = "u32" if od.packed else od.wgsl
    scan = _scan(vec, False)
    load4 = _load4(xd, acc) if vec else ""
    if op == "argmax" and mode == "full":
        load4 += ("\n\n// argmax phase 2: the first index whose element equals the maximum m\n"
                  f"fn scan_eq(m: {acc}, base: u32, count: u32, start: u32, stride: u32) -> VI {{\n"
                  "    var acc = VI(p.ident, 0xffffffffu);\n"
                  f"    {_scan(vec, True)}\n    return acc;\n}}")
    if mode == "full":
        main = _main_argmax_full(acc, wg)
    elif mode == "partial":
        main = (f"let r = reduce_wg(lid, sid, scan(0u, p.n, g * {wg}u + lid, p.groups * {wg}u));"
                "\n    if (lid == 0u) {\n        out[g] = r.v;\n    }")
    elif mode == "finish":
        val = "r.v & 0xffu" if od.packed else f"{od.wgsl}({_final(op, acc, 'r.v', 'p.total')})"
        main = (f"let r = reduce_wg(lid, sid, scan(0u, p.n, lid, {wg}u));\n"
                f"    if (lid == 0u) {{\n        out[0] = {val};\n    }}")
    else:
        main = _main_rows(op, od, acc, wg)
    if not sub:
        main = "let sid = 0u;\n    " + main
    else:  # zero-initialized workgroup memory proved unreliable on lavapipe: set the counter
        main = ("if (lid == 0u) {\n        atomicStore(&wslot, 0u);\n    }\n"
                "    workgroupBarrier();\n    " + main)
    return shaders.render(shaders.load("reduce.wgsl"), {
        "ENABLE": shaders.enable_directives([xd.wgsl, od.wgsl]), "ACC": acc, "XT": xt,
        "OT": ot, "WG": wg, "MERGE": merge, "ELEM": _elem(xd, acc, vec and not xd.packed),
        "LOAD4": load4, "SCAN": scan, "WGREDUCE": _wgreduce(sub, op, wg), "MAIN": main,
        "SGARG": ",\n        @builtin(subgroup_invocation_id) sid: u32" if sub else ""})


class Softmax(BuiltinKernel):
    """softmax over the last axis (or every element): exp(x - max) / sum(exp(x - max))."""

    name = "softmax"
    not_in_place = "softmax reads its whole row for each output element"
    inputs = ("x",)
    dtypes = ("f32", "f16")
    workgroup_size = 256
    description = "exp(x - max) / sum(exp(x - max)) along the last axis (axis=-1) or all (None)"

    def __init__(self):
        self.params = (_axis_doc(),)

    def output_spec(self, inputs, params):
        (x,) = inputs
        check_axis(self.name, (params or {}).get("axis", -1), x.ndim)
        return x.shape, x.dtype

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        check_axis(self.name, params.get("axis"), x.ndim)
        if x.dtype != output.dtype:
            raise DtypeError(f"softmax: x is {x.dtype} and out is {output.dtype}; dtypes must "
                             f"match")
        if x.shape != output.shape:
            raise ShapeError(f"softmax: x is {x.shape} and out is {output.shape}; shapes must "
                             f"match")
        _binding_check(self.name, x, x.device)

    def key(self, inputs, output, params) -> PipelineKey:
        (x,) = inputs
        how = check_axis(self.name, params.get("axis", -1), x.ndim)
        # whole vec4 rows (or one row, whose ragged end is masked): vector loads and stores
        vec = how == "all" or x.shape[-1] % 4 == 0
        return PipelineKey(self.name, (output.dtype,),
                           (("subgroup", use_subgroups and x.device.has("subgroup")),
                            ("vec", vec)))

    def render(self, key: PipelineKey):
        t = DTYPES[key.dtypes[0]].wgsl
        sub = dict(key.constants)["subgroup"]
        if sub:
            combine = ("let sm = subgroupMax(mine.x);\n"
                       "    let ss = subgroupAdd(scaled(mine.y, mine.x, sm));\n"
                       "    if (sid == 0u) {\n        let slot = atomicAdd(&wslot, 1u);\n"
                       "        wm[slot] = sm;\n        ws[slot] = ss;\n    }\n"
                       "    workgroupBarrier();\n"
                       "    if (lid == 0u) {\n        let count = atomicLoad(&wslot);\n"
                       "        var mm = wm[0];\n        var ss = ws[0];\n"
                       "        for (var k = 1u; k < count; k = k + 1u) {\n"
                       "            let nm = max(mm, wm[k]);\n"
                       "            ss = scaled(ss, mm, nm) + scaled(ws[k], wm[k], nm);\n"
                       "            mm = nm;\n        }\n"
                       "        wm[0] = mm;\n        ws[0] = ss;\n"
                       "        atomicStore(&wslot, 0u);\n    }\n    workgroupBarrier();")
        else:
            combine = ("wm[lid] = mine.x;\n    ws[lid] = mine.y;\n    workgroupBarrier();\n"
                       f"    for (var h = {self.workgroup_size // 2}u; h > 0u; h = h >> 1u) {{\n"
                       "        if (lid < h) {\n"
                       "            let nm = max(wm[lid], wm[lid + h]);\n"
                       "            ws[lid] = scaled(ws[lid], wm[lid], nm) + "
                       "scaled(ws[lid + h], wm[lid + h], nm);\n"
                       "            wm[lid] = nm;\n        }\n        workgroupBarrier();\n    }")
        wg = self.workgroup_size
        if dict(key.constants)["vec"]:
            xt = f"vec4<{t}>"
            loop = ("let b4 = base / 4u;\n"
                    f"        for (var q = lid; q * 4u < p.n; q = q + {wg}u) {{\n")
            pass1 = (loop + "            let v = vec4<f32>(x[b4 + q]);\n"
                     "            ms = online(ms, v.x);\n"
                     "            if (q * 4u + 1u < p.n) { ms = online(ms, v.y); }\n"
                     "            if (q * 4u + 2u < p.n) { ms = online(ms, v.z); }\n"
                     "            if (q * 4u + 3u < p.n) { ms = online(ms, v.w); }\n        }")
            # the ragged end's padding lanes are written too: buffers are 16-byte multiples
            pass2 = (loop + f"            out[b4 + q] = vec4<{t}>("
                     "exp(vec4<f32>(x[b4 + q]) - row_max) / row_sum);\n        }")
        else:
            xt = t
            pass1 = (f"for (var i = lid; i < p.n; i = i + {wg}u) {{\n"
                     "            ms = online(ms, f32(x[base + i]));\n        }")
            pass2 = (f"for (var i = lid; i < p.n; i = i + {wg}u) {{\n"
                     f"            out[base + i] = {t}(exp(f32(x[base + i]) - row_max) / row_sum);"
                     "\n        }")
        src = shaders.render(shaders.load("softmax.wgsl"), {
            "ENABLE": shaders.enable_directives([t]), "T": t, "WG": self.workgroup_size,
            "XT": xt, "PASS1": pass1, "PASS2": pass2,
            "COMBINE": combine,
            "SGARG": ",\n        @builtin(subgroup_invocation_id) sid: u32" if sub else "",
            # the slot counter is set explicitly: zero-initialized workgroup memory proved
            # unreliable on lavapipe
            "SID": ("if (lid == 0u) {\n        atomicStore(&wslot, 0u);\n    }\n"
                    "    workgroupBarrier();") if sub else "let sid = 0u;"})
        return src, (("rows", "u32"), ("n", "u32"))

    def launches(self, inputs, output, params, device):
        (x,) = inputs
        how = check_axis(self.name, params.get("axis", -1), x.ndim)
        if x.size == 0:
            return []
        rows, n = (1, x.size) if how == "all" else (x.size // x.shape[-1], x.shape[-1])
        return [Launch(fold_grid(rows, device, self.name), {"rows": rows, "n": n})]


def reduce_kernels() -> list[Kernel]:
    return [
        Reduce("sum", "sum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("max", "maximum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("min", "minimum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("mean", "mean over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("argmax", "index (u32) of the first maximum along the last axis or overall"),
        Softmax(),
    ]


assert _ALIGN >= 16, "full reductions keep partials in the output's padding words 1 and 2"
