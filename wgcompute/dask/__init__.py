"""wgcompute on a Dask cluster: work that travels as a recipe, one worker process per GPU,
map_blocks / map_overlap / reductions over dask arrays, and files spread over workers.

Needs the optional extra: ``pip install 'wgcompute[dask]'`` (dask and distributed)."""

from __future__ import annotations

try:  # a MissingExtraError naming the extra, before anything else
    import dask.array  # noqa: F401
    import distributed  # noqa: F401
except ImportError as _e:
    from .._extras import missing

    _top = "distributed" if (_e.name or "").startswith("distributed") else "dask"
    raise missing(_top, "wgc.dask", _e) from _e

from ._arrays import map_blocks, map_overlap, reduce_max, reduce_mean, reduce_min, reduce_sum
from ._model import ModelKind, ModelRecipe  # noqa: F401 - registers the model kind
from ._sources import from_files, from_function
from ._work import Work, WorkKind, register_work_kind, work, work_kinds
from ._worker import (
    WorkerSetup,
    close_lanes,
    pin_device,
    pinned_adapter,
    run_chunk,
    stats,
    usable_adapters,
    worker_setup,
)

sum = reduce_sum  # noqa: A001 - wgc.dask.sum, as wgc.sum
max = reduce_max  # noqa: A001
min = reduce_min  # noqa: A001
mean = reduce_mean

__all__ = ["LocalCluster", "worker_setup", "WorkerSetup", "usable_adapters", "pin_device",
           "pinned_adapter", "map_blocks", "map_overlap", "sum", "max", "min", "mean",
           "reduce_sum", "reduce_max", "reduce_min", "reduce_mean", "Work", "WorkKind", "work",
           "register_work_kind", "work_kinds", "map_files", "connect", "close_lanes", "stats",
           "run_chunk", "from_function", "from_files"]


def __getattr__(name: str):
    # distributed (the cluster and file parts) is imported on first use: map_blocks and
    # the reductions also run on dask's local schedulers without it
    if name == "LocalCluster":
        from ._cluster import LocalCluster

        return LocalCluster
    if name in ("map_files", "connect"):
        from . import _files

        return getattr(_files, name)
    raise AttributeError(f"module 'wgcompute.dask' has no attribute {name!r}")
