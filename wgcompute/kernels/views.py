"""Kernels that read a view of a buffer in place where a copy of it was asked for (automatic
fusion holds strided copies, _fusion_auto.py): kernel name -> (the operands a view may
replace, given the inputs and params; the inputs and params reading the given views, or None
where the kernel cannot read them so)."""

from __future__ import annotations

import math

from .matmul.shapes import read_in_place, reshape_view, viewable_operands
from .nn.attention import attention_views, viewable_heads

IN_PLACE = {"matmul": (viewable_operands, read_in_place),
            "attention": (viewable_heads, attention_views)}


def held_view(held: dict, x, out_root) -> tuple | None:
    """(the held copy's entry, (its source, the view of the source that reading ``x``
    amounts to)) where ``x`` is a held copy's result, or a reshape of all of it (attention's
    (B·H, S, D) heads viewed as (B, H, S, D)) or of one block of its first axis (a Gather of
    one constant index: Q, K or V of a packed projection), and its source may be read instead
    by an op writing ``out_root``; else None. ``held``: automatic fusion's held copies by id
    of their result, entries (weakref of the result, source, ..., view of the source)."""
    e, view = held.get(x._id), None
    if e is not None and e[0]() is x:
        view = e[5]
    elif x._base is not None:
        e = held.get(x._base._id)
        if e is not None and e[0]() is x._base:
            view = _block_view(e[5], x)
    src = e[1] if view is not None else None
    if src is None or src._freed or out_root is x or out_root is (
            src if src._base is None else src._base):
        return None
    return e, (e[1], view)


def _block_view(view, x) -> tuple | None:
    """The view of a held copy's source that ``x`` amounts to, ``x`` a view of all of the
    copy's result (of ``view``) or of one block of its first axis, reshaped; else None."""
    shape, strides, offset = view
    start, rest = x._offset // x._dt.itemsize, math.prod(shape[1:])
    if x._offset % x._dt.itemsize or not shape:
        return None
    if start == 0 and x.size == math.prod(shape):
        return reshape_view(view, x.shape)
    if x.size != rest or start % max(rest, 1):
        return None
    return reshape_view((shape[1:], strides[1:], offset + start // rest * strides[0]),
                        x.shape)
