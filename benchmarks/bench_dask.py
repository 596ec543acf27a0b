"""wgcompute on a Dask cluster, in one run: a gaussian blur (radius 3) over an f32 (H, W, C)
array in row chunks.

* overhead: one worker on this machine's first GPU. The same chunks through a plain
  wgc.stream_map in this process, through wgc.dask.map_blocks with the input already in the
  worker's memory (results kept there: the GPU path and Dask's scheduling), and the same
  with the results gathered into this process (``.compute()``, what a user's script gets).
* scaling: wgc.dask.map_overlap of the blur (exact chunk borders) with the input made on the
  workers, for each worker count of --workers: a LocalCluster of n workers (one per GPU, or
  sharing the GPUs in turn when there are fewer), results kept on the workers.
* torch (with --peers where torch sees CUDA): the same blur by torch on the same workers,
  each on its own GPU (conv2d per channel, replicate padding), for the scaling case.

Wall clock as the docs tell users to launch the work, medians after a warm-up run.

    python -m benchmarks.bench_dask [--small] [--workers 1,2] [--only overhead,scaling]
                                    [--size H W C] [--rows R] [--repeat N] [--peers]
                                    [--json PATH]

Full-size run on a two-GPU machine: --size 8192 8192 16 --rows 512 --workers 1,2."""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from benchmarks.harness import Results, env_info, median_time

RADIUS, SIGMA = 3, 1.5
PARAMS = {"radius": RADIUS, "sigma": SIGMA, "mode": "clamp"}
_runs = itertools.count()


def nbytes_of(shape) -> int:
    return 2 * 4 * int(np.prod(shape))  # f32 in and out


def overhead(res: Results, shape, rows: int, repeat: int) -> None:
    import dask.array as da
    from distributed import wait

    import wgcompute as wgc

    rng = np.random.default_rng(0)
    full = rng.random(shape, dtype=np.float32)
    chunks = [full[i:i + rows] for i in range(0, shape[0], rows)]
    case = f"blur {shape} f32, {len(chunks)} chunks, 1 worker"
    res.add(case, "wgc.stream_map", median_time(
        lambda: list(wgc.stream_map("gaussian_blur", chunks, params=PARAMS)), repeat),
        nbytes=nbytes_of(shape), note="this process, results in a list")
    want = None
    with wgc.dask.LocalCluster(n_workers=1, adapters=wgc.dask.usable_adapters()[:1]) as cl, \
            cl.get_client() as client:
        x = client.persist(da.from_array(full, chunks=(rows,) + shape[1:]))
        wait(x)
        y = wgc.dask.map_blocks("gaussian_blur", x, PARAMS)

        def on_worker():  # a new graph name each run: nothing is found already computed
            z = client.persist(wgc.dask.map_blocks("gaussian_blur", x, PARAMS,
                                                   name=f"bench-blur-{next(_runs)}"))
            wait(z)
            del z

        res.add(case, "wgc.dask.map_blocks", median_time(on_worker, repeat),
                nbytes=nbytes_of(shape), note="input and results in the worker")
        res.add(case, "wgc.dask.map_blocks .compute()", median_time(y.compute, repeat),
                nbytes=nbytes_of(shape), note="results gathered here")
        got = y.compute()
        want = np.concatenate(list(wgc.stream_map("gaussian_blur", chunks, params=PARAMS)))
        err = float(np.abs(got - want).max())
        for r in res.rows[-3:]:
            r.max_rel_err = err


def _torch_blur(block, index: int):
    """The blur by torch on this worker's GPU (CUDA device = worker index, in turn)."""
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda", index % torch.cuda.device_count())
    d = torch.arange(-RADIUS, RADIUS + 1, dtype=torch.float64)
    w = torch.exp(-d * d / (2 * SIGMA * SIGMA))
    w = (w / w.sum()).float().to(dev)
    c = block.shape[2]
    t = torch.from_numpy(np.ascontiguousarray(block)).to(dev).permute(2, 0, 1)[None]
    t = F.pad(t, (RADIUS, RADIUS, RADIUS, RADIUS), mode="replicate")
    t = F.conv2d(t, w.view(1, 1, 1, -1).repeat(c, 1, 1, 1), groups=c)
    t = F.conv2d(t, w.view(1, 1, -1, 1).repeat(c, 1, 1, 1), groups=c)
    return t[0].permute(1, 2, 0).contiguous().cpu().numpy()


def _torch_block(block, block_info=None):
    from distributed import get_worker

    name = get_worker().name
    return _torch_blur(block, int(name) if str(name).isdigit() else 0)


def scaling(res: Results, shape, rows: int, workers, repeat: int, peers: bool) -> None:
    import dask.array as da
    from distributed import wait

    import wgcompute as wgc

    for n in workers:
        case = f"blur {shape} f32 in {rows}-row chunks, map_overlap"
        with wgc.dask.LocalCluster(n_workers=n) as cl, cl.get_client() as client:
            gpus = len(set(cl.adapters[i % len(cl.adapters)] for i in range(n)))
            x = da.random.default_rng(0).random(shape, dtype=np.float32,
                                                chunks=(rows,) + tuple(shape[1:]))
            x = client.persist(x)  # made on the workers: nothing crosses from here
            wait(x)

            def run(x=x):
                z = client.persist(wgc.dask.map_overlap("gaussian_blur", x, PARAMS,
                                                        name=f"bench-blur-{next(_runs)}"))
                wait(z)
                del z

            res.add(case, f"wgcompute, {n} worker(s) on {gpus} adapter(s)",
                    median_time(run, repeat), nbytes=nbytes_of(shape), group="wgcompute",
                    size=n)
            if peers:
                def run_torch(x=x):
                    z = client.persist(da.map_overlap(
                        _torch_block, x, depth={0: RADIUS, 1: RADIUS, 2: 0},
                        boundary="nearest", dtype=np.float32, name=f"bench-torch-{next(_runs)}"))
                    wait(z)
                    del z

                res.add(case, f"torch, {n} worker(s)", median_time(run_torch, repeat),
                        nbytes=nbytes_of(shape), group="torch", size=n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a size lavapipe finishes quickly")
    ap.add_argument("--size", type=int, nargs=3, metavar=("H", "W", "C"), default=None)
    ap.add_argument("--rows", type=int, default=None, help="rows per chunk")
    ap.add_argument("--workers", default="1,2", help="worker counts for scaling (1,2)")
    ap.add_argument("--only", default="overhead,scaling")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--peers", action="store_true", help="torch on the same workers")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    shape = tuple(args.size) if args.size else ((512, 512, 4) if args.small
                                               else (4096, 4096, 4))
    rows = args.rows or max(1, shape[0] // 16)
    workers = [int(w) for w in args.workers.split(",") if w]
    env = env_info()
    print(f"# bench_dask on {env.get('device', env)}")
    res = Results("wgcompute on a Dask cluster", reference="wgc.stream_map")
    only = set(args.only.split(","))
    if "overhead" in only:
        overhead(res, shape, rows, args.repeat)
    if "scaling" in only:
        scale = Results("wgcompute on a Dask cluster: scaling",
                        reference=f"wgcompute, {workers[0]} worker(s)")
        scaling(scale, shape, rows, workers, args.repeat, args.peers)
        for r in scale.rows:  # one table; each scaling row against the first worker count
            res.rows.append(r)
        base = [r for r in scale.rows if r.group == "wgcompute"]
        for r in base[1:]:
            r.note = f"{base[0].seconds / r.seconds:.2f}x {base[0].impl}"
    print(res.markdown())
    for r in res.rows:
        mpix = shape[0] * shape[1] / r.seconds / 1e6
        print(f"  {r.impl:<40} {r.seconds * 1e3:9.1f} ms  {mpix:9.1f} Mpix/s  {r.note}")
    if args.json:
        res.write_json(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
