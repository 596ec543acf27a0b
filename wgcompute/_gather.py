"""Advanced indexing on the GPU: gathers by integer arrays (their indices checked on the GPU),
the flat positions of nonzero elements (count, scan, compact), boolean masks and nonzero.

Their kernels are queued as the operators' are. Functions whose result's size depends on the
data (masks, nonzero) read back one count, and a checked gather one word (the first index out
of range): both wait for the GPU."""

from __future__ import annotations

import math

import numpy as np

from ._lazy import enqueue, tracing
from .buffer import Buffer, BufferView, check_buffer, from_numpy, result_buffer
from .dtypes import DTYPES, convert_exact
from .errors import ArgumentError, DtypeError, IndexingError, ShapeError
from .kernels.core.layout import broadcast_shapes, broadcast_strides, contiguous_strides
from .kernels.core.registry import get as registry_get
from .kernels.elementwise.cast import exact_by_type
from .kernels.elementwise.regions import REGION_COPY
from .kernels.gather.gather import (
    COMPACT,
    INDEX_CHECK,
    INDEX_DTYPES,
    SCATTER,
    TAKE,
    TAKE_ALONG,
    compact_tiles,
)
from .kernels.scan.scan import SCANS

_NONE = 0xFFFFFFFF


def reshape(x: Buffer, shape: tuple[int, ...]) -> Buffer:
    """The same elements in another shape (every buffer is contiguous: a view)."""
    return BufferView(x, tuple(shape), 0)


def read_element(buf: Buffer, index: int):
    """Element ``index`` (flat) of ``buf`` as a numpy scalar: one small read, blocking."""
    return BufferView(buf, (1,), index * DTYPES[buf.dtype].itemsize).to_numpy()[0]


def widen(x: Buffer, dt) -> Buffer:
    """``x`` converted on the GPU to ``dt``, which holds every value of x's dtype."""
    out = result_buffer(x.shape, DTYPES[str(dt)], x.device, label="convert")
    if not x.size:
        return out
    return enqueue("astype", [x], out, {"rounding": None, "casting": "unsafe"})


def index_array(indices, argument: str = "indices") -> Buffer:
    """An integer array of indices as a gather reads it (s32, u32 or s64; the 1- and 2-byte
    integers widened, keeping their sign; u64 refused)."""
    check_buffer(indices, argument)
    dt = DTYPES[indices.dtype]
    if dt.kind not in "iu":
        raise IndexingError(f"{argument}: {dt.name} array; indices must be an integer array")
    if dt.name in INDEX_DTYPES:
        return indices
    if dt.itemsize == 8:  # u64: read as s64 its values past 2**63 would be negative indices
        raise IndexingError(f"{argument}: {dt.name} array; indices must be s32, u32 or s64 "
                            f"(convert with astype(indices, 's64'))")
    return widen(indices, "s32" if dt.kind == "i" else "u32")


def _same_device(where: str, *named) -> None:
    dev = named[0][1].device
    for name, b in named[1:]:
        if b.device is not dev:
            raise ArgumentError(f"{where}: {name} is on {b.device.label} and "
                                f"{named[0][0]} on {dev.label}; move one with to_device()")


def run_steps(where: str, steps) -> None:
    """Kernels (kernel, inputs, output, params) queued in order on their device, as the
    operators are (bound through the bind cache: a repeated call on pooled memory creates no
    GPU object); the buffers they use stay alive until their work is done."""
    for k, ins, o, params in steps:
        enqueue(registry_get(k), list(ins), o, params, where)


def scan_rows(where: str, op: str, x: Buffer, rows: int, out: Buffer,
              include_initial: bool) -> None:
    """The scan kernel's steps over x seen as ``rows`` rows into ``out`` (its rows one
    longer with ``include_initial``), queued. x and out are bound as they are,
    not through reshaped views, and the temporaries come from the device's memory pool, so
    that a repeated call finds its steps bound already (the bind cache keys pooled memory by
    its place): a scan costs its GPU time, not the creation of bind groups."""
    n = x.size // rows if rows else 0
    shift = int(include_initial)
    SCANS[op].check([reshape(x, (rows, n))], reshape(out, (rows, n + shift)),
                    {"include_initial": include_initial})
    temps, steps = SCANS[op].plan((rows, n), str(x.dtype), include_initial)
    bufs = [result_buffer(tuple(shape), DTYPES[dt], x.device, f"{where}-tmp")
            for shape, dt in temps]
    env = {"in0": x, "out": out, **{f"tmp{i}": b for i, b in enumerate(bufs)}}
    try:
        run_steps(where, [(k, [env[r] for r in ins], env[o], params)
                          for k, ins, o, params in steps])
    finally:
        for b in reversed(bufs):  # the pool hands them back in this order next time
            b.free()


def checked_run(where: str, idx: Buffer, n: int, kernel, inputs, out: Buffer,
                params: dict, axis_text: str) -> Buffer:
    """Run ``kernel`` after checking ``idx`` against an axis of length ``n`` in the same
    submit; an index out of range (read back: one word) is an IndexingError naming it."""
    flag = result_buffer((1,), DTYPES["u32"], idx.device, label=f"{where}-check")
    steps = [("fill", [], flag, {"value": _NONE}), (INDEX_CHECK, [idx], flag, {"n": n})]
    if kernel is not None:
        steps.append((kernel, inputs, out, params))

    def error(bad: int):
        if bad == _NONE:
            return None
        value = read_element(idx, bad).item()
        return IndexingError(f"{where}: index {value} (element {bad} of the indices) is out "
                             f"of range for {axis_text} of size {n} (valid: {-n}..{n - 1})")

    cap = tracing(idx.device)
    if cap is not None:  # a trace (a replayed model): the flag is read after the run
        run_steps(where, steps)
        cap.defer(flag, error)
        return out
    try:
        run_steps(where, steps)
        bad = int(flag.to_numpy()[0])  # the documented read: one word
    finally:
        flag.free()
    e = error(bad)
    if e is not None:
        raise e
    return out


def take(x: Buffer, indices: Buffer, axis: int, where: str = "take") -> Buffer:
    """x's elements at ``indices`` (any shape, read flat) along ``axis`` (non-negative):
    the axis replaced by the indices' count; checked on the GPU."""
    check_buffer(x, "x")
    idx = index_array(indices)
    _same_device(where, ("x", x), ("indices", idx))
    n = x.shape[axis]
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    shape = x.shape[:axis] + (idx.size,) + x.shape[axis + 1:]
    out = result_buffer(shape, DTYPES[x.dtype], x.device, label=where)
    if out.size == 0 and idx.size == 0:
        return out
    return checked_run(where, idx, n, TAKE if out.size else None, [x, idx], out,
                       {"outer": outer, "n": n, "inner": inner}, f"axis {axis}")


def broadcast_copy(x: Buffer, shape: tuple[int, ...], label: str, always: bool = False
                   ) -> Buffer:
    """``x`` broadcast to ``shape``, as a buffer of its own (``x`` itself if it has that
    shape, unless ``always``). Moves bits (region_copy), so every dtype broadcasts."""
    if tuple(x.shape) == tuple(shape) and not always:
        return x
    out = result_buffer(tuple(shape), DTYPES[x.dtype], x.device, label=label)
    if out.size == 0:
        return out
    src, offset = x, 0
    if x._base is not None:  # read the base's memory from the view's first element
        item = DTYPES[x.dtype].itemsize
        src = BufferView(x._base, (x._base.nbytes // item,), 0, DTYPES[x.dtype])
        offset = x._offset // item
    return enqueue(REGION_COPY, [src], out, {
        "shape": tuple(shape), "a_strides": broadcast_strides(x.shape, tuple(shape)),
        "a_offset": offset, "out_strides": contiguous_strides(tuple(shape)), "out_offset": 0})


def take_along(x: Buffer, indices: Buffer, axis: int, where: str = "take_along_axis"
               ) -> Buffer:
    """numpy's take_along_axis with the standard's broadcasting of the other axes."""
    check_buffer(x, "x")
    idx = index_array(indices)
    _same_device(where, ("x", x), ("indices", idx))
    if idx.ndim != x.ndim:
        raise ShapeError(f"{where}: indices is {idx.shape} and x is {x.shape}; they must have "
                         f"the same number of dimensions")
    n, m = x.shape[axis], idx.shape[axis]
    rest = broadcast_shapes(where, [
        ("x (but its axis)", x.shape[:axis] + (1,) + x.shape[axis + 1:]),
        ("indices (but its axis)", idx.shape[:axis] + (1,) + idx.shape[axis + 1:])])
    xb = broadcast_copy(x, rest[:axis] + (n,) + rest[axis + 1:], f"{where}-x")
    ib = broadcast_copy(idx, rest[:axis] + (m,) + rest[axis + 1:], f"{where}-indices")
    out = result_buffer(ib.shape, DTYPES[x.dtype], x.device, label=where)
    if out.size:
        checked_run(where, ib, n, TAKE_ALONG, [xb, ib], out,
                    {"outer": math.prod(rest[:axis]), "n": n,
                     "inner": math.prod(rest[axis + 1:])}, f"axis {axis}")
    for b, src in ((xb, x), (ib, idx)):
        if b is not src:
            b.free()
    return out


def nonzero_positions(x: Buffer) -> Buffer:
    """The flat positions (s32) of ``x``'s nonzero elements in row-major order. Reads back
    their count (one word), which waits for the GPU."""
    size = x.size
    if size >= 2**31:
        raise ShapeError(f"nonzero: x has {size} elements; int32 positions address at most "
                         f"2**31 - 1")
    if size == 0:
        return result_buffer((0,), DTYPES["s32"], x.device, label="nonzero")
    tiles = compact_tiles(size)
    counts = result_buffer((tiles,), DTYPES["u32"], x.device, label="nonzero-counts")
    off = result_buffer((tiles + 1,), DTYPES["u32"], x.device, label="nonzero-offsets")
    try:
        run_steps("nonzero", [(COMPACT["count"], [x], counts, {})])
        scan_rows("nonzero", "sum", counts, 1, off, True)
        count = int(read_element(off, tiles))  # the documented read: one word
    finally:
        counts.free()
    pos = result_buffer((count,), DTYPES["s32"], x.device, label="nonzero")
    try:
        if count:
            enqueue(COMPACT["compact"], [x, off], pos)
    finally:
        off.free()
    return pos


def nonzero(x: Buffer) -> tuple[Buffer, ...]:
    """One int32 array of coordinates per dimension of ``x``'s nonzero elements."""
    check_buffer(x, "x")
    if x.ndim == 0:
        raise ShapeError("nonzero: x is 0-d; nonzero needs at least one dimension (reshape "
                         "it to (1,) first)")
    pos = nonzero_positions(x)
    if x.ndim == 1:
        return (pos,)
    outs = []
    stride = math.prod(x.shape)
    for size in x.shape:
        stride //= max(size, 1)
        out = result_buffer(pos.shape, DTYPES["s32"], x.device, label="nonzero")
        if pos.size:
            enqueue(COMPACT["unravel"], [pos], out, {"stride": stride, "size": size})
        outs.append(out)
    pos.free()
    return tuple(outs)


def _mask_shape(where: str, x: Buffer, mask: Buffer) -> None:
    """The standard's rule: a mask covers x's leading dimensions, each of its sizes x's or 0
    (a mask with a 0 selects nothing)."""
    if mask.ndim > x.ndim:
        raise IndexingError(f"{where}: a boolean mask of shape {mask.shape} has more "
                            f"dimensions than the array {x.shape}")
    if any(m not in (n, 0) for m, n in zip(mask.shape, x.shape)):
        raise IndexingError(f"{where}: a boolean mask of shape {mask.shape} does not match "
                            f"the leading dimensions {x.shape[:mask.ndim]} of the array "
                            f"{x.shape}")


def mask_getitem(x: Buffer, mask: Buffer) -> Buffer:
    """``x[mask]``: the leading dimensions of ``x`` that ``mask`` covers replaced by one,
    the count of its True elements (read back), in row-major order."""
    where = f"index (boolean mask {mask.shape})"
    _same_device(where, ("the array", x), ("the mask", mask))
    _mask_shape(where, x, mask)
    rest = x.shape[mask.ndim:]
    if mask.size == 0:
        return result_buffer((0,) + rest, DTYPES[x.dtype], x.device, label="mask")
    pos = nonzero_positions(mask)
    out = result_buffer((pos.size,) + rest, DTYPES[x.dtype], x.device, label="mask")
    if out.size:
        enqueue(TAKE, [x, pos], out, {"outer": 1, "n": max(mask.size, 1) if mask.ndim
                                         else 1, "inner": math.prod(rest)})
    pos.free()
    return out


def array_getitem(x: Buffer, key) -> Buffer:
    """``x[key]`` where key is (or is a tuple of only) one array: a boolean mask, or integer
    indices along the first axis (any shape: the result is idx.shape + x.shape[1:])."""
    k = key_array(x, key)
    if DTYPES[k.dtype].kind == "b":
        return mask_getitem(x, k)
    if x.ndim == 0:
        raise IndexingError("index: a 0-d array takes no integer array index")
    out = take(x, k, 0, where=f"index (integer array {k.shape})")
    return reshape(out, tuple(k.shape) + x.shape[1:])


def key_array(x: Buffer, key) -> Buffer:
    """The one array of an index, or an IndexingError saying what array indices can be."""
    items = key if isinstance(key, tuple) else (key,)
    arrays = [k for k in items if isinstance(k, Buffer)]
    if len(items) != 1 or len(arrays) != 1:
        raise IndexingError(
            f"index {_describe(key)}: an array index must be the sole index (a boolean mask "
            f"of the leading dimensions, or integer indices along the first axis); index "
            f"other axes with take(), or combine slices and arrays in two steps")
    check_buffer(arrays[0], "index")
    kind = DTYPES[arrays[0].dtype].kind
    if kind not in "biu":
        raise IndexingError(f"index: a {arrays[0].dtype} array; array indices are boolean "
                            f"masks or integers")
    return arrays[0]


def _describe(key) -> str:
    items = key if isinstance(key, tuple) else (key,)
    return "(" + ", ".join(f"array {k.shape}" if isinstance(k, Buffer) else repr(k)
                           for k in items) + ")"


def scatter(where: str, x: Buffer, idx: Buffer, n: int, value: Buffer, vscalar: bool,
            checked: bool) -> None:
    """Rows ``idx`` (of ``n``, each of x's size / n elements) of ``x``'s memory written from
    ``value`` (rows of x's row size, or one element where ``vscalar``)."""
    root = x._base if x._base is not None else x
    if DTYPES[root.dtype].itemsize != DTYPES[x.dtype].itemsize:
        raise ArgumentError(f"{where}: this array is a view of a {root.dtype} buffer as "
                            f"{x.dtype}; assign into the buffer itself")
    inner = x.size // n if n else 0
    params = {"n": n, "inner": inner, "off": x._offset // DTYPES[x.dtype].itemsize,
              "vscalar": vscalar}
    if checked:
        checked_run(where, idx, n, None, [], root, {}, "axis 0")
    if idx.size and inner:
        enqueue(SCATTER, [value, idx], root, params)


def _scalar(where: str, value, dt) -> np.ndarray:
    """A Python number as one element of ``dt``, converted exactly (or refused)."""
    if dt.kind == "b":
        if not isinstance(value, (bool, np.bool_)):
            raise DtypeError(f"{where}: {value!r} into a bool array; assign True or False")
        return np.array([bool(value)])
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    try:
        return convert_exact(np.atleast_1d(np.asarray(value)), dt, where)
    except DtypeError:
        kind = "value" if dt.kind in "fc" else "integer"
        raise DtypeError(f"{where}: {value!r} is not an {dt.name} {kind}; an array keeps its "
                         f"dtype (convert the value, or the array with astype())") from None


def value_buffer(where: str, x: Buffer, value) -> tuple[Buffer, bool]:
    """An assigned value as a buffer of x's dtype on x's device, and whether it is one
    scalar (uploaded: a Python number, converted exactly)."""
    dt = DTYPES[x.dtype]
    if isinstance(value, Buffer):
        check_buffer(value, "value")
        _same_device(where, ("the array", x), ("value", value))
        if value.dtype != dt:
            if not exact_by_type(value.dtype.name, dt.name):
                raise DtypeError(f"{where}: value is {value.dtype} and the array {dt.name}; "
                                 f"{value.dtype} values do not all fit {dt.name} (convert "
                                 f"with astype() first)")
            value = widen(value, dt)
        root = x._base if x._base is not None else x
        vroot = value._base if value._base is not None else value
        if vroot is root:  # the value overlaps the array: read it before writing
            value = broadcast_copy(value, value.shape, "value", always=True)
        return value, False
    if isinstance(value, (bool, np.bool_, int, float, complex, np.integer, np.floating,
                          np.complexfloating)):
        return from_numpy(_scalar(where, value, dt), label="value", device=x.device), True
    raise ArgumentError(f"{where}: value must be an array of this device or a Python "
                        f"number, got {type(value).__name__} (make it a buffer first)")
