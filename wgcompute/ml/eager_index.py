"""The interpreter's indexing and shape-making operators: Expand, Tile, Split, Range, CumSum,
Pad, TopK, the gathers and scatters, Trilu, OneHot, NonZero, Depth/SpaceToDepth, Compress,
EyeLike, CenterCropPad, ReverseSequence, on the array namespace's functions."""

from __future__ import annotations

import math

import numpy as np

from .. import array_api as xp
from .._gather import checked_run
from .._lazy import tracing
from ..buffer import Buffer
from ..errors import IndexingError, ModelError
from ..kernels.gather.scatter_reduce import DTYPE_NAMES, SCATTER_REDUCE
from .eager import HOST_FOLD_ELEMENTS, dtype_of_onnx, eager
from .eager_args import back, const, ints, scalar, work


def index_dtype(ctx):
    """ONNX's int64 indices: s64 where the adapter has it (read back as int64 either way)."""
    return xp.int64 if ctx.device.has("shader-int64") else xp.int32


def axis_of(ctx, node, axis: int, rank: int, what: str = "axis") -> int:
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise ctx.fail(node, f"{what} {axis} is out of range for a rank-{rank} input")
    return axis % max(rank, 1)


def _index_buffer(ctx, node, v, what: str) -> Buffer:
    b = ctx.buffer(v, what)
    if b.dtype.kind not in "iu":
        raise ctx.fail(node, f"{what} is {b.dtype}; expected an integer tensor")
    return b


# -- shape-making ----------------------------------------------------------------------------
@eager("Expand")
def _expand(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    shape = ints(ctx, node, ins[1], "shape")
    try:
        out = np.broadcast_shapes(x.shape, tuple(shape))
    except ValueError:
        raise ctx.fail(node, f"input {x.shape} does not broadcast with shape {shape}") \
            from None
    return [xp.broadcast_to(x, out)]


@eager("Tile")
def _tile(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    reps = ints(ctx, node, ins[1], "repeats")
    if len(reps) != x.ndim or min(reps, default=0) < 0:
        raise ctx.fail(node, f"repeats {reps} must be {x.ndim} non-negative ints")
    return [xp.tile(x, tuple(reps))]


def _split_sizes(ctx, node, ins, n: int) -> list[int]:
    outs = len(node.outputs)
    split = ctx.attr(node, "split")
    if len(ins) > 1 and ins[1] is not None:
        split = ints(ctx, node, ins[1], "split")
    if split is not None and len(split):
        if len(split) != outs or sum(split) != n or min(split) < 0:
            raise ctx.fail(node, f"split {list(split)} must be {outs} sizes summing to {n}")
        return [int(s) for s in split]
    parts = int(ctx.attr(node, "num_outputs", outs))
    if parts != outs:
        raise ctx.fail(node, f"num_outputs is {parts} but the node has {outs} outputs")
    chunk = -(-n // parts)
    if ctx.attr(node, "num_outputs") is None and n % parts:
        raise ctx.fail(node, f"axis of {n} does not split into {parts} equal parts")
    return [max(0, min(chunk, n - i * chunk)) for i in range(parts)]


@eager("Split")
def _split(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", 0)), x.ndim)
    outs, start = [], 0
    for size in _split_sizes(ctx, node, ins, x.shape[axis]):
        key = (slice(None),) * axis + (slice(start, start + size),)
        outs.append(xp.asarray(x[key], copy=True))
        start += size
    return outs


@eager("Range")
def _range(ctx, node, ins):
    start, limit, delta = (scalar(ctx, node, v, w) for v, w in zip(
        ins, ("start", "limit", "delta"), strict=True))
    dt = np.asarray(start).dtype
    if delta == 0:
        raise ctx.fail(node, "delta is 0")
    n = max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)
    return [(start + np.arange(n, dtype=dt) * delta).astype(dt)]


@eager("CumSum", "CumProd")
def _cumsum(ctx, node, ins):
    x0 = ctx.buffer(ins[0], "x")
    x = work(x0)  # float16 sums in float32
    axis = axis_of(ctx, node, int(scalar(ctx, node, ins[1], "axis")), x.ndim)
    exclusive, reverse = int(ctx.attr(node, "exclusive", 0)), int(ctx.attr(node, "reverse", 0))
    if reverse:
        x = xp.flip(x, axis=axis)
    scan = xp.cumulative_sum if node.op == "CumSum" else xp.cumulative_prod
    y = scan(x, axis=axis, dtype=x.dtype, include_initial=bool(exclusive))
    if exclusive:
        y = y[(slice(None),) * axis + (slice(0, x.shape[axis]),)]
    if reverse:
        y = xp.flip(y, axis=axis)
    return [back(xp.asarray(y, copy=True) if y._base is not None else y, x0)]


def _pads(ctx, node, ins, rank: int) -> list[tuple[int, int]]:
    if ctx.opset < 11:
        pads = [int(p) for p in ctx.attr(node, "pads", ctx.attr(node, "paddings", []))]
    else:
        pads = ints(ctx, node, ins[1], "pads")
    axes = list(range(rank))
    if ctx.opset >= 18 and len(ins) > 3 and ins[3] is not None:
        axes = [axis_of(ctx, node, a, rank, "axes") for a in ints(ctx, node, ins[3], "axes")]
    if len(pads) != 2 * len(axes):
        raise ctx.fail(node, f"pads {pads} must hold 2 values for each of {len(axes)} axes")
    both = [(0, 0)] * rank
    for i, a in enumerate(axes):
        both[a] = (pads[i], pads[i + len(axes)])
    return both


def _pad_positions(mode: str, n: int, begin: int, end: int) -> np.ndarray:
    """The source index of each output position along one axis (edge, reflect, wrap)."""
    i = np.arange(-begin, n + end)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return i % n
    if n == 1:
        return np.zeros_like(i)
    period = 2 * (n - 1)
    i = i % period
    return np.where(i < n, i, period - i)


@eager("Pad")
def _pad(ctx, node, ins):
    x = ctx.buffer(ins[0], "data")
    mode = ctx.attr(node, "mode", "constant")
    pads = _pads(ctx, node, ins, x.ndim)
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.fail(node, f"mode is {mode!r}; expected constant, reflect, edge or wrap")
    # negative pads crop first (the other modes then pad the cropped tensor)
    x = x[tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(x.shape, pads,
                                                                         strict=True))]
    pads = [(max(b, 0), max(e, 0)) for b, e in pads]
    if mode != "constant":
        for axis, (b, e) in enumerate(pads):
            if (b or e) and x.shape[axis] == 0:
                raise ctx.fail(node, f"{mode} padding of an empty axis {axis}")
            if b or e:
                pos = _pad_positions(mode, x.shape[axis], b, e).astype(np.int32)
                x = xp.take(x, ctx.buffer(pos), axis=axis)
        return [x]
    value = ctx.attr(node, "value", 0.0)
    if ctx.opset >= 11 and len(ins) > 2 and ins[2] is not None:
        value = scalar(ctx, node, ins[2], "constant_value")
    shape = tuple(n + b + e for n, (b, e) in zip(x.shape, pads, strict=True))
    fill = const(ctx, _python(value, x.dtype), x.dtype)
    out = xp.asarray(xp.broadcast_to(fill, shape), copy=True)
    if x.size:
        out[tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, pads, strict=True))] = x
    return [out]


def _python(value, dt):
    """A host number as the Python scalar the namespace takes for dtype ``dt``."""
    v = np.asarray(value).reshape(-1)[0]
    return bool(v) if dt.kind == "b" else int(v) if dt.kind in "iu" else float(v)


# -- sorting and gathers ---------------------------------------------------------------------
_SORTED = ("f32", "f64", "f16", "s32", "s64", "u32", "u8")


@eager("TopK")
def _topk(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    k = int(ctx.attr(node, "k", 0)) if ctx.opset < 10 else int(scalar(ctx, node, ins[1], "K"))
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", -1)), x.ndim)
    if not 0 <= k <= x.shape[axis]:
        raise ctx.fail(node, f"K is {k}; expected 0..{x.shape[axis]} (the axis' length)")
    if x.dtype.name not in _SORTED:
        raise ctx.fail(node, f"X is {x.dtype}; TopK sorts {', '.join(_SORTED)}")
    largest = bool(ctx.attr(node, "largest", 1))
    order = xp.argsort(x, axis=axis, descending=largest, stable=True)
    idx = xp.asarray(order[(slice(None),) * axis + (slice(0, k),)], copy=True)
    return [xp.take_along_axis(x, idx, axis=axis), xp.astype(idx, index_dtype(ctx))]


@eager("GatherElements")
def _gather_elements(ctx, node, ins):
    x = ctx.buffer(ins[0], "data")
    idx = _index_buffer(ctx, node, ins[1], "indices")
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", 0)), x.ndim)
    if idx.ndim != x.ndim or any(i > d for a, (i, d) in enumerate(zip(idx.shape, x.shape,
                                                                        strict=True))
                                 if a != axis):
        raise ctx.fail(node, f"indices {idx.shape} must have data's rank and fit data "
                             f"{x.shape} but along axis {axis}")
    crop = tuple(slice(None) if a == axis else slice(0, i) for a, i in enumerate(idx.shape))
    return [xp.take_along_axis(x[crop], idx, axis=axis)]


def check_coords(ctx, node, idx: Buffer, dims: tuple) -> None:
    """Refuse (IndexingError) an index of ``idx`` outside -d..d-1 of its dimension, ``dims``
    matching idx's last axis (or one size for all): one truth value read back."""
    hi = ctx.buffer(np.asarray(dims, dtype=idx.dtype.numpy))
    if idx.size == 0:
        return
    bad = xp.any(xp.logical_or(idx < -hi, idx >= hi))
    cap = tracing(ctx.device)
    if cap is not None:  # a trace (a replayed model): read after the run, with every replay's
        cap.defer(bad, lambda v: _coords_error(ctx, node, idx, dims) if v else None)
        return
    if bool(bad):
        raise _coords_error(ctx, node, idx, dims)


def _coords_error(ctx, node, idx: Buffer, dims: tuple) -> IndexingError:
    a = idx.to_numpy()
    d = np.broadcast_to(np.asarray(dims), a.shape)
    k = int(np.flatnonzero((a < -d) | (a >= d))[0])
    return IndexingError(f"{ctx.graph.name}: node {node.op} {node.name!r}: index "
                         f"{a.reshape(-1)[k]} (element {k} of the indices) is out of range "
                         f"for a dimension of size {d.reshape(-1)[k]}")


def _flat_positions(ctx, node, idx: Buffer, dims: tuple) -> Buffer:
    """The row-major position in ``dims`` of each last-axis tuple of ``idx`` (negative
    entries count from the end), as int32 or int64 (..., ) of idx's leading shape."""
    q = len(dims)
    strides = [math.prod(dims[j + 1:]) for j in range(q)]
    dt = idx.dtype
    sizes = ctx.buffer(np.asarray(dims, dtype=dt.numpy))
    st = ctx.buffer(np.asarray(strides, dtype=dt.numpy))
    fixed = xp.where(idx < xp.zeros((), dtype=dt, device=idx.device), idx + sizes, idx)
    return xp.sum(fixed * st, axis=-1, dtype=dt)


def _nd_parts(ctx, node, x: Buffer, idx: Buffer, b: int):
    """(B, K, q, M, row shape, positions (B*K,)) of GatherND / ScatterND's indices."""
    q = idx.shape[-1] if idx.ndim else 0
    if idx.ndim < 1 or b + q > x.ndim or x.shape[:b] != idx.shape[:b]:
        raise ctx.fail(node, f"indices {idx.shape} do not index data {x.shape} with "
                             f"batch_dims {b}")
    dims = x.shape[b:b + q]
    check_coords(ctx, node, idx, dims)
    batch, m = math.prod(x.shape[:b]), math.prod(dims)
    k = math.prod(idx.shape[b:-1])
    pos = _flat_positions(ctx, node, xp.reshape(idx, (batch, k, q)), dims) if q else \
        xp.zeros((batch, k), dtype=idx.dtype, device=idx.device)
    if batch > 1:
        base = np.arange(batch, dtype=idx.dtype.numpy).reshape(batch, 1) * m
        pos = pos + ctx.buffer(base)
    return batch, k, m, x.shape[b + q:], xp.reshape(pos, (batch * k,))


@eager("GatherND")
def _gather_nd(ctx, node, ins):
    x = ctx.buffer(ins[0], "data")
    idx = _index_buffer(ctx, node, ins[1], "indices")
    b = int(ctx.attr(node, "batch_dims", 0))
    batch, _, m, rest, pos = _nd_parts(ctx, node, x, idx, b)
    rows = xp.reshape(x, (batch * m, math.prod(rest)))
    out = xp.take(rows, pos, axis=0)
    return [xp.reshape(out, idx.shape[:-1] + rest)]


def _reduction(ctx, node) -> str:
    red = ctx.attr(node, "reduction", "none")
    if red not in ("none", "add", "mul", "max", "min"):
        raise ctx.fail(node, f"reduction is {red!r}; expected none, add, mul, max or min")
    return red


def _scatter_rows(ctx, node, data: Buffer, pos: Buffer, rows: Buffer, red: str) -> Buffer:
    """A copy of ``data`` (n, inner) with row pos[j] combined with rows[j] by ``red``."""
    out = xp.asarray(data, copy=True)
    if pos.size == 0 or out.size == 0:
        return out
    if red == "none":
        out[pos] = rows
        return out
    if out.dtype.name not in DTYPE_NAMES:
        raise ctx.fail(node, f"reduction {red!r} of {out.dtype} tensors; wgcompute combines "
                             f"{', '.join(DTYPE_NAMES)}")
    if pos.dtype not in ("s32", "s64"):
        pos = xp.astype(pos, xp.int32)
    return checked_run(f"{node.op} {red}", pos, out.shape[0], SCATTER_REDUCE[red],
                       [rows, pos], out, {"inner": out.size // out.shape[0]}, "axis 0")


@eager("ScatterND")
def _scatter_nd(ctx, node, ins):
    x = ctx.buffer(ins[0], "data")
    idx = _index_buffer(ctx, node, ins[1], "indices")
    upd = ctx.buffer(ins[2], "updates")
    red = _reduction(ctx, node)
    _, k, m, rest, pos = _nd_parts(ctx, node, x, idx, 0)
    inner = math.prod(rest)
    if upd.shape != idx.shape[:-1] + rest or upd.dtype != x.dtype:
        raise ctx.fail(node, f"updates is {upd.dtype} {upd.shape}; expected {x.dtype} "
                             f"{idx.shape[:-1] + rest}")
    out = _scatter_rows(ctx, node, xp.reshape(x, (m, inner)), pos,
                        xp.reshape(upd, (k, inner)), red)
    return [xp.reshape(out, x.shape)]


@eager("ScatterElements", "Scatter")
def _scatter_elements(ctx, node, ins):
    x = ctx.buffer(ins[0], "data")
    idx = _index_buffer(ctx, node, ins[1], "indices")
    upd = ctx.buffer(ins[2], "updates")
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", 0)), x.ndim)
    return [scatter_along(ctx, node, x, idx, upd, axis, _reduction(ctx, node))]


def scatter_along(ctx, node, x: Buffer, idx: Buffer, upd: Buffer, axis: int, red: str):
    """A copy of ``x`` with each element of ``upd`` put (or combined by ``red``) at its own
    coordinates but ``idx`` (checked) along ``axis``."""
    if idx.shape != upd.shape or idx.ndim != x.ndim or upd.dtype != x.dtype or any(
            i > d for a, (i, d) in enumerate(zip(idx.shape, x.shape, strict=True))
            if a != axis):
        raise ctx.fail(node, f"indices {idx.shape} and updates {upd.dtype} {upd.shape} must "
                             f"match each other and fit data {x.dtype} {x.shape}")
    # each element's flat position in data: its own coordinates, but idx along the axis
    strides = [math.prod(x.shape[a + 1:]) for a in range(x.ndim)]
    grid = np.indices(idx.shape, dtype=np.int64) if idx.size else np.zeros((x.ndim, 0))
    base = sum(grid[a] * strides[a] for a in range(x.ndim) if a != axis)
    n = x.shape[axis]
    check_coords(ctx, node, idx, n)
    dt = idx.dtype
    fixed = xp.where(idx < xp.zeros((), dtype=dt, device=idx.device), idx + n, idx)
    pos = fixed * strides[axis] + ctx.buffer(np.asarray(base, dtype=dt.numpy).reshape(
        idx.shape))
    out = _scatter_rows(ctx, node, xp.reshape(x, (x.size, 1)), xp.reshape(pos, (pos.size,)),
                        xp.reshape(upd, (upd.size, 1)), red)
    return xp.reshape(out, x.shape)


@eager("TensorScatter")
def _tensor_scatter(ctx, node, ins):
    """A cache with ``update`` written along ``axis`` from each batch's write index (wrapping
    around in circular mode)."""
    cache, upd = ctx.buffer(ins[0], "past_cache"), ctx.buffer(ins[1], "update")
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", -2)), cache.ndim)
    mode = ctx.attr(node, "mode", "linear")
    if mode not in ("linear", "circular") or axis == 0 or upd.ndim != cache.ndim:
        raise ctx.fail(node, f"mode {mode!r}, axis {axis}, cache {cache.shape}, update "
                             f"{upd.shape}: expected linear or circular along an axis after "
                             f"the batch")
    it = index_dtype(ctx)
    if len(ins) > 2 and ins[2] is not None:
        start = ctx.buffer(ins[2], "write_indices")
        start = start if start.dtype == it else xp.astype(start, it)
    else:
        start = xp.zeros((cache.shape[0],), dtype=it, device=cache.device)
    shape = tuple(upd.shape[0] if a == 0 else 1 for a in range(upd.ndim))
    steps = tuple(upd.shape[axis] if a == axis else 1 for a in range(upd.ndim))
    idx = xp.reshape(start, shape) + xp.reshape(
        xp.arange(upd.shape[axis], dtype=it, device=cache.device), steps)
    if mode == "circular":
        idx = xp.remainder(idx, cache.shape[axis])
    return [scatter_along(ctx, node, cache, xp.broadcast_to(idx, upd.shape), upd, axis,
                          "none")]


# -- masks, one-hots, positions --------------------------------------------------------------
@eager("Trilu")
def _trilu(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    if x.ndim < 2:
        raise ctx.fail(node, f"input is {x.shape}; Trilu needs at least 2 dimensions")
    k = int(scalar(ctx, node, ins[1], "k")) if len(ins) > 1 and ins[1] is not None else 0
    upper = bool(ctx.attr(node, "upper", 1))
    return [xp.triu(x, k=k) if upper else xp.tril(x, k=k)]


@eager("OneHot")
def _one_hot(ctx, node, ins):
    idx = ctx.buffer(ins[0], "indices")
    depth = int(scalar(ctx, node, ins[1], "depth"))
    values = ctx.buffer(ins[2], "values")
    if values.size != 2 or depth < 0:
        raise ctx.fail(node, f"values has {values.size} elements and depth is {depth}; "
                             f"expected [off, on] and depth >= 0")
    axis = axis_of(ctx, node, int(ctx.attr(node, "axis", -1)), idx.ndim + 1)
    it = index_dtype(ctx)
    i = xp.astype(idx, it) if idx.dtype != it else idx
    i = xp.where(i < xp.zeros((), dtype=it, device=i.device), i + depth, i)
    pos = xp.reshape(xp.arange(depth, dtype=it, device=i.device),
                     tuple(depth if a == axis else 1 for a in range(idx.ndim + 1)))
    hot = xp.equal(xp.expand_dims(i, axis=axis), pos)
    v = xp.reshape(values, (2,))
    off, on = xp.reshape(v[0:1], ()), xp.reshape(v[1:2], ())
    return [xp.where(hot, on, off)]


def _check_unique(node, opset):
    if node.attrs.get("axis") is not None:
        return "Unique along an axis (unique sub-tensors); wgcompute finds unique elements"
    return None


@eager("Unique", check=_check_unique)
def _unique(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    r = xp.unique_all(xp.reshape(x, (x.size,)))  # sorted, first occurrences
    values, first, inverse, counts = r.values, r.indices, r.inverse_indices, r.counts
    if not int(ctx.attr(node, "sorted", 1)):  # in the order of their first occurrence
        order = xp.argsort(first, stable=True)
        values, first, counts = (xp.take(v, order) for v in (values, first, counts))
        inverse = xp.take(xp.argsort(order, stable=True), inverse)
    it = index_dtype(ctx)
    return [values, *(xp.astype(v, it) for v in (first, inverse, counts))]


@eager("NonZero")
def _nonzero(ctx, node, ins):
    x = ctx.buffer(ins[0], "X")
    if x.ndim == 0:
        x = xp.reshape(x, (1,))
    coords = xp.nonzero(x)
    return [xp.astype(xp.stack(coords), index_dtype(ctx))]


@eager("Compress")
def _compress(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    cond = ins[1]
    axis = ctx.attr(node, "axis")
    if axis is None:
        x, axis = xp.reshape(x, (x.size,)), 0
    axis = axis_of(ctx, node, int(axis), x.ndim)
    try:  # known on the host (the usual case): its positions uploaded
        c = np.asarray(ctx.host(node, cond, "condition")).reshape(-1)
        pos = ctx.buffer(np.flatnonzero(c).astype(np.int32))
    except ModelError:  # computed on the GPU: positions found there (their count read back)
        (pos,) = xp.nonzero(xp.reshape(cond, (cond.size,)))
    if pos.size and cond.size > x.shape[axis]:
        raise ctx.fail(node, f"condition has {cond.size} elements, more than the axis' "
                             f"{x.shape[axis]}")
    return [xp.take(x, pos, axis=axis)]


# -- rearrangements --------------------------------------------------------------------------
@eager("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    b = int(ctx.attr(node, "blocksize"))
    if x.ndim != 4 or b <= 0:
        raise ctx.fail(node, f"input is {x.shape} and blocksize {b}; expected (N, C, H, W)")
    n, c, h, w = x.shape
    crd = ctx.attr(node, "mode", "DCR") == "CRD"
    if node.op == "SpaceToDepth":
        if h % b or w % b:
            raise ctx.fail(node, f"H and W of {x.shape} must be multiples of {b}")
        y = xp.permute_dims(xp.reshape(x, (n, c, h // b, b, w // b, b)),
                            (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4))
        return [xp.reshape(y, (n, c * b * b, h // b, w // b))]
    if c % (b * b):
        raise ctx.fail(node, f"C of {x.shape} must be a multiple of {b * b}")
    if crd:
        y = xp.permute_dims(xp.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    else:
        y = xp.permute_dims(xp.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    return [xp.reshape(y, (n, c // (b * b), h * b, w * b))]


@eager("EyeLike")
def _eye_like(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    if x.ndim != 2:
        raise ctx.fail(node, f"input is {x.shape}; EyeLike takes a 2-D tensor")
    elem = ctx.attr(node, "dtype")
    dt = x.dtype if elem is None else ctx.onnx_dtype(int(elem), "dtype")
    k = int(ctx.attr(node, "k", 0))
    eye = np.eye(x.shape[0], x.shape[1], k, dtype=dt.numpy)  # known from the shape alone
    return [eye if eye.size <= HOST_FOLD_ELEMENTS else ctx.buffer(eye)]


@eager("BitCast")
def _bitcast(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    dt = dtype_of_onnx(int(ctx.attr(node, "to")), ctx.device, "to")
    if dt.itemsize != x.dtype.itemsize:
        raise ctx.fail(node, f"to {dt.name} has {dt.itemsize} bytes an element and the input "
                             f"{x.dtype} {x.dtype.itemsize}; BitCast keeps the bits")
    if x.size == 0:
        return [xp.reshape(x, x.shape).view(dt.name)]
    return [xp.asarray(x, copy=True).view(dt.name)]  # (its own memory: views stay views)


# window -> its value at phase t = 2·pi·n / N (N: the size, or size - 1 when symmetric)
_WINDOWS = {
    "HannWindow": lambda t: 0.5 - 0.5 * np.cos(t),
    "HammingWindow": lambda t: 25 / 46 - 21 / 46 * np.cos(t),
    "BlackmanWindow": lambda t: 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t),
}


@eager(*_WINDOWS)
def _window(ctx, node, ins):
    """A window of a size known when the model runs, made on the host (it depends on the
    size alone)."""
    size = int(scalar(ctx, node, ins[0], "size"))
    if size < 0:
        raise ctx.fail(node, f"size is {size}; expected >= 0")
    dt = dtype_of_onnx(int(ctx.attr(node, "output_datatype", 1)), ctx.device,
                       "output_datatype")
    span = size if int(ctx.attr(node, "periodic", 1)) else size - 1
    phase = 2 * np.pi * np.arange(size, dtype=np.float64) / max(span, 1)
    return [_WINDOWS[node.op](phase).astype(dt.numpy)]


@eager("CenterCropPad")
def _center_crop_pad(ctx, node, ins):
    x = ctx.buffer(ins[0], "input_data")
    shape = ints(ctx, node, ins[1], "shape")
    axes = [axis_of(ctx, node, int(a), x.ndim, "axes")
            for a in ctx.attr(node, "axes", range(x.ndim))]
    if len(shape) != len(axes) or min(shape, default=0) < 0:
        raise ctx.fail(node, f"shape {shape} must give one size >= 0 per axis {axes}")
    crop = [slice(None)] * x.ndim
    put = [slice(None)] * x.ndim
    out_shape = list(x.shape)
    for a, size in zip(axes, shape, strict=True):
        n, d = x.shape[a], abs(size - x.shape[a])
        out_shape[a] = size
        if size < n:
            crop[a] = slice(d // 2, d // 2 + size)
        elif size > n:
            put[a] = slice(d // 2, d // 2 + n)
    part = x[tuple(crop)]
    out = xp.asarray(xp.broadcast_to(const(ctx, 0, x.dtype), tuple(out_shape)), copy=True)
    if part.size:
        out[tuple(put)] = part
    return [out]


@eager("ReverseSequence")
def _reverse_sequence(ctx, node, ins):
    x = ctx.buffer(ins[0], "input")
    lens = _index_buffer(ctx, node, ins[1], "sequence_lens")
    b = axis_of(ctx, node, int(ctx.attr(node, "batch_axis", 1)), x.ndim, "batch_axis")
    t = axis_of(ctx, node, int(ctx.attr(node, "time_axis", 0)), x.ndim, "time_axis")
    if b == t or lens.shape != (x.shape[b],):
        raise ctx.fail(node, f"sequence_lens {lens.shape} must hold one length per batch of "
                             f"{x.shape} (batch axis {b}, time axis {t}, not the same)")
    check_coords(ctx, node, lens, x.shape[t] + 1)  # 0..T: as an index of T + 1 positions
    steps = xp.reshape(xp.arange(x.shape[t], dtype=lens.dtype, device=x.device),
                       tuple(x.shape[t] if a == t else 1 for a in range(x.ndim)))
    n = xp.reshape(lens, tuple(x.shape[b] if a == b else 1 for a in range(x.ndim)))
    idx = xp.where(steps < n, n - 1 - steps, steps)
    return [xp.take_along_axis(x, xp.broadcast_to(idx, x.shape), axis=t)]
