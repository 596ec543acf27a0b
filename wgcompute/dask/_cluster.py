"""wgc.dask.LocalCluster: distributed's LocalCluster with one worker process per usable
adapter, each pinned to it through its nanny's environment and given a GPU=1 resource."""

from __future__ import annotations

import copy

import distributed

import wgcompute as wgc

from ._worker import ADAPTER_ENV, WorkerSetup, usable_adapters


class LocalCluster(distributed.LocalCluster):
    """A Dask cluster on this machine with one worker process per usable adapter (every GPU;
    lavapipe or another CPU adapter where there is none), or ``n_workers`` taking the
    adapters in turn. Each worker computes on its own adapter and has a ``GPU=1`` resource.

    ``adapters`` limits the choice (indices of wgc.adapters() or parts of names).
    ``threads_per_worker`` (4) is how many chunks a worker takes at once: they overlap on
    its GPU (upload, compute, download). ``lost_worker_timeout`` (seconds, 120): how long a
    worker whose process died (its nanny starts a new one, which opens its device again) may
    take to come back before the cluster gives its place up; distributed's default, 15 s,
    closed a restarting worker for good on a loaded machine. Other keywords go to
    distributed.LocalCluster. Use it as distributed's: ``with wgc.dask.LocalCluster() as
    cluster, cluster.get_client() as client: ...``."""

    def __init__(self, n_workers: int | None = None, *, adapters=None,
                 threads_per_worker: int = 4, lost_worker_timeout: float = 120.0, **kwargs):
        if isinstance(lost_worker_timeout, bool) or not isinstance(
                lost_worker_timeout, (int, float)) or not 0 < lost_worker_timeout < 1e6:
            raise wgc.ArgumentError(f"lost_worker_timeout: expected seconds (a positive "
                                    f"number), got {lost_worker_timeout!r}")
        self._lost_worker_timeout = float(lost_worker_timeout)
        self._adapters = _choose(adapters)
        if n_workers is None:
            n_workers = len(self._adapters)
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise wgc.ArgumentError(f"n_workers: expected a positive int, got {n_workers!r}")
        if kwargs.get("processes") is False:
            raise wgc.ArgumentError("processes: each worker must be its own process (it holds "
                                    "one device)")
        resources = dict(kwargs.pop("resources", None) or {})
        resources.setdefault("GPU", 1)
        plugins = tuple(kwargs.pop("plugins", ())) + (WorkerSetup(),)
        kwargs.setdefault("dashboard_address", ":0")  # any free port: clusters side by side
        super().__init__(n_workers=0, threads_per_worker=threads_per_worker, processes=True,
                         resources=resources, plugins=plugins, **kwargs)
        self.scale(n_workers)
        self.sync(self._correct_state)

    def new_worker_spec(self):
        # Worker i computes on adapter i of the chosen ones (in turn when there are more
        # workers): the nanny starts (and restarts) its process with that in the environment.
        name = 0
        while name in self.worker_spec:
            name += 1
        spec = copy.deepcopy(self.new_spec)
        adapter = self._adapters[name % len(self._adapters)]
        env = dict(spec["options"].get("env") or {})
        env[ADAPTER_ENV] = str(adapter)
        spec["options"]["env"] = env
        return {name: spec}

    def _update_worker_status(self, op, msg):
        # distributed reads its lost-worker timeout while it schedules the check that closes
        # a worker which has not come back (SpecCluster._update_worker_status)
        import dask

        with dask.config.set({"distributed.deploy.lost-worker-timeout":
                              f"{self._lost_worker_timeout}s"}):
            super()._update_worker_status(op, msg)

    @property
    def adapters(self) -> list[int]:
        """Indices (in wgc.adapters()) of the adapters its workers take in turn."""
        return list(self._adapters)


def _choose(adapters) -> list[int]:
    usable = usable_adapters()
    if not usable:
        raise wgc.DeviceError("no WebGPU adapter found on this machine")
    if adapters is None:
        return usable
    if isinstance(adapters, (int, str)):
        adapters = [adapters]
    found = wgc.adapters()
    out = []
    for a in adapters:
        if isinstance(a, int) and not isinstance(a, bool):
            if not 0 <= a < len(found):
                raise wgc.ArgumentError(f"adapters: {a} is not an index of wgc.adapters() "
                                        f"(0..{len(found) - 1})")
            out.append(a)
        elif isinstance(a, str):
            hits = [i for i in usable if a.lower() in found[i]["name"].lower()]
            if not hits:
                raise wgc.ArgumentError(f"adapters: no usable adapter's name contains {a!r} "
                                        f"(usable: "
                                        f"{', '.join(found[i]['name'] for i in usable)})")
            out.extend(hits)
        else:
            raise wgc.ArgumentError(f"adapters: expected indices or names, got {a!r}")
    return out
