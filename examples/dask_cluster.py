"""From one GPU to a Dask cluster: blur an image too big for one chunk, find its edges and
average them per channel, with every chunk computed on the GPU of the worker that holds it.

    python examples/dask_cluster.py [--workers N] [--scheduler ADDRESS] [--size 2048]

Without --scheduler it starts wgc.dask.LocalCluster: one worker process per GPU (or N
workers taking the GPUs in turn). The result is checked against the same filters run on
the whole image in this process, and must be identical to the last bit."""

from __future__ import annotations

import argparse
import time

import dask.array as da
import numpy as np

import wgcompute as wgc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=None, help="local worker processes")
    ap.add_argument("--scheduler", default=None, help="a running cluster's address")
    ap.add_argument("--size", type=int, default=2048, help="image side in pixels")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    image = rng.random((args.size, args.size, 4), dtype=np.float32)
    tile = max(64, args.size // 4)
    with wgc.dask.connect(workers=args.workers, scheduler=args.scheduler) as client:
        workers = len(client.scheduler_info()["workers"])
        # the image goes to the cluster once (da.from_array would embed it in every graph)
        x = da.from_delayed(client.scatter(image), image.shape, image.dtype)
        x = x.rechunk((tile, tile, 4))
        # map_overlap gives each chunk the rows and columns its neighbours hold (the filter's
        # radius), so chunk borders come out exactly as on the whole image
        blurred = wgc.dask.map_overlap("gaussian_blur", x, {"sigma": 2.0, "mode": "reflect"})
        edges = wgc.dask.map_overlap("sobel", blurred)
        mean_edge = wgc.dask.mean(edges, axis=(0, 1))  # per channel: chunk sums, combined
        first = time.perf_counter()
        edges_np, mean_np = da.compute(edges, mean_edge)  # also compiles on each worker
        t0 = time.perf_counter()
        edges_np, mean_np = da.compute(edges, mean_edge)
        dt = time.perf_counter() - t0
        first = t0 - first

    # the same filters on this process's GPU, on the whole image at once
    whole = wgc.image.apply("sobel", wgc.image.apply(
        "gaussian_blur", wgc.from_numpy(image), sigma=2.0, mode="reflect")).to_numpy()
    assert np.array_equal(edges_np, whole), "chunked result differs from the whole image"
    np.testing.assert_allclose(mean_np, whole.mean(axis=(0, 1), dtype=np.float64), rtol=1e-5)
    print(f"{workers} worker(s), {x.npartitions} chunks of {tile}x{tile}x4: "
          f"{args.size * args.size / dt / 1e6:.2f} Mpix/s (first run {first:.2f} s, then "
          f"{dt:.2f} s); mean edge per channel "
          f"{np.round(mean_np, 4).tolist()}; identical to the whole image")
    return 0


if __name__ == "__main__":  # worker processes are spawned: keep the work behind this guard
    raise SystemExit(main())
