"""The standard's indexing functions take and take_along_axis (GPU gathers whose indices are
checked on the GPU) and nonzero (a searching function, kept here beside the gathers)."""

from __future__ import annotations

from .. import _gather
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ArgumentError, IndexingError, ShapeError
from ._helpers import array, normalize_axis, same_device

__all__ = ["nonzero", "take", "take_along_axis"]


def _indices(where: str, indices) -> Buffer:
    idx = array(indices, "indices")
    if DTYPES[idx.dtype].kind not in "iu":
        raise IndexingError(f"{where}: indices is a {idx.dtype} array; expected an integer "
                            f"array")
    return idx


def take(x: Buffer, indices: Buffer, /, *, axis: int | None = None) -> Buffer:
    """The elements of ``x`` at ``indices`` (1-D, integer; negative ones count from the end)
    along ``axis`` (optional for 1-D ``x`` only). The indices are checked on the GPU in the
    same submit, and one out of range is an IndexingError naming it: take reads back that
    one word, so it waits for the GPU."""
    x = array(x, "x")
    idx = _indices("take", indices)
    same_device("take", x, idx)
    if x.ndim == 0:
        raise ShapeError("take: x is 0-d; take needs an axis to select along")
    if idx.ndim != 1:
        raise ShapeError(f"take: indices must be 1-D, got shape {idx.shape}")
    if axis is None:
        if x.ndim != 1:
            raise ArgumentError(f"take: axis=None is allowed for 1-D x only; x is {x.shape}: "
                                f"give the axis")
        axis = 0
    return _gather.take(x, idx, normalize_axis(axis, x.ndim), where="take")


def take_along_axis(x: Buffer, indices: Buffer, /, *, axis: int = -1) -> Buffer:
    """The elements of ``x`` at ``indices`` (x's rank, integer) along ``axis``: the other
    axes broadcast between them. Indices are checked on the GPU as take's are (one word read
    back)."""
    x = array(x, "x")
    idx = _indices("take_along_axis", indices)
    same_device("take_along_axis", x, idx)
    if x.ndim == 0:
        raise ShapeError("take_along_axis: x is 0-d; it needs an axis to select along")
    ax = normalize_axis(axis, x.ndim)
    return _gather.take_along(x, idx, ax, where="take_along_axis")


def nonzero(x: Buffer, /) -> tuple[Buffer, ...]:
    """The coordinates (int32, one array per dimension, row-major order) of the nonzero
    elements of ``x`` (True for bool; for floats -0.0 is zero and nan is not). Their count is
    read back from the GPU (one word), so nonzero waits for it. 0-d x is refused, as the
    standard requires."""
    x = array(x, "x")
    return _gather.nonzero(x)
