"""Reduction kernels sum, max, min, mean, argmax (over any axis, any tuple of axes, or
everything; keepdims) and softmax (last axis or everything); subgroups where the adapter has them.

Output shapes follow numpy: the reduced axes go (or stay as 1 with ``keepdims``); a full
reduction is 0-d (shape ()). Output dtypes: sum keeps the dtype (integers wrap around, like
``np.sum(x, dtype=x.dtype)``) except u8, which sums into u32; max and min keep the dtype;
mean is f32 for f32 and every integer dtype (accumulated in f32), f16 for f16 (accumulated
in f32), f64 for f64; argmax is u32 (first index of the maximum); softmax (f32, f16; computed
in f32) keeps shape and dtype. As in numpy, max, min and argmax of an empty axis are errors,
a sum over one is 0 and a mean nan; a nan makes max, min, sum and mean nan, argmax gives the
first nan, and softmax's whole row is nan.

How (``reduce_plan``): reduced axes that are the last ones run as rows (one workgroup per
output); one block of reduced axes with kept axes after it runs as columns (64 outputs per
workgroup, four slices of the reduced axis each; split in two steps when the outputs are too
few to fill a GPU); reduced axes in several blocks are first gathered behind the kept ones by
a strided copy, then run as rows. An x larger than the adapter binds at once runs in launches
over windows of it (everything: 1024-element multiples; rows: whole rows); columns refuse."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...buffer import _ALIGN
from ...dtypes import DTYPES, DType
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
    wgsl_is_nan,
)
from ..core.layout import contiguous_strides

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
_F32_NAN = "bitcast<f32>(0x7fc00000u)"  # a quiet nan (subgroup results: f32 only)
_COLS = 64  # outputs per workgroup in column mode (times _SLICES invocations each)
_SLICES = 4
# Column mode splits the reduced axis into parts (two steps) while it has fewer outputs
# than this: each output's invocations would otherwise walk a long axis alone.
_COLS_BUSY = 16384


def _axis_doc() -> Param:
    return Param("axis", "axis", -1, "-1 (the last axis), an axis, a tuple of axes, or None "
                 "(every element)")


def _keepdims_doc() -> Param:
    return Param("keepdims", "bool", False, "keep the reduced axes as size 1")


def check_axis(name: str, axis, ndim: int):
    """softmax's axis, normalized: "last" or "all"."""
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


def normalize_axes(name: str, axis, ndim: int, single: bool = False) -> tuple[int, ...]:
    """The reduced axes, sorted, from numpy's ``axis`` (None, an int, or a tuple of ints).
    A 0-d input also takes -1 and 0 (the one element). ``single``: an int or None only."""
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, tuple) and not single else (axis,)
    what = "an int or None" if single else "an int, a tuple of ints, or None"
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ArgumentError(f"{name}: param 'axis' must be {what}, got "
                                f"{type(axis).__name__} {axis!r}")
        a = int(a)
        if ndim == 0 and a in (-1, 0):
            continue
        if not -ndim <= a < ndim:
            raise ArgumentError(f"{name}: param 'axis' {a} is out of range for a {ndim}-D "
                                f"input (-{ndim}..{ndim - 1})")
        a %= ndim
        if a in out:
            raise ArgumentError(f"{name}: param 'axis' {axis!r} names axis {a} twice")
        out.append(a)
    return tuple(sorted(out))


@dataclass(frozen=True)
class ReducePlan:
    """How one reduction runs. ``how``: "rows" (rows × n, contiguous), "cols" (outer × n ×
    inner: each of the outer·inner outputs reads n elements inner apart; ``parts`` > 1 splits
    n in two steps), "all" (everything into one value), "gather" (a strided copy moves the
    reduced axes, ``perm`` order, behind the kept ones, then rows), "empty" (nothing along
    the reduced axes: n = 0), "none" (no output element)."""

    how: str
    out_shape: tuple[int, ...]
    n: int
    rows: int = 1
    inner: int = 1
    parts: int = 1
    perm: tuple[int, ...] = ()


@functools.lru_cache(maxsize=1024, typed=True)  # typed: axis=True must not hit axis=1
def reduce_plan(name: str, shape: tuple[int, ...], axis, keepdims: bool,
                single: bool = False) -> ReducePlan:
    axes = normalize_axes(name, axis, len(shape), single)
    if not isinstance(keepdims, bool):
        raise ArgumentError(f"{name}: param 'keepdims' must be True or False, got {keepdims!r}")
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape) if keepdims or
                      d not in axes)
    n = math.prod(shape[d] for d in axes)
    kept = math.prod(s for d, s in enumerate(shape) if d not in axes)
    if n == 0:
        return ReducePlan("empty", out_shape, 0, kept)
    if kept == 0:
        return ReducePlan("none", out_shape, n, 0)
    if kept == 1:
        return ReducePlan("all", out_shape, n)
    # blocks of adjacent dimensions (size-1 ones left out), each all reduced or all kept
    blocks: list[list] = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        red = d in axes
        if blocks and blocks[-1][0] == red:
            blocks[-1][1] *= size
        else:
            blocks.append([red, size])
    reduced = [b for b in blocks if b[0]]
    if not reduced:  # only size-1 axes reduced: one element per output, read as columns
        return ReducePlan("cols", out_shape, 1, 1, kept)
    if len(reduced) == 1 and blocks[-1][0]:
        return ReducePlan("rows", out_shape, n, kept)
    if len(reduced) == 1:
        i = blocks.index(reduced[0])
        outer = math.prod(b[1] for b in blocks[:i])
        inner = math.prod(b[1] for b in blocks[i + 1:])
        parts = 1
        if outer * inner < _COLS_BUSY and n >= 1024 and not single:
            parts = min(-(-n // 256), -(-_COLS_BUSY // (outer * inner)))
        return ReducePlan("cols", out_shape, n, outer, inner, parts)
    perm = tuple(d for d in range(len(shape)) if d not in axes) + axes
    return ReducePlan("gather", out_shape, n, kept, perm=perm)


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
        wide = self.acc(x.dtype) in ("f64", "i64")
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
                         {"value": float("nan") if self.op == "mean" else 0})]
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
    rpw = 4 if output.dtype == "u8" else 1  # four rows' u8 results share a word
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
        wide = self.parent.acc(x.dtype) in ("f64", "i64")
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
        return {"max": "return VI(max(a.v, b.v), 0u);", "min": "return VI(min(a.v, b.v), 0u);"
                }.get(op, "return VI(a.v + b.v, 0u);")
    if op in ("sum", "mean"):
        return "return VI(a.v + b.v, 0u);"
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
        fn = {"sum": "subgroupAdd", "mean": "subgroupAdd", "max": "subgroupMax",
              "min": "subgroupMin"}[op]
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
    rpw = 4 if od.packed else 1
    lines = []
    for r in range(rpw):
        lines += [f"let row{r} = g * {rpw}u + {r}u;",
                  f"    var mine{r} = VI(p.ident, NONE);",
                  f"    if (row{r} < p.rows) {{",
                  f"        mine{r} = scan(p.xoff + row{r} * p.n, p.n, lid, {wg}u);",
                  "    }",
                  f"    let r{r} = reduce_wg(lid, sid, mine{r});"]
    lines.append("if (lid == 0u) {")
    if od.packed:  # four rows' u8 results share one u32 word
        word = " | ".join(f"(select(0u, r{r}.v & 0xffu, row{r} < p.rows) << {8 * r}u)"
                          for r in range(rpw))
        lines.append(f"        if (row0 < p.rows) {{ out[p.first / 4u + g] = {word}; }}")
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
    if od.packed:  # four outputs share a u32 word: pack them through workgroup memory
        lines += ["workgroupBarrier();",
                  "if (s == 0u) {",
                  "    wv[col] = m.v;",
                  "}",
                  "workgroupBarrier();",
                  f"if (lid < {_COLS // 4}u) {{",
                  f"    let o0 = g * {_COLS}u + lid * 4u;",
                  "    var w = 0u;",
                  "    for (var l = 0u; l < 4u; l = l + 1u) {",
                  "        if (o0 + l < p.rows) {",
                  "            w = w | ((u32(wv[lid * 4u + l]) & 0xffu) << (l * 8u));",
                  "        }",
                  "    }",
                  "    if (o0 < p.rows) {",
                  "        out[o0 / 4u] = w;",
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
    load4 = _load4(xd, acc) if vec else ""
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
        val = "r.v & 0xffu" if od.packed else \
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
        "OT": ot, "WG": wg, "MERGE": merge, "ELEM": _elem(xd, acc, vec and not xd.packed),
        "ELEMVI": _elem_vi(op, acc), "VALUE": _value(op, acc),
        "NONE": "0u" if _flagged(op, acc) else "0xffffffffu", "FNS": _fns(op, acc),
        "LOAD4": load4, "SCAN": scan, "WGREDUCE": _wgreduce(sub, op, wg, acc), "MAIN": main,
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
        Reduce("max", "maximum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("min", "minimum over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("mean", "mean over the last axis (axis=-1) or every element (axis=None)"),
        Reduce("argmax", "index (u32) of the first maximum along the last axis or overall"),
        Softmax(),
    ]


assert _ALIGN >= 16, "full reductions keep partials in the output's padding words 1 and 2"
