"""How a · b maps onto the tiled kernel: numpy's matmul shapes (batch dimensions broadcast,
1-D operands as vectors), and operands read in place through element strides (views)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ...errors import ArgumentError, ShapeError, WgComputeError
from ..core.layout import (
    MAX_DIMS,
    broadcast_shapes,
    broadcast_strides,
    coalesce,
    contiguous_strides,
)


@dataclass(frozen=True)
class MatmulShape:
    """How a · b runs: numpy's matmul shapes mapped onto the tiled kernel.

    ``out`` is numpy's result shape; m, k, n one product's sizes. A product whose b has no
    batch extent runs as one 2-D product with a's batch dimensions folded into m (``batch``
    is then ()); otherwise ``batch`` holds the coalesced batch sizes and ``a_strides`` /
    ``b_strides`` each operand's element stride along them (0 where it is broadcast).
    ``strided``: an operand is read through a view (``view_shape``); the product is then
    batched (one batch at least), with ``ta`` / ``tb`` (the matrix read transposed), ``lda``
    / ``ldb`` (element stride between its rows in memory) and element offsets."""

    out: tuple[int, ...]
    m: int
    k: int
    n: int
    batch: tuple[int, ...] = ()
    a_strides: tuple[int, ...] = ()
    b_strides: tuple[int, ...] = ()
    strided: bool = False
    ta: bool = False
    tb: bool = False
    lda: int = 0
    ldb: int = 0
    a_offset: int = 0
    b_offset: int = 0

    @property
    def nbatch(self) -> int:
        return math.prod(self.batch)


def swap_last(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape with its last two axes swapped (what a transposed operand holds)."""
    return shape[:-2] + (shape[-1], shape[-2])


def operand_shapes(inputs, params) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of the product's a and b: an operand read transposed (params "_ta" /
    "_tb") is a buffer holding it with its last two axes swapped; one read through a view
    ("_la" / "_lb": (shape, strides, offset)) has the view's shape."""
    a, b = inputs
    out = []
    for nm, x in (("a", a), ("b", b)):
        view = params.get(f"_l{nm}")
        out.append(view[0] if view is not None else
                   swap_last(x.shape) if params.get(f"_t{nm}") else x.shape)
    return out[0], out[1]


def shape_of(inputs, params) -> MatmulShape:
    la, lb = params.get("_la"), params.get("_lb")
    if la is None and lb is None:
        sa, sb = operand_shapes(inputs, params)
        return matmul_shape(sa, sb, bool(params.get("_ta")))
    views = []
    for nm, x, view in (("a", inputs[0], la), ("b", inputs[1], lb)):
        if view is None:
            st = contiguous_strides(x.shape)
            view = ((swap_last(x.shape), swap_last(st), 0) if params.get(f"_t{nm}")
                    else (x.shape, st, 0))
        views.append(view)
    return view_shape(views[0], views[1])


def check_view(nm: str, value) -> tuple:
    """Param "_l<nm>" (read operand nm through a view): (shape, strides, offset), with at
    least 2 dimensions, non-negative element strides and offset, and an element stride of 1
    along one of the last two dimensions. Returns it as ints."""
    where = f"matmul: param '_l{nm}'"
    try:
        shape, strides, offset = value
        shape, strides, offset = tuple(shape), tuple(strides), offset
        ok = (all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                  for v in (*shape, *strides, offset)) and len(shape) == len(strides))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ArgumentError(f"{where} must be (shape, strides, offset) of non-negative ints, "
                            f"shape and strides of equal length; got {value!r}")
    if len(shape) < 2:
        raise ShapeError(f"{where}: a view read in place needs at least 2 dimensions, got "
                         f"shape {shape}")
    if _matrix_layout(shape, strides) is None:
        raise ArgumentError(f"{where} reads {nm} {shape} through strides {strides[-2:]} along "
                            f"its last two dimensions; one of them must be 1 (rows or columns "
                            f"read in order)")
    return shape, strides, offset


def reads_in_place(shape, strides, offset) -> bool:
    """Whether matmul can read a view (shape, strides, offset) of a buffer in place: 2 or
    more dimensions, non-negative strides and offset, a unit stride along one of the last
    two dimensions."""
    return (len(shape) >= 2 and len(strides) == len(shape) and offset >= 0
            and all(s >= 0 for s in strides) and _matrix_layout(shape, strides) is not None)


_VIEWS: dict = {}  # (src_shape, out_shape) -> copy_view of a transpose (a pure function)


def copy_view(name: str, src_shape, out_shape, params) -> tuple | None:
    """The view (shape, strides, offset) of a source of ``src_shape`` that the copy op
    ``name`` makes into a contiguous output of ``out_shape`` (the 2-D transpose kernel, a
    strided copy, a region copy filling all of the output), where a matmul could read it in
    place (one of its last two strides is 1); else None."""
    if name == "transpose" and not params:  # (every queued x.T: memoized)
        key = (src_shape, out_shape)
        view = _VIEWS.get(key, False)
        if view is False:
            if len(_VIEWS) > 4096:
                _VIEWS.clear()
            view = _VIEWS[key] = _copy_view(name, src_shape, out_shape, params)
        return view
    return _copy_view(name, src_shape, out_shape, params)


def _copy_view(name: str, src_shape, out_shape, params) -> tuple | None:
    if name == "transpose":
        if params or len(src_shape) != 2:
            return None
        view = (out_shape, swap_last(contiguous_strides(src_shape)), 0)
    elif not params or type(params) is not dict:
        return None
    elif name == "strided_copy" and len(params) == 2 and "strides" in params:
        view = (out_shape, params["strides"], params.get("offset"))
    elif (name == "region_copy" and len(params) == 5 and params.get("out_offset") == 0
          and tuple(params.get("shape", ())) == out_shape
          and tuple(params.get("out_strides", ())) == contiguous_strides(out_shape)):
        view = (out_shape, params.get("a_strides"), params.get("a_offset"))
    else:
        return None
    try:
        view = (view[0], tuple(int(v) for v in view[1]), int(view[2]))
    except (TypeError, ValueError):
        return None  # (the copy's own checks refuse it)
    return view if reads_in_place(*view) else None


def compose_views(first, second) -> tuple | None:
    """The view of a source that reading ``second`` (shape, strides, offset) of the contiguous
    result of ``first`` amounts to, where each of second's dimensions walks one dimension of
    first's result (a permutation, from offset 0); else None."""
    (sh1, st1, off1), (sh2, st2, off2) = first, second
    if off2:
        return None
    c1 = contiguous_strides(sh1)
    used, strides = set(), []
    for n, s in zip(sh2, st2):
        if n == 1:
            strides.append(0)
            continue
        e = next((e for e in range(len(sh1))
                  if c1[e] == s and sh1[e] == n and e not in used), None)
        if e is None:
            return None
        used.add(e)
        strides.append(st1[e])
    return sh2, tuple(strides), off1


def viewable_operands(inputs, params) -> tuple[int, ...]:
    """The operands of a product that a view could replace: those read as given."""
    if len(inputs) != 2:
        return ()
    return tuple(i for i, nm in enumerate("ab")
                 if not (params and (f"_t{nm}" in params or f"_l{nm}" in params)))


def reshape_view(view, shape) -> tuple | None:
    """The view (shape, strides, offset) that reshaping the result of reading ``view`` (in
    row-major order) to ``shape`` amounts to, without a copy; None where it needs one (axes
    merged that are not laid out one after the other). numpy's no-copy reshape rule."""
    old_shape, old_strides, offset = view
    if math.prod(old_shape) != math.prod(shape):
        return None
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    new = [n for n in shape]
    strides, i, j = [0] * len(new), 0, 0
    while i < len(old) or j < len(new):
        if j < len(new) and new[j] == 1:
            j += 1
            continue
        if i >= len(old) or j >= len(new):
            return None
        gi, gj, pi, pj = i, j, old[i][0], new[j]
        while pi != pj:  # the smallest groups of old and new axes of one size
            if pi < pj:
                i += 1
                pi *= old[i][0]
            else:
                j += 1
                pj *= new[j]
        if any(old[a][1] != old[a + 1][1] * old[a + 1][0] for a in range(gi, i)):
            return None  # the old axes of the group are not contiguous with each other
        step = old[i][1]
        for b in range(j, gj - 1, -1):
            strides[b] = step
            step *= new[b]
        i, j = i + 1, j + 1
    return tuple(shape), tuple(strides), offset


_FOLDS: dict = {}  # read_in_place's params for unparameterized products, by shapes and views


def read_in_place(inputs, params, swap) -> tuple | None:
    """(inputs, params) of a matmul reading copies' sources in place instead of the copies
    (``swap``: operand number -> (source, the view of it the copy makes)): a swap of the
    last two axes of the whole source as "_ta" / "_tb" (the 2-D transposed kernels), any
    other view as "_la" / "_lb"; None where the product cannot run so (the copies are then
    queued first)."""
    if params:
        return _read_in_place(inputs, params, swap)
    # a function of the shapes and views alone: memoized (a dependent chain's every product)
    key = (inputs[0].shape, inputs[1].shape,
           tuple([(i, src.shape, view) for i, (src, view) in swap.items()]))
    flags = _FOLDS.get(key, False)
    if flags is False:
        got = _read_in_place(inputs, params, swap)
        flags = got[1] if got is not None else None
        if len(_FOLDS) > 4096:
            _FOLDS.clear()
        _FOLDS[key] = flags
    if flags is None:
        return None
    new = list(inputs)
    for i, (src, _view) in swap.items():
        new[i] = src
    return new, dict(flags)


def _read_in_place(inputs, params, swap) -> tuple | None:
    new = list(inputs)
    flags = dict(params or {})
    for i, (src, view) in swap.items():
        nm = "ab"[i]
        new[i] = src
        if (src.ndim >= 2 and view[0] == swap_last(src.shape) and view[2] == 0
                and view[1] == swap_last(contiguous_strides(src.shape))):
            flags[f"_t{nm}"] = True
        else:
            flags[f"_l{nm}"] = view
    try:
        sh = shape_of(new, flags)  # (cached) e.g. too many alternating batch dimensions
    except WgComputeError:
        return None
    if sh.nbatch > 1 and not shape_of(inputs, params or {}).batch:
        # the copies' results make one 2-D product (a's batch folded into its rows, as a
        # linear layer's input); read through the view, it would be many small products of
        # a's rows (ViT's sequence-first input: 197 products of 32 rows ran 3x slower on an
        # H200 than the copy and one product)
        return None
    return new, flags


def check_view_extent(nm: str, x, view) -> None:
    """Refuse a view that reaches past the buffer ``x`` it reads."""
    shape, strides, offset = view
    if math.prod(shape) == 0:
        return
    hi = offset + sum((n - 1) * s for n, s in zip(shape, strides))
    if hi >= x.size:
        raise ShapeError(f"matmul: {nm} is read as {shape} through strides {strides} from "
                         f"offset {offset}; that reaches element {hi}, and {nm} {x.shape} has "
                         f"{x.size}")


def _matrix_layout(shape, strides) -> tuple[bool, int] | None:
    """(read transposed, element stride between rows in memory) of a view's matrices, or None
    where neither of the last two strides is 1 (a dimension of one element takes any)."""
    (rows, cols), (sr, sc) = shape[-2:], strides[-2:]
    if sc == 1 or cols == 1:
        return False, (sr if rows > 1 else cols)
    if sr == 1 or rows == 1:
        return True, (sc if cols > 1 else rows)
    return None


@functools.lru_cache(maxsize=512, typed=True)
def view_shape(a_view: tuple, b_view: tuple) -> MatmulShape:
    """``matmul_shape`` for a and b read through views (shape, strides, offset): always a
    batched product (a batch of one for 2-D views), each operand addressed through its batch
    strides, its row stride and a unit column (or, transposed, row) stride."""
    a_shape, b_shape = a_view[0], b_view[0]
    base = matmul_shape(a_shape, b_shape)  # numpy's rules and their errors
    m, k, n = (a_shape[-2] if len(a_shape) > 1 else 1), base.k, base.n  # (m: not folded)
    if len(a_shape) == 1:  # a row: (1, k)
        a_view = ((1,) + a_shape, (0,) + a_view[1], a_view[2])
    if len(b_shape) == 1:  # a column: (k, 1)
        b_view = (b_shape + (1,), b_view[1] + (0,), b_view[2])
    batch = base.out[:len(base.out) - (len(a_shape) > 1) - (len(b_shape) > 1)]
    (sa, ta, lda), (sb, tb, ldb) = _operand(a_view, batch), _operand(b_view, batch)
    sizes, (sa, sb) = coalesce(batch, (sa, sb))
    if not sizes:
        sizes, sa, sb = (1,), (0,), (0,)
    if len(sizes) > MAX_DIMS:
        raise ShapeError(f"matmul: the batch dimensions of a {a_shape} and b {b_shape} "
                         f"alternate over {len(sizes)} dimensions; at most {MAX_DIMS} are "
                         f"supported")
    return MatmulShape(base.out, m, k, n, sizes, sa, sb, True, ta, tb, lda, ldb,
                       a_view[2], b_view[2])


def _operand(view, batch) -> tuple[tuple[int, ...], bool, int]:
    """(element strides along the product's batch dimensions, read transposed, row stride)
    of one operand's view."""
    shape, strides, _ = view
    layout = _matrix_layout(shape, strides)
    if layout is None:  # (plain operands are contiguous; views are checked by check_view)
        raise ArgumentError(f"matmul: a view {shape} with strides {strides} has no unit "
                            f"stride along its last two dimensions")
    return broadcast_strides(shape[:-2], batch, strides[:-2]), layout[0], layout[1]


@functools.lru_cache(maxsize=512, typed=True)
def matmul_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                 ta: bool = False) -> MatmulShape:
    """numpy's matmul rules: (..., m, k) · (..., k, n) with the leading (batch) dimensions
    broadcast; a 1-D a is a row (its m dropped from the result), a 1-D b a column. ``ta``:
    a is read transposed (its matrices are (k, m) in memory), so its batch never folds
    into m."""
    for nm, s in (("a", a_shape), ("b", b_shape)):
        if not s:
            raise ShapeError(f"matmul: {nm} is 0-d; matmul takes arrays of 1 or more "
                             f"dimensions (multiply scales by a scalar)")
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    if k != k2:
        raise ShapeError(f"matmul: a is {a_shape} and b is {b_shape}; inner dimensions {k} "
                         f"and {k2} differ")
    ba, bb = a2[:-2], b2[:-2]
    batch = broadcast_shapes("matmul", [("a's batch shape", ba), ("b's batch shape", bb)])
    out = batch + ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
    if math.prod(bb) == 1 and not (ta and math.prod(ba) > 1):
        # b is the same matrix for every batch: one (B·m, k) · (k, n)
        return MatmulShape(out, math.prod(ba) * m, k, n)
    sa = broadcast_strides(ba, batch, tuple(s * m * k for s in contiguous_strides(ba)))
    sb = broadcast_strides(bb, batch, tuple(s * k * n for s in contiguous_strides(bb)))
    sizes, (sa, sb) = coalesce(batch, (sa, sb))
    if len(sizes) > MAX_DIMS:
        raise ShapeError(f"matmul: the batch dimensions of a {a_shape} and b {b_shape} "
                         f"alternate over {len(sizes)} dimensions; at most {MAX_DIMS} are "
                         f"supported")
    return MatmulShape(out, m, k, n, sizes, sa, sb)
