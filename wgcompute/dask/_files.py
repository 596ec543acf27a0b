"""Files spread over a Dask cluster: every worker reads its files, runs the work through its
own stream_map and writes each result atomically; what a dead worker left is done again."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import numpy as np

import wgcompute as wgc

from ._work import Work, work
from ._worker import run_chunk

__all__ = ["map_files", "connect"]


def _file_task(w: Work, load, save, src, dest):
    data = load(src)
    return tuple(np.shape(data)), save(run_chunk(w, data), dest)


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None, *, setup: bool = True,
            **cluster_kwargs):
    """A distributed.Client: to the scheduler at ``scheduler`` (tcp://host:8786), or to a
    new wgc.dask.LocalCluster of ``workers`` worker processes (None: one per usable
    adapter), closed on leaving the block. On a scheduler's cluster, ``setup`` registers
    wgc.dask.worker_setup() first: every worker (and every one that joins later) is pinned to
    one adapter, opens it at once and gets the GPU=1 resource, as a LocalCluster's are."""
    import distributed

    from ._cluster import LocalCluster

    if scheduler is not None and workers is not None:
        raise wgc.ArgumentError("workers: give either workers (a local cluster) or scheduler "
                                "(an existing one), not both")
    if scheduler is not None:
        _check_address(scheduler)
        try:
            client = distributed.Client(scheduler, timeout="30s")
        except ValueError as e:  # an address distributed reads otherwise than the check
            raise wgc.ArgumentError(f"scheduler: {scheduler!r} is not a Dask scheduler's "
                                    f"address ({e})") from e
        except OSError as e:
            raise wgc.DeviceError(f"scheduler: cannot reach a Dask scheduler at {scheduler!r} "
                                  f"({e})") from e
        with client:
            if setup:
                from ._worker import WorkerSetup

                client.register_plugin(WorkerSetup())
            yield client
        return
    with LocalCluster(workers, **cluster_kwargs) as cluster, cluster.get_client() as client:
        yield client


def _check_address(scheduler) -> None:
    """Refuse what is no address before distributed.Client (which raises a bare ValueError
    and leaves a client behind): a known scheme, and a host with a port in 1..65535."""
    from distributed.comm import get_address_host_port, parse_address

    expected = "expected an address like tcp://host:8786"
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise wgc.ArgumentError(f"scheduler: {expected}, got {scheduler!r}")
    try:
        scheme, _ = parse_address(scheduler)
        if scheme == "inproc":  # a scheduler in this process: no host and port
            return
        host, port = get_address_host_port(scheduler)
    except ValueError as e:
        raise wgc.ArgumentError(f"scheduler: {expected}, got {scheduler!r} ({e})") from None
    if not host or not 0 < port < 65536:
        raise wgc.ArgumentError(f"scheduler: {expected} (a host and a port in 1..65535), got "
                                f"{scheduler!r}")


def map_files(work_, sources, dests, *, load: Callable, save: Callable, client,
              progress: Callable | None = None, cleanup: Callable | None = None,
              params: dict | None = None, like=None):
    """Run ``work_`` on every file of ``sources`` across the workers of ``client``: a task per
    file does ``save(result, dest)`` with result = the work on ``load(source)``, on the
    worker's GPU (its stream_map overlaps the files it holds at once). ``save`` must write
    atomically (e.g. wgc.image.write_file). A task whose worker died is run again elsewhere
    by Dask; ``cleanup(dest)`` is then called for every destination, on this machine, to
    remove what an interrupted save left. ``progress(ok)`` is called as each file finishes.

    Returns (results, failures): results[i] is (the loaded input's shape, what ``save``
    returned) for file i, or None if it failed; failures a list of (source, message)."""
    import distributed

    sources, dests = list(sources), list(dests)
    if len(sources) != len(dests):
        raise wgc.ArgumentError(f"dests: {len(dests)} destinations for {len(sources)} sources")
    w = work(work_, params, like=like)
    token = w.digest()[:16]
    stamp = time.monotonic_ns()
    futures = {}
    for i, (src, dest) in enumerate(zip(sources, dests)):
        f = client.submit(_file_task, w, load, save, src, dest, pure=False,
                          key=f"wgcompute-file-{token}-{stamp}-{i}")
        futures[f] = i
    results = [None] * len(sources)
    failures = []
    try:
        for f in distributed.as_completed(list(futures)):
            i = futures[f]
            try:
                results[i] = f.result()
                ok = True
            except Exception as e:  # one file's failure must not stop the others
                failures.append((sources[i], f"{type(e).__name__}: {e}"))
                ok = False
            if progress is not None:
                progress(ok)
    finally:
        for f in futures:
            f.release()
        if cleanup is not None:
            for dest in dests:
                cleanup(dest)
    failures.sort(key=lambda x: sources.index(x[0]))
    return results, failures
