"""Dask arrays whose chunks are made or read on the workers (a function of the block's place,
files read per chunk), so that no chunk travels from the client: only the recipe does."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np

import wgcompute as wgc

from ..buffer import normalize_shape
from ..dtypes import dtype as resolve_dtype

__all__ = ["from_function", "from_files"]


def _check_block(out, shape, dt, what: str) -> np.ndarray:
    out = np.asarray(out)
    if out.shape != tuple(shape):
        raise wgc.ShapeError(f"{what}: gave shape {out.shape}; the block is {tuple(shape)}")
    if out.dtype != dt:
        raise wgc.DtypeError(f"{what}: gave dtype {out.dtype}; the array is {dt}")
    return out


def _make_block(fn=None, dt=None, block_info=None):
    loc = block_info[None]["array-location"]
    offset = tuple(a for a, _ in loc)
    shape = tuple(b - a for a, b in loc)
    return _check_block(fn(offset, shape), shape, dt, f"fn at offset {offset}")


def from_function(fn, shape, chunks, dtype, *, name: str | None = None) -> da.Array:
    """A dask array of ``shape`` and ``dtype`` whose every chunk ``fn(offset, block_shape)``
    makes on the worker that computes it (``offset``: the block's first index), checked
    against the block's shape and dtype. The graph holds ``fn`` only: with a cluster, the data
    is made where it is used and never travels from the client. ``fn`` must pickle (a
    module-level function, or any callable through cloudpickle)."""
    if not callable(fn):
        raise wgc.ArgumentError(f"fn: expected a callable fn(offset, shape) -> array, got "
                                f"{type(fn).__name__}")
    shape = normalize_shape(shape, "shape")
    dt = resolve_dtype(dtype, "dtype").numpy
    try:
        chunks = da.core.normalize_chunks(chunks, shape, dtype=dt)
    except (ValueError, TypeError) as e:
        raise wgc.ArgumentError(f"chunks: {chunks!r} does not cut an array of shape {shape} "
                                f"({e})") from None
    token = da.core.tokenize(fn, shape, chunks, dt)
    return da.map_blocks(_make_block, fn=fn, dt=dt, chunks=chunks, dtype=dt,
                         meta=np.empty((0,) * len(shape), dt),
                         name=name or f"wgcompute-from-function-{token}")


def _read(load, paths, shape, dt) -> np.ndarray:
    out = np.empty((len(paths),) + tuple(shape), dt)
    for i, p in enumerate(paths):
        out[i] = _check_block(load(p), shape, dt, f"load({p!r})")
    return out


def from_files(paths, load, shape, dtype, *, per_chunk: int = 1) -> da.Array:
    """A dask array of ``(len(paths),) + shape``: item i is ``load(paths[i])``, read on the
    worker that computes its chunk (``per_chunk`` files to a chunk along axis 0), checked
    against ``shape`` and ``dtype``. The files must be where the workers see them (one
    machine, or a shared file system); only their names travel."""
    paths = [str(p) for p in paths]
    if not paths:
        raise wgc.ArgumentError("paths: expected at least one file")
    if not callable(load):
        raise wgc.ArgumentError(f"load: expected a callable load(path) -> array, got "
                                f"{type(load).__name__}")
    if isinstance(per_chunk, bool) or not isinstance(per_chunk, int) or per_chunk < 1:
        raise wgc.ArgumentError(f"per_chunk: expected a positive int, got {per_chunk!r}")
    shape = normalize_shape(shape, "shape")
    dt = resolve_dtype(dtype, "dtype").numpy
    parts = []
    for i in range(0, len(paths), per_chunk):
        names = paths[i:i + per_chunk]
        task = dask.delayed(_read, pure=True)(load, names, shape, dt,
                                              dask_key_name=f"wgcompute-read-"
                                              f"{da.core.tokenize(load, names, shape, dt)}")
        parts.append(da.from_delayed(task, (len(names),) + shape, dtype=dt,
                                     meta=np.empty((0,) * (1 + len(shape)), dt)))
    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=0)
