"""Reduction kernels sum, prod, max, min, mean, argmax, any, all (over any axis, any tuple of
axes, or everything; keepdims) and softmax (last axis or everything); subgroups where the
adapter has them.

Output shapes follow numpy: the reduced axes go (or stay as 1 with ``keepdims``); a full
reduction is 0-d (shape ()). Output dtypes: sum and prod keep the dtype (integers wrap around,
like ``np.sum(x, dtype=x.dtype)``) except u8 and bool, which sum (multiply) into u32; max and
min keep the dtype; mean is f32 for f32 and every integer dtype (accumulated in f32), f16 for
f16 (accumulated in f32), f64 for f64; argmax is u32 (first index of the maximum); any and
all give bool (whether any, every, element is not zero: a nan is not); softmax (f32, f16;
computed in f32) keeps shape and dtype. As in numpy, max, min and argmax of an empty axis are
errors, a sum over one is 0, a prod 1, a mean nan, any False and all True; a nan makes max,
min, sum and mean nan, argmax gives the first nan, and softmax's whole row is nan.

How (``reduce_plan``): reduced axes that are the last ones run as rows (one workgroup per
output); one block of reduced axes with kept axes after it runs as columns (64 outputs per
workgroup, four slices of the reduced axis each; split in two steps when the outputs are too
few to fill a GPU); reduced axes in several blocks are first gathered behind the kept ones by
a strided copy, then run as rows. An x larger than the adapter binds at once runs in launches
over windows of it (everything: 1024-element multiples; rows: whole rows); columns refuse.

The axes and the plan are in axes.py, the WGSL of the programs in wgsl.py, beside this module."""

from __future__ import annotations

from ...buffer import _ALIGN
from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ...runtime import Device
from ..core import shaders
from ..core.base import (
    BuiltinKernel,
    Kernel,
    Launch,
    Param,
    PipelineKey,
    check_flag,
    fold_grid,
)
from ..core.layout import contiguous_strides
from .axes import (
    ReducePlan,
    _axis_doc,
    _keepdims_doc,
    check_axis,
    reduce_plan,
)
from .wgsl import (
    _ACC,
    _ACC_DTYPE,
    _COLS,
    _FULL_GROUPS,
    _HIGHEST,
    _LOWEST,
    _PARTIAL_GROUPS,
    _VEC_OK,
    ALL,
    TRUTH,
    _merge,
    render_reduce,
)

# Tests set this False to exercise the workgroup-memory path on adapters that have subgroups.
use_subgroups = True


def _binding_check(name: str, x, device: Device, row: int | None = None) -> None:
    """x binds whole, or its work splits into launches over windows of it (everything:
    windows of 1024-element multiples; rows: whole rows, ``row`` elements each, of which one
    and an alignment's worth must fit)."""
    limit = device.limit("max-storage-buffer-binding-size")
    if x.nbytes <= limit:
        return
    if row is None:
        why = "and this reduction binds it whole: columns (axes before the last kept one) " \
              "and softmax do not split into windows"
    elif row == 0:
        return
    else:
        need = row * DTYPES[x.dtype].itemsize + _ALIGN_MAX
        if need <= limit:
            return
        why = (f"it splits into windows of whole rows, and one row of {row} elements (plus "
               f"{_ALIGN_MAX} bytes of alignment) is {need} bytes")
    raise ShapeError(f"{name}: x {x.shape} {x.dtype} is {x.nbytes} bytes, more than this "
                     f"adapter binds at once ({limit}, max-storage-buffer-binding-size), "
                     f"{why}")


# the largest min-storage-buffer-offset-alignment WebGPU allows: windows start on it
_ALIGN_MAX = 256


def _windows(size: int, dtype: str, device: Device) -> list[tuple[int, int]]:
    """(first element, elements) of each launch's window of an x of ``size`` elements: all of
    it where it binds whole, else windows of a multiple of 1024 elements (whole u8 words,
    offsets on any alignment), as the elementwise kernels split their work."""
    item = DTYPES[dtype].itemsize
    limit = device.limit("max-storage-buffer-binding-size")
    if size * item <= limit:
        return [(0, size)]
    chunk = max(1024, (limit // item) // 1024 * 1024)
    return [(s, min(chunk, size - s)) for s in range(0, size, chunk)]


def _window_range(first: int, count: int, dtype: str) -> tuple[int, int]:
    """The bytes bound for elements first.. (+ count): to a 16-byte multiple (vec4 loads;
    buffers are allocated in 16-byte granules)."""
    item = DTYPES[dtype].itemsize
    return first * item, -(-count * item // _ALIGN) * _ALIGN


def _whole(b) -> tuple[int, int]:
    """The range binding all of buffer (or Meta) ``b``."""
    return 0, max(_ALIGN, -(-b.size * DTYPES[b.dtype].itemsize // _ALIGN) * _ALIGN)


def _uniform(rows: int, n: int, ident, *, phase: int = 0, groups: int = 1, total=None,
             inner: int = 1, parts: int = 1, chunk=None, xoff: int = 0, first: int = 0) -> dict:
    return {"rows": rows, "n": n, "phase": phase, "groups": groups,
            "total": n if total is None else total, "inner": inner, "parts": parts,
            "chunk": n if chunk is None else chunk, "xoff": xoff, "first": first,
            "ident": ident}


class Reduce(BuiltinKernel):
    """sum / max / min / mean / argmax over any axes (see reduce_plan)."""

    inputs = ("x",)
    workgroup_size = 256
    not_in_place = "a reduction combines many elements of x into each output element"

    def __init__(self, op: str, description: str):
        self.name = op
        self.op = op
        self.params = (_axis_doc(), _keepdims_doc())
        self.description = description
        self.dtypes = tuple(sorted({self.out_dtype(d) for d in ALL}, key=list(DTYPES).index))

    def out_dtype(self, dt: str) -> str:
        if self.op == "argmax":
            return "u32"
        if self.op in TRUTH:
            return "bool"
        if self.op in ("sum", "prod") and DTYPES[dt].packed:  # bool and the 1- and 2-byte
            return "s32" if DTYPES[dt].kind == "i" else "u32"  # integers: in 32 bits
        if self.op == "mean":
            return dt if dt in ("f64", "f16") else "f32"
        return dt

    def acc(self, dt: str) -> str:
        if self.op in TRUTH:
            return "u32"
        if self.op == "mean":
            return "f64" if dt == "f64" else "f32"
        return _ACC[dt]

    def identity(self, acc: str):
        if self.op in ("max", "argmax"):
            return _LOWEST[acc]
        if self.op == "min":
            return _HIGHEST[acc]
        if self.op == "prod":
            return 1.0 if acc.startswith("f") else 1
        if self.op == "all":
            return 1
        return 0.0 if acc.startswith("f") else 0

    def plan(self, x, params) -> ReducePlan:
        params = params or {}
        keepdims = check_flag(self.name, "keepdims", params.get("keepdims", False))
        return reduce_plan(self.name, tuple(x.shape), _hashable(params.get("axis", -1)),
                           keepdims, self.op == "argmax")

    # -- boundary -----------------------------------------------------------------------------
    def output_spec(self, inputs, params):
        (x,) = inputs
        return self.plan(x, params).out_shape, self.out_dtype(x.dtype)

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if x.dtype not in ALL:
            raise DtypeError(f"{self.name}: x is {x.dtype}; expected one of {', '.join(ALL)}")
        plan = self.plan(x, params)
        dt = self.out_dtype(x.dtype)
        if output.dtype != dt:
            raise DtypeError(f"{self.name}: out is {output.dtype}; {self.name} of {x.dtype} "
                             f"gives {dt}")
        if output.shape != plan.out_shape:
            raise ShapeError(f"{self.name}: out is {output.shape}, expected {plan.out_shape} "
                             f"for x {x.shape} with axis={params.get('axis')!r}"
                             + (", keepdims=True" if params.get("keepdims") else ""))
        if plan.how == "empty" and self.op in ("max", "min", "argmax"):
            raise ShapeError(f"{self.name}: x {x.shape} has no elements along axis="
                             f"{params.get('axis')!r}; the {self.name} of nothing is "
                             f"undefined (numpy raises too)")
        if plan.how in ("rows", "gather"):
            row = plan.n
        elif plan.how == "all":  # in windows, but a 64-bit argmax is one row
            full = self.op != "argmax" or self._mode(x, params, x.device)[0] == "full"
            row = 0 if full else plan.n
        else:
            row = None
        _binding_check(self.name, x, x.device, row)

    # -- plan ---------------------------------------------------------------------------------
    def _mode(self, x, params, device: Device):
        """(mode, plan, vec, subgroup) of a one-pass reduction."""
        plan = self.plan(x, params)
        wide = self.acc(x.dtype) in ("f64", "i64", "u64")
        mode = plan.how
        if mode == "all":  # argmax (the others go through passes()); 64-bit: one row
            mode = "rows" if wide else "full"
        vec = x.dtype in _VEC_OK and (mode == "full" or (
            mode == "rows" and (plan.rows == 1 or plan.n % 4 == 0)))
        sub = use_subgroups and device.has("subgroup") and not wide and mode != "cols"
        return mode, plan, vec, sub

    def passes(self, inputs, output, params):
        """Everything but argmax: each workgroup's partial into a temporary, then one
        workgroup combines them (partials by atomics on one word cost sum 3x torch's time on
        an H200: every workgroup's compare-and-swap retried against all the others). Columns
        too few to fill the GPU: the reduced axis split in parts, then the parts reduced.
        Reduced axes in several blocks: a strided copy puts them last, then rows. Nothing
        to reduce: the output filled with 0 (sum) or nan (mean)."""
        from ..core.registry import get as kernel

        (x,) = inputs
        plan = self.plan(x, params)
        acc = self.acc(x.dtype)
        step = _steps(self)
        if plan.how == "empty":
            if not output.size:
                return [], []
            return [], [(kernel("fill"), [], "out",
                         {"value": {"mean": float("nan"), "prod": 1, "all": 1}.get(self.op,
                                                                                 0)})]
        if plan.how == "all" and self.op != "argmax":
            items = -(-x.size // 4) if x.dtype in _VEC_OK else x.size
            groups = max(1, min(_PARTIAL_GROUPS, -(-items // (self.workgroup_size * 8))))
            windows = len(_windows(x.size, x.dtype, x.device))  # groups partials each
            return [((groups * windows,), _ACC_DTYPE[acc])], [
                (step["partial"], ["in0"], "tmp0", {"total": x.size}),
                (step["finish"], ["tmp0"], "out", {"total": x.size})]
        if plan.how == "gather":
            shape = tuple(x.shape[d] for d in plan.perm)
            strides = contiguous_strides(tuple(x.shape))
            return [(shape, x.dtype)], [
                (kernel("strided_copy"), ["in0"], "tmp0",
                 {"strides": tuple(strides[d] for d in plan.perm), "offset": 0}),
                (step["rows"], ["tmp0"], "out", {"rows": plan.rows, "n": plan.n})]
        if plan.how == "cols" and plan.parts > 1:
            chunk = -(-plan.n // plan.parts)
            parts = -(-plan.n // chunk)
            shape = {"outer": plan.rows, "inner": plan.inner}
            return [((plan.rows * parts * plan.inner,), _ACC_DTYPE[acc])], [
                (step["colpart"], ["in0"], "tmp0",
                 dict(shape, n=plan.n, parts=parts, chunk=chunk, total=plan.n)),
                (step["cols"], ["tmp0"], "out",
                 dict(shape, n=parts, parts=1, chunk=parts, total=plan.n))]
        return None

    def key(self, inputs, output, params) -> PipelineKey:
        (x,) = inputs
        mode, _, vec, sub = self._mode(x, params, x.device)
        return PipelineKey(self.name, (x.dtype, output.dtype),
                           (("mode", mode), ("vec", vec), ("subgroup", sub)))

    def render(self, key: PipelineKey):
        xd, od = key.dtypes
        c = dict(key.constants)
        acc = self.acc(xd)
        return render_reduce(DTYPES[xd], DTYPES[od], acc, c["mode"], c["vec"], c["subgroup"],
                             self.op, _merge(self.op, acc), self.workgroup_size), \
            _uniform_fields(acc)

    def launches(self, inputs, output, params, device):
        (x,) = inputs
        mode, plan, vec, _ = self._mode(x, params, device)
        ident = self.identity(self.acc(x.dtype))
        if mode == "none":
            return []
        if mode == "rows":
            return _rows_launches(self.name, plan.rows, plan.n, ident, x, output, device)
        if mode == "cols":
            return _cols_launches(self.name, plan.rows, plan.n, plan.inner, 1, plan.n,
                                  plan.n, ident, device)
        # full (argmax): phases 1 and 2 once per window of x, indices offset by its first
        windows = _windows(plan.n, x.dtype, device)
        split = len(windows) > 1
        items = -(-windows[0][1] // 4) if vec else windows[0][1]
        groups = max(1, min(_FULL_GROUPS, -(-items // (self.workgroup_size * 8))))
        grid = fold_grid(groups, device, self.name)
        u = _uniform(1, plan.n, ident, groups=grid[0] * grid[1])
        out = []
        for ph, wg in [(0, (1, 1, 1)), (1, grid)] + ([(2, grid)] if self.op == "argmax" else
                                                     []) + [(3, (1, 1, 1))]:
            for first, count in windows if ph in (1, 2) else windows[:1]:
                ranges = (_window_range(first, count, x.dtype), _whole(output)) if split \
                    else None
                out.append(Launch(wg, dict(u, phase=ph, n=count, first=first), ranges))
        return out


def _hashable(axis):
    if isinstance(axis, list):
        raise ArgumentError(f"param 'axis' must be an int, a tuple of ints or None, got list "
                            f"{axis!r}")
    try:
        hash(axis)
    except TypeError:
        raise ArgumentError(f"param 'axis' must be an int, a tuple of ints or None, got "
                            f"{type(axis).__name__}") from None
    return axis


def _rows_launches(name, rows, n, ident, x, output, device) -> list[Launch]:
    """One launch, or (x past the binding limit) one per window of whole rows, each bound
    from an aligned element before its first row (xoff elements in), writing its rows'
    outputs from row ``first`` on."""
    if rows == 0:
        return []
    rpw = DTYPES[output.dtype].lanes  # packed results: several rows' share a word
    item = DTYPES[x.dtype].itemsize
    limit = device.limit("max-storage-buffer-binding-size")
    if rows * n * item <= limit:
        return [Launch(fold_grid(-(-rows // rpw), device, name), _uniform(rows, n, ident))]
    align = _ALIGN_MAX // item
    per = (limit // item - align) // max(n, 1) // rpw * rpw  # Reduce.check: at least one
    out = []
    for r0 in range(0, rows, per):
        r1 = min(rows, r0 + per)
        a0 = r0 * n // align * align
        ranges = (_window_range(a0, r1 * n - a0, x.dtype), _whole(output))
        out.append(Launch(fold_grid(-(-(r1 - r0) // rpw), device, name),
                          _uniform(r1 - r0, n, ident, xoff=r0 * n - a0, first=r0), ranges))
    return out


def _cols_launches(name, outer, n, inner, parts, chunk, total, ident, device) -> list[Launch]:
    outputs = outer * parts * inner
    if outputs == 0:
        return []
    return [Launch(fold_grid(-(-outputs // _COLS), device, name),
                   _uniform(outputs, n, ident, total=total, inner=inner, parts=parts,
                            chunk=chunk))]


def _uniform_fields(acc: str):
    return (("rows", "u32"), ("n", "u32"), ("phase", "u32"), ("groups", "u32"), ("xoff", "u32"),
            ("first", "u32"),
            ("total", "u32"), ("inner", "u32"), ("parts", "u32"), ("chunk", "u32"),
            ("ident", acc))


class ReduceStep(BuiltinKernel):
    """One step of a multi-step reduction, bound by Reduce.passes: "partial" (workgroup g's
    grid-stride partial of x into tmp[g]), "finish" (one workgroup merges tmp into out),
    "rows" (rows × n of a gathered copy), "colpart" (column partials over parts of the
    reduced axis, unfinished: no mean division) and "cols" (columns, finished). Not in the
    registry; the parent kernel checked the buffers."""

    inputs = ("x",)
    workgroup_size = 256

    def __init__(self, parent: Reduce, step: str):
        self.parent = parent
        self.step = step
        self.name = f"{parent.op}.{step}"
        self.dtypes = ALL
        self.params = tuple(Param(n, "u32", 0) for n in ("total", "rows", "n", "outer",
                                                         "inner", "parts", "chunk"))
        self.description = f"{step} step of {parent.op}"

    def _vec(self, x, params) -> bool:
        if self.step in ("partial", "finish"):
            return x.dtype in _VEC_OK
        return self.step == "rows" and x.dtype in _VEC_OK and params["n"] % 4 == 0

    def key(self, inputs, output, params) -> PipelineKey:
        (x,) = inputs
        wide = self.parent.acc(x.dtype) in ("f64", "i64", "u64")
        sub = (use_subgroups and x.device.has("subgroup") and not wide
               and self.step not in ("cols", "colpart"))
        return PipelineKey(self.name, (x.dtype, output.dtype),
                           (("mode", self.step), ("vec", self._vec(x, params)),
                            ("subgroup", sub)))

    def render(self, key: PipelineKey):
        return self.parent.render(key)

    def launches(self, inputs, output, params, device):
        (x,) = inputs
        ident = self.parent.identity(self.parent.acc(x.dtype))
        if self.step == "rows":
            return _rows_launches(self.name, params["rows"], params["n"], ident, x, output,
                                  device)
        if self.step in ("cols", "colpart"):
            return _cols_launches(self.name, params["outer"], params["n"], params["inner"],
                                  params["parts"], params["chunk"], params["total"], ident,
                                  device)
        if self.step == "finish":
            u = _uniform(1, x.size, ident, total=params["total"])
            return [Launch((1, 1, 1), u)]
        # partial: each window of x (one unless x is past the binding limit) into its own
        # groups of partials, from slot ``first`` on
        windows = _windows(x.size, x.dtype, device)
        groups = output.shape[0] // len(windows)
        grid = fold_grid(groups, device, self.name)
        out = []
        for k, (first, count) in enumerate(windows):
            ranges = (_window_range(first, count, x.dtype), _whole(output)) \
                if len(windows) > 1 else None
            out.append(Launch(grid, _uniform(1, count, ident, groups=groups,
                                             total=params["total"], first=k * groups), ranges))
        return out


_STEPS: dict[str, dict[str, ReduceStep]] = {}


def _steps(parent: Reduce) -> dict[str, ReduceStep]:
    """The parent's step kernels, made once (their names key the pipeline cache)."""
    s = _STEPS.get(parent.op)
    if s is None:
        s = _STEPS[parent.op] = {k: ReduceStep(parent, k)
                                 for k in ("partial", "finish", "rows", "colpart", "cols")}
    return s


class Softmax(BuiltinKernel):
    """softmax over the last axis (or every element): exp(x - max) / sum(exp(x - max))."""

    name = "softmax"
    not_in_place = "softmax reads its whole row for each output element"
    inputs = ("x",)
    dtypes = ("f32", "f16")
    workgroup_size = 256
    description = "exp(x - max) / sum(exp(x - max)) along the last axis (axis=-1) or all (None)"

    def __init__(self):
        self.params = (Param("axis", "axis", -1, "-1 (the last axis) or None (every element)"),)

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
        src = shaders.render(shaders.load("reduce/softmax.wgsl"), {
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
        Reduce("prod", "product over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("max", "maximum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("min", "minimum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("mean", "mean over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("argmax", "index (u32) of the first maximum along the last axis or overall"),
        Reduce("any", "whether any element is not zero (bool; nan is not zero), over the "
               "last axis (axis=-1) or every element (axis=None)"),
        Reduce("all", "whether every element is not zero (bool; nan is not zero), over the "
               "last axis (axis=-1) or every element (axis=None)"),
        Softmax(),
    ]


assert _ALIGN >= 16, "full reductions keep partials in the output's padding words 1 and 2"
