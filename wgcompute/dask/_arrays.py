"""Dask arrays on the GPU: map_blocks and map_overlap run a Work on every chunk (upload, work,
download on the worker's device); sum, max, min and mean reduce each chunk there, then combine."""

from __future__ import annotations

import itertools
import math

import dask.array as da
import numpy as np

import wgcompute as wgc

from ..dtypes import DTYPES
from ..dtypes import dtype as resolve_dtype
from ._work import Work, work
from ._worker import run_chunk

__all__ = ["map_blocks", "map_overlap", "reduce_sum", "reduce_max", "reduce_min", "reduce_mean"]


def _check_array(x, argument: str = "x") -> da.Array:
    if not isinstance(x, da.Array):
        raise wgc.ArgumentError(f"{argument}: expected a dask.array.Array, got "
                                f"{type(x).__name__} (wrap numpy data with "
                                f"dask.array.from_array)")
    try:
        resolve_dtype(x.dtype, argument)
    except wgc.WgComputeError as e:
        raise wgc.DtypeError(f"{argument}: dtype {x.dtype} has no wgcompute dtype (one of "
                             f"{', '.join(d.numpy.name for d in DTYPES.values())})") from e
    return x


def _run_block(block, w: Work):
    return run_chunk(w, block)


def _prepare(work_, x, params, argument="x"):
    x = _check_array(x, argument)
    w = work(work_, params, like=(x.chunksize, resolve_dtype(x.dtype).name))
    if w.image and x.ndim > 2 and any(len(c) > 1 for c in x.chunks[2:]):
        # an image kernel sees axes 2.. as one pixel (its channels): keep them whole
        x = x.rechunk({a: -1 for a in range(2, x.ndim)})
    return w, x


def _out_chunks(w: Work, x: da.Array):
    """Output chunks and dtype: the work's output_spec for every block shape, which must
    line up into a grid (the shapes along an axis depend on the block's index there only)."""
    dt = resolve_dtype(x.dtype).name
    specs = {}
    out_chunks = None
    out_dt = None
    for idx in itertools.product(*(range(len(c)) for c in x.chunks)):
        shape = tuple(x.chunks[a][i] for a, i in enumerate(idx))
        if shape not in specs:
            specs[shape] = w.output_spec(shape, dt)
        oshape, odt = specs[shape]
        if len(oshape) != x.ndim:
            # work that changes the number of dimensions (a classifier: (N, C, H, W) -> (N,
            # classes)) keeps axis 0's blocks and needs the rest whole
            split = [a for a in range(1, x.ndim) if len(x.chunks[a]) > 1]
            if split or not oshape:
                raise wgc.ShapeError(
                    f"work: {w!r} turns a {x.ndim}-d block {shape} into a {len(oshape)}-d "
                    f"{oshape}; map_blocks keeps the number of dimensions, or the first "
                    f"axis's blocks when the other axes are whole (rechunk axes "
                    f"{split or list(range(1, x.ndim))} into one block; wgc.dask.sum, max, "
                    f"min and mean reduce)")
            return _reshaped_chunks(w, x, dt)
        if out_chunks is None:
            out_chunks = [[None] * len(c) for c in x.chunks]
            out_dt = odt
        for a, i in enumerate(idx):
            if out_chunks[a][i] is None:
                out_chunks[a][i] = oshape[a]
            elif out_chunks[a][i] != oshape[a]:
                raise wgc.ShapeError(f"work: {w!r} gives blocks along axis {a} sizes that "
                                     f"depend on the other axes ({out_chunks[a][i]} and "
                                     f"{oshape[a]}); rechunk x so its blocks are alike")
    if out_chunks is None:  # no blocks at all
        return x.chunks, w.output_spec(x.shape, dt)[1]
    return tuple(tuple(c) for c in out_chunks), out_dt


def _reshaped_chunks(w: Work, x: da.Array, dt: str):
    """Chunks of work whose output has other dimensions: axis 0's blocks, then the output's
    other axes whole (the same for every block, checked)."""
    first = []
    rest = None
    odt = None
    for n in x.chunks[0]:
        oshape, odt = w.output_spec((n,) + tuple(x.shape[1:]), dt)
        if rest is None:
            rest = tuple(oshape[1:])
        elif tuple(oshape[1:]) != rest:
            raise wgc.ShapeError(f"work: {w!r} gives blocks of other shapes beyond axis 0 "
                                 f"({rest} and {tuple(oshape[1:])})")
        first.append(oshape[0])
    return (tuple(first),) + tuple((d,) for d in rest), odt


def map_blocks(work, x, params: dict | None = None, *, name: str | None = None) -> da.Array:
    """Run ``work`` on every chunk of the dask array ``x`` on the GPU of the worker that
    holds the chunk: upload, work, download. ``work`` is a kernel name or Kernel of one input
    (run with ``params``), a wgc.Pipeline, a list of steps ``[(kernel, params), ...]`` or a
    callable ``fn(inp, out)`` (see wgc.stream_map). Chunks a worker runs at the same time
    overlap through one wgc.stream_map there. Returns a dask array with the work's output
    chunks and dtype (checked now, without a GPU)."""
    w, x = _prepare(work, x, params)
    chunks, out_dt = _out_chunks(w, x)
    np_dt = DTYPES[out_dt].numpy
    extra = {}
    if len(chunks) != x.ndim:  # axis 0 kept, the others replaced (see _reshaped_chunks)
        extra = {"drop_axis": list(range(1, x.ndim)), "new_axis": list(range(1, len(chunks)))}
    return da.map_blocks(_run_block, x, w, dtype=np_dt, chunks=chunks,
                         meta=np.empty((0,) * len(chunks), np_dt),
                         name=name or f"wgcompute-{w.kind}-{da.core.tokenize(w, x)}", **extra)


def _depth(w: Work, x: da.Array, depth):
    if depth is None:
        halo = w.halo()
        if halo is None:
            raise wgc.ArgumentError(f"depth: wgcompute cannot tell how far {w!r} reads around "
                                    f"each element; pass depth= (an int or a dict axis -> "
                                    f"elements)")
        depth = halo
    if isinstance(depth, (int, np.integer)) and not isinstance(depth, bool):
        depth = {0: int(depth), 1: int(depth)} if w.image else \
            dict.fromkeys(range(x.ndim), int(depth))
    if not isinstance(depth, dict):
        raise wgc.ArgumentError(f"depth: expected an int or a dict axis -> elements, got "
                                f"{depth!r}")
    out = {}
    for a, r in depth.items():
        if not isinstance(a, int) or not -x.ndim <= a < x.ndim:
            raise wgc.ArgumentError(f"depth: axis {a!r} is not an axis of x ({x.ndim}-d)")
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise wgc.ArgumentError(f"depth: axis {a} needs a non-negative int, got {r!r}")
        out[a % x.ndim] = int(r)
    return {a: out.get(a, 0) for a in range(x.ndim)}


def map_overlap(work, x, params: dict | None = None, *, depth=None,
                name: str | None = None) -> da.Array:
    """Like map_blocks for work that reads around each element (blur, sobel, sharpen,
    convolve2d): every chunk is extended by ``depth`` elements of its neighbours, the work
    runs, and the extension is cut off again, so borders between chunks are exact. The
    array's own edges are handled by the work itself (its ``mode``), as on the whole array.
    ``depth`` defaults to the work's radius where wgcompute knows it (image filters: on
    axes 0 and 1); else pass it."""
    w, x = _prepare(work, x, params)
    depth = _depth(w, x, depth)
    dt = resolve_dtype(x.dtype).name
    for shape in {tuple(x.chunks[a][0] for a in range(x.ndim)), x.chunksize}:
        oshape, _ = w.output_spec(tuple(s + 2 * depth[a] for a, s in enumerate(shape)), dt)
        grown = tuple(s + 2 * depth[a] for a, s in enumerate(shape))
        if tuple(oshape) != grown:
            raise wgc.ShapeError(f"work: {w!r} turns a block {grown} into {tuple(oshape)}; "
                                 f"map_overlap needs work that keeps the shape")
    out_dt = w.output_spec(x.chunksize, dt)[1]
    np_dt = DTYPES[out_dt].numpy
    # boundary "none": nothing is added at the array's edges, where the work's own border
    # mode then sees exactly what it sees on the whole array
    return da.map_overlap(_run_block, x, w=w, depth=depth, boundary="none", trim=True,
                          dtype=np_dt, meta=np.empty((0,) * x.ndim, np_dt),
                          name=name or f"wgcompute-overlap-{da.core.tokenize(w, x, depth)}")


# -- reductions --------------------------------------------------------------------------------
_U8_EXACT = (2 ** 32 - 1) // 255  # u8 values summed into u32: exact up to this many


def _gpu_reduce(op: str, block: np.ndarray, axis: tuple, keepdims: bool, out_np,
                acc=None) -> np.ndarray:
    """``op`` of ``block`` over ``axis`` on the GPU: the reduced axes are moved last (a host
    copy unless they are last already) and reduced there in one kernel."""
    axis = tuple(sorted(a % block.ndim for a in axis)) if block.ndim else ()
    kept = [a for a in range(block.ndim) if a not in axis]
    kd_shape = tuple(1 if a in axis else block.shape[a] for a in range(block.ndim))
    n = math.prod(block.shape[a] for a in axis)
    if block.size == 0:
        ref = getattr(np, op)
        return ref(block, axis=axis, keepdims=keepdims).astype(out_np)
    x = block
    if acc is not None:
        x = x.astype(acc, copy=False)
    elif op == "sum" and x.dtype.kind in "iu" and not (x.dtype == np.uint8 and n <= _U8_EXACT):
        # exact like numpy: integers sum in 64 bits (u8 in u32 is exact for small chunks)
        x = x.astype(np.int64)
    if not kept:
        params, x = {"axis": None}, x
    else:
        x = np.moveaxis(x, axis, tuple(range(len(kept), block.ndim))) \
            if kept != list(range(len(kept))) else x
        x = np.ascontiguousarray(x).reshape(tuple(block.shape[a] for a in kept) + (n,))
        params = {"axis": -1}
    r = np.asarray(run_chunk(Work("kernel", op, (("axis", params["axis"]),)), x))
    r = r.astype(out_np, copy=False).reshape(kd_shape)
    return r if keepdims else r.reshape(tuple(block.shape[a] for a in kept))


def _chunk(block, axis=None, keepdims=False, op="sum", out_np=None, acc=None):
    return _gpu_reduce(op, block, axis, keepdims, out_np, acc)


def _combine(x, axis=None, keepdims=False, op="sum", out_np=None):
    return getattr(np, op)(x, axis=axis, keepdims=keepdims).astype(out_np, copy=False)


def _reduction(op: str, x, axis, out_np, split_every, acc=None):
    from functools import partial

    return da.reduction(x, partial(_chunk, op=op, out_np=out_np, acc=acc),
                        partial(_combine, op=op, out_np=out_np), axis=axis, keepdims=False,
                        dtype=out_np, split_every=split_every,
                        combine=partial(_combine, op=op, out_np=out_np),
                        name=f"wgcompute-{op}", meta=np.empty((0,), out_np))


def reduce_sum(x, axis=None, *, split_every=None) -> da.Array:
    """Sum over ``axis`` (None: everything; an int or a tuple), each chunk on the GPU of its
    worker, then the chunks' sums combined. dtypes as numpy's: integers sum exactly in 64
    bits (uint64 for unsigned), floats in their own dtype (the GPU's summation order, so
    within rounding of numpy's); f16 sums in f32 (as numpy's), rounded to f16 at the end."""
    x = _check_array(x)
    out_np = np.sum(np.zeros(1, x.dtype)).dtype
    if x.dtype == np.float16:  # a chunk's or a combined sum past 65504 must not overflow
        return _reduction("sum", x, axis, np.float32, split_every, acc=np.float32) \
            .astype(out_np)
    return _reduction("sum", x, axis, out_np, split_every)


def reduce_max(x, axis=None, *, split_every=None) -> da.Array:
    """Maximum over ``axis`` (None: everything), chunk by chunk on the GPU; same dtype,
    exact. A NaN in the array makes the result NaN, as numpy's max and min do."""
    x = _check_array(x)
    return _reduction("max", x, axis, x.dtype, split_every)


def reduce_min(x, axis=None, *, split_every=None) -> da.Array:
    """Minimum over ``axis`` (None: everything), chunk by chunk on the GPU; same dtype."""
    x = _check_array(x)
    return _reduction("min", x, axis, x.dtype, split_every)


def reduce_mean(x, axis=None, *, split_every=None) -> da.Array:
    """Mean over ``axis`` (None: everything): the GPU sums each chunk, the sums are
    combined and divided by the count. float64 for integers (32-bit and smaller sum exactly
    in 64 bits, 64-bit ones in float64 as numpy does), the dtype itself for floats (an f16
    chunk summed in f32, the chunks' sums combined in float64)."""
    x = _check_array(x)
    if x.dtype.kind == "f":
        # f16 chunks sum in f32 on the GPU (an f16 sum past 65504 is inf)
        acc = np.float32 if x.dtype == np.float16 else None
        total = _reduction("sum", x, axis, np.float64, split_every, acc=acc)
        out_np = x.dtype
    elif x.dtype.itemsize == 8:  # 64-bit sums could wrap: sum as numpy does, in float64
        total = _reduction("sum", x, axis, np.float64, split_every, acc=np.float64)
        out_np = np.dtype(np.float64)
    else:
        total = reduce_sum(x, axis, split_every=split_every)
        out_np = np.dtype(np.float64)
    count = x.size // max(1, total.size) if x.size else 0
    return (total / count).astype(out_np) if count else (total * np.nan).astype(out_np)
