"""Item assignment of Buffers, ``x[key] = value``, on the GPU: basic keys write a strided
region of x's memory (region_copy), a boolean mask or integer indices write rows (scatter)."""

from __future__ import annotations

import math

import numpy as np

from ._gather import (
    _mask_shape,
    broadcast_copy,
    index_array,
    key_array,
    nonzero_positions,
    scatter,
    value_buffer,
)
from ._lazy import enqueue
from .buffer import Buffer, BufferView, check_buffer
from .dtypes import DTYPES
from .errors import ArgumentError, IndexingError, ShapeError
from .kernels.core.layout import broadcast_strides, contiguous_strides
from .kernels.elementwise.regions import REGION_COPY

_ALLOWED_KEYS = (int, np.integer, slice, type(Ellipsis), type(None))


def setitem(x: Buffer, key, value) -> None:
    """``x[key] = value``: ``key`` as numpy's basic indexing (ints, slices, ..., None), or as
    the sole index a boolean mask of x's leading dimensions or integer indices along its
    first axis; ``value`` a Python number (converted exactly to x's dtype) or an array that
    broadcasts to the selection (of x's dtype, or one whose values all fit it). Every
    reference to x (and to views of its memory) sees the change. An array value overlapping
    x is read before anything is written. With repeated integer indices one of the values
    lands (which is not defined)."""
    check_buffer(x, "self")
    items = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, Buffer) for k in items):
        _array_setitem(x, key, value)
        return
    where = "item assignment"
    offset, shape, strides = basic_layout(x, key)
    root = x._base if x._base is not None else x
    item = DTYPES[x.dtype].itemsize
    if DTYPES[root.dtype].itemsize != item:
        raise ArgumentError(f"{where}: this array is a view of a {root.dtype} buffer as "
                            f"{x.dtype}; assign into the buffer itself")
    v, scalar = value_buffer(where, x, value)
    try:
        if math.prod(shape) == 0:
            return
        if scalar:
            a, a_strides, a_offset = v, (0,) * len(shape), 0
        else:
            a, a_strides, a_offset = _value_layout(where, v, shape)
        enqueue(REGION_COPY, [a], root, {
            "shape": shape, "a_strides": a_strides, "a_offset": a_offset,
            "out_strides": strides, "out_offset": x._offset // item + offset})
    finally:
        if v is not value:
            v.free()


def basic_layout(x: Buffer, key) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """numpy's basic indexing (ints, slices, ..., None) of ``x`` as (the first element's
    offset from x's, shape, element strides); anything else is an IndexingError."""
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, _ALLOWED_KEYS):
            raise IndexingError(
                f"index {k!r} of type {type(k).__name__}: buffers take ints, slices, ..., "
                f"None and (as the sole index) a boolean mask or an integer array")
    # numpy computes the view's layout from a stand-in with these strides (one byte per
    # element); basic indexing never touches the stand-in's memory
    stand_in = np.lib.stride_tricks.as_strided(
        np.zeros(1, np.uint8), shape=x.shape, strides=contiguous_strides(x.shape),
        writeable=False)
    if not any(k is Ellipsis for k in items):
        items = items + (Ellipsis,)  # an array even when every axis takes an int
    try:
        v = stand_in[items]
    except IndexError as e:
        raise IndexingError(f"index {key!r} for shape {x.shape}: {e}") from None
    offset = v.__array_interface__["data"][0] - stand_in.__array_interface__["data"][0]
    return offset, tuple(v.shape), tuple(v.strides)


def _value_layout(where: str, v: Buffer, shape: tuple[int, ...]):
    """(buffer bound, strides, element offset) reading array ``v`` broadcast to ``shape``."""
    vshape = tuple(v.shape)
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]  # numpy drops leading ones of a value too
    lead = len(shape) - len(vshape)
    if lead < 0 or any(a != b and a != 1 for a, b in zip(vshape, shape[lead:])):
        raise ShapeError(f"{where}: value of shape {tuple(v.shape)} does not broadcast to the "
                         f"selection's shape {shape}")
    strides = broadcast_strides(vshape, shape)
    if v._base is None:
        return v, strides, 0
    item = DTYPES[v.dtype].itemsize
    alias = BufferView(v._base, (v._base.nbytes // item,), 0, DTYPES[v.dtype])
    return alias, strides, v._offset // item


def _array_setitem(x: Buffer, key, value) -> None:
    where = "item assignment"
    k = key_array(x, key)
    mask = DTYPES[k.dtype].kind == "b"
    if mask:
        where = f"item assignment (boolean mask {k.shape})"
        _mask_shape(where, x, k)
        if k.size == 0:
            value_buffer(where, x, value)  # checked, though nothing is written
            return
        idx, n, checked = nonzero_positions(k), k.size, False
        rows = (idx.size,) + x.shape[k.ndim:]
    else:
        where = f"item assignment (integer array {k.shape})"
        if x.ndim == 0:
            raise ArgumentError(f"{where}: a 0-d array takes no integer array index")
        idx, n, checked = index_array(k), x.shape[0], True
        rows = tuple(k.shape) + x.shape[1:]
    v, scalar = value_buffer(where, x, value)
    vb = v
    try:
        if not scalar:
            _value_layout(where, v, rows)  # refuses a value that does not broadcast
            vshape = tuple(v.shape)
            while len(vshape) > len(rows) and vshape[0] == 1:
                vshape = vshape[1:]
            vb = broadcast_copy(BufferView(v, vshape, 0), rows, "value")
        scatter(where, x, idx, n, vb, scalar, checked)
    finally:
        for b in {id(b): b for b in (vb, v) if b is not value}.values():
            b.free()
        if idx is not k:
            idx.free()
