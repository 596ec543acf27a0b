"""The axes a reduction runs over: checked and normalized as numpy does, and the plan of how
the reduced axes map onto rows, columns or a gather."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...errors import ArgumentError
from ..core.base import (
    Param,
)
from .wgsl import (
    _COLS_BUSY,
)


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
