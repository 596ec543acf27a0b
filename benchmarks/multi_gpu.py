"""One device against several, every case in one run, each with one worker process per device
(wall clock after a warm-up run; the processes, the cluster and their devices are started
before the clock runs, as a long job starts them once):

* fma: --batches batches of --size f32, upload -> 64 fused multiply-adds -> download, through
  wgc.stream_map(processes=...) with each worker making its own host batches
  (wgc.load_each), and with the batches handed over from this process (shared memory);
  also the same map in this one process (threads) for reference;
* infer: MobileNetV2 (random weights, f32) at --image-batch over --images JPEG files, each
  worker process decoding its own files (what ``wgcompute infer --devices`` runs);
* dask: a wgc.dask.LocalCluster of one worker per device: the gaussian blur (radius 3)
  map_overlap over a --grid x --grid x --planes f32 array made on the workers
  (wgc.dask.from_function, results kept there), and the same infer over the files
  (``wgcompute infer --scheduler``);
* torch, where it sees CUDA: the fma case and MobileNetV2 (torchvision's, where installed)
  with one process per GPU, each on its own share (a printed reason where it is skipped).

Each case prints the seconds for 1 device and for --devices, and their ratio.

    python -m benchmarks.multi_gpu [--devices 0,1] [--small] [--only fma,infer,dask,torch]
        [--batches 64] [--size 16777216] [--images 8192] [--image-batch 32]
        [--image-size 224] [--grid 8192] [--planes 16] [--chunk 1024] [--repeat 2]
        [--json PATH]

--small runs in seconds on lavapipe (two worker processes on its one adapter)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks.bench_streams import FMA_WGSL, KERNEL, A, B, fma_ref

RADIUS, SIGMA = 3, 1.5
BLUR = {"radius": RADIUS, "sigma": SIGMA, "mode": "clamp"}
_runs = itertools.count()


def register_fma(wgc) -> None:
    if KERNEL not in wgc.kernels():
        wgc.register_kernel(KERNEL, FMA_WGSL, bindings=[("x", "read"), ("out", "read_write"),
                                                        ("p", "uniform")],
                            params={"n": "u32", "a": "f32", "b": "f32"})


class FmaBatch:
    """Batch i of the fma case, made in the process that runs it (kept: a worker's host data
    is ready before the clock runs, as a pinned tensor is for torch)."""

    def __init__(self, n: int):
        self.n = n
        self.made: dict = {}

    def __getstate__(self):
        return {"n": self.n, "made": {}}

    def __call__(self, i: int) -> np.ndarray:
        key = i % 4
        arr = self.made.get(key)
        if arr is None:
            arr = self.made[key] = np.linspace(-1, 1, self.n, dtype=np.float32) + np.float32(key)
        return arr


def field(offset, shape):
    """A block of the dask case's input, made on the worker from its place."""
    rng = np.random.default_rng(abs(hash(tuple(offset))) % (1 << 32))
    return rng.random(shape, dtype=np.float32)


def best_of(fn, repeat: int):
    fn()  # warm: pipelines compiled, staging pinned, lanes started
    best, out = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, out


# -- cases ---------------------------------------------------------------------------------------
def fma_case(wgc, adapters, args, rows):
    register_fma(wgc)
    n, count = args.size, args.batches
    checks = {0: fma_ref(FmaBatch(n)(0)), count - 1: fma_ref(FmaBatch(n)(count - 1))}

    here = FmaBatch(n)
    arrays = [here(i) for i in range(count)]  # 4 arrays, each given count / 4 times

    def run(processes, devices=None, given=False):
        source = arrays if given else wgc.load_each(FmaBatch(n), range(count))
        err = 0.0
        for i, r in enumerate(wgc.stream_map(KERNEL, source, depth=3, params={"a": A, "b": B},
                                             processes=processes, devices=devices)):
            if i in checks:
                err = max(err, float(np.abs(r - checks[i]).max() / np.abs(checks[i]).max()))
            del r
        return err

    case = f"fma: {count} x {n:,} f32, upload -> 64 FMA -> download"
    times = {}
    for k in sorted({1, len(adapters)}):
        with wgc.device_processes(adapters[:k]) as pool:
            t, err = best_of(lambda pool=pool: run(pool), args.repeat)
            times[k] = t
            rows.append(row(case, f"wgcompute, {k} process(es)", t, err, k,
                            gbs=2 * 4 * n * count / t / 1e9))
            t, err = best_of(lambda pool=pool: run(pool, given=True), args.repeat)
            rows.append(row(case, f"wgcompute, {k} process(es), batches from this process "
                            f"(shared memory)", t, err, k, gbs=2 * 4 * n * count / t / 1e9))
    devs = [wgc.device(a, new=True) for a in adapters]
    try:
        t, err = best_of(lambda: run(False, devs), args.repeat)
        rows.append(row(case, f"wgcompute, {len(devs)} device(s) in one process (threads)", t,
                        err, len(devs), gbs=2 * 4 * n * count / t / 1e9))
    finally:
        for d in devs:
            d.close()
    return case, times


def make_images(folder: str, count: int, side: int) -> list[str]:
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
    files = []
    for i in range(count):
        path = os.path.join(folder, f"im{i:05d}.jpg")
        if not os.path.exists(path):
            Image.fromarray(np.roll(base, i * 7, axis=1)).save(path, quality=90)
        files.append(path)
    return files


def infer_case(wgc, adapters, args, rows, files, model_path):
    from wgcompute.cli.infer import IMAGENET_MEAN, IMAGENET_STD, classify_on_devices

    model = wgc.ml.load_onnx(model_path)
    size, batch = args.image_size, args.image_batch
    classes = int(np.prod(model.plan((1, 3, size, size)).output_shape[1:]))
    case = f"infer: MobileNetV2 {size}² batch {batch}, {len(files)} JPEG files"
    times, outs = {}, {}
    for k in sorted({1, len(adapters)}):
        with wgc.device_processes(adapters[:k]) as pool:
            threads = args.threads or max(1, (os.cpu_count() or 2) // k)
            t, (found, failed) = best_of(lambda pool=pool, threads=threads: classify_on_devices(
                files, model, size, classes, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                batch=batch, top=5, progress=False, devices=pool,
                threads=threads),
                args.repeat)
        assert not failed, failed[:3]
        times[k], outs[k] = t, found
        rows.append(row(case, f"wgcompute, {k} process(es)", t, None, k,
                        img_s=len(files) / t))
    if len(outs) == 2:  # the same images classified alike (tuning may pick other kernels)
        a, b = outs.values()
        same = sum(x[1][0][0] == y[1][0][0] for x, y in zip(a, b))
        diff = max(abs(p - q) for x, y in zip(a, b) for (_, p), (_, q) in zip(x[1], y[1]))
        print(f"infer: top-1 the same for {same} of {len(a)} images; top-5 probabilities "
              f"within {diff:.1e}", flush=True)
    return case, times


def dask_cases(wgc, adapters, args, rows, files, model_path):
    from distributed import wait

    from wgcompute.cli.infer import IMAGENET_MEAN, IMAGENET_STD, classify_on_cluster

    shape = (args.grid, args.grid, args.planes)
    chunks = (args.chunk, args.chunk, args.planes)
    model = wgc.ml.load_onnx(model_path)
    size, batch = args.image_size, args.image_batch
    classes = int(np.prod(model.plan((1, 3, size, size)).output_shape[1:]))
    blur_case = f"dask: blur map_overlap over {shape} f32 made on the workers"
    infer_case_ = f"dask: infer MobileNetV2 batch {batch} over {len(files)} files"
    times = {blur_case: {}, infer_case_: {}}
    for k in sorted({1, len(adapters)}):
        with wgc.dask.LocalCluster(n_workers=k, adapters=adapters[:k]) as cl, \
                cl.get_client() as client:
            client.wait_for_workers(k, timeout=300)
            x = client.persist(wgc.dask.from_function(field, shape, chunks, "f32"))
            wait(x)  # made on the workers, before the clock

            def blur(x=x, client=client):
                z = client.persist(wgc.dask.map_overlap(  # a new name: computed again
                    "gaussian_blur", x, BLUR, name=f"bench-blur-{next(_runs)}"))
                wait(z)
                del z

            t, _ = best_of(blur, args.repeat)
            times[blur_case][k] = t
            rows.append(row(blur_case, f"wgcompute, {k} worker(s)", t, None, k,
                            gbs=2 * x.nbytes / t / 1e9))

            def infer(cl=cl):
                return classify_on_cluster(files, model, size, classes, mean=IMAGENET_MEAN,
                                           std=IMAGENET_STD, batch=batch, top=5,
                                           progress=False, scheduler=cl.scheduler_address)

            t, (found, failed) = best_of(infer, args.repeat)
            assert not failed, failed[:3]
            times[infer_case_][k] = t
            rows.append(row(infer_case_, f"wgcompute, {k} worker(s)", t, None, k,
                            img_s=len(files) / t))
            del x
    return times


# -- torch, one process per GPU ------------------------------------------------------------------
def _torch_worker(gpu: int, work: str, args: dict, ready, start, done) -> None:
    import torch

    torch.cuda.set_device(gpu)
    if work == "fma":
        from benchmarks.bench_streams import torch_streams

        n = args["n"]
        batches = [FmaBatch(n)(i) for i in args["items"]]
        run, _ = torch_streams(torch, batches, n)
    else:
        import torchvision

        net = torchvision.models.mobilenet_v2().cuda().eval()
        x = torch.randn(args["batch"], 3, args["size"], args["size"]).pin_memory()

        def run():
            with torch.no_grad():
                for _ in range(args["count"]):
                    net(x.cuda(non_blocking=True)).float().cpu()
    run()  # warm: the context, kernels, pinned memory
    torch.cuda.synchronize()
    ready.put(gpu)
    start.wait()
    run()
    torch.cuda.synchronize()
    done.put(gpu)


def torch_case(case: str, work: str, gpus: int, shares, rows) -> dict:
    """``work`` by torch in one process per GPU (GPU g does ``shares(k, g)``), timed from the
    moment all are warm to the last one done."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    times = {}
    for k in sorted({1, gpus}):
        ready, start, done = ctx.Queue(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_torch_worker,
                             args=(g, work, shares(k, g), ready, start, done))
                 for g in range(k)]
        for p in procs:
            p.start()
        for _ in range(k):
            ready.get(timeout=600)
        t0 = time.perf_counter()
        start.set()
        for _ in range(k):
            done.get(timeout=600)
        t = time.perf_counter() - t0
        for p in procs:
            p.join(60)
        times[k] = t
        rows.append(row(case, f"torch, {k} process(es)", t, None, k))
    return times


def row(case, impl, seconds, err, devices, **extra) -> dict:
    return {"case": case, "impl": impl, "seconds": seconds, "err": err, "devices": devices,
            **extra}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default=None, help="adapter indices, e.g. 0,1 (default: "
                    "every GPU; with one adapter, two processes on it)")
    ap.add_argument("--small", action="store_true", help="sizes that run in seconds on lavapipe")
    ap.add_argument("--only", default="fma,infer,dask,torch")
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--size", type=int, default=16 << 20, help="f32 per fma batch")
    ap.add_argument("--images", type=int, default=8192)
    ap.add_argument("--image-batch", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=None, help="decoding threads per process "
                    "(default: the CPUs shared out among the processes)")
    ap.add_argument("--grid", type=int, default=8192)
    ap.add_argument("--planes", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--folder", default=None, help="where the image files go (kept)")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    if args.small:
        args.batches, args.size, args.images, args.image_batch = 8, 1 << 18, 32, 8
        args.image_size, args.grid, args.planes, args.chunk, args.repeat = 64, 512, 4, 128, 1
    only = set(args.only.split(","))
    import wgcompute as wgc
    from wgcompute import _multiproc

    if args.devices:
        adapters = [int(t) for t in args.devices.split(",")]
    else:
        adapters = _multiproc.usable_adapters()
        if len(adapters) == 1:
            adapters = adapters * 2
    names = [wgc.devices()[a].name for a in adapters]
    print(f"adapters {adapters}: {names}", flush=True)
    rows: list = []
    ratios = {}

    def ratio(case, times):
        if len(times) == 2:
            one, many = times[1], times[len(adapters)]
            ratios[case] = one / many

    if "fma" in only:
        ratio(*fma_case(wgc, adapters, args, rows))
    files = model_path = None
    if only & {"infer", "dask"}:
        try:
            import onnx  # noqa: F401
            import PIL  # noqa: F401
        except ImportError as e:
            print(f"infer: skipped, {e.name} is not installed", flush=True)
        else:
            from wgcompute.ml.builders import mobilenet_v2

            folder = args.folder or os.path.join(tempfile.gettempdir(),
                                                 f"wgc-multi-gpu-{args.images}")
            files = make_images(folder, args.images, max(256, args.image_size * 2))
            model_path = os.path.join(folder, f"mnv2_{args.image_size}.onnx")
            if not os.path.exists(model_path):
                onnx.save(mobilenet_v2(seed=0, size=args.image_size), model_path)
            if "infer" in only:
                ratio(*infer_case(wgc, adapters, args, rows, files, model_path))
    if "dask" in only:
        try:
            import distributed  # noqa: F401
        except ImportError:
            print("dask: skipped, distributed is not installed", flush=True)
        else:
            if files is None:
                print("dask infer: skipped, needs onnx and pillow", flush=True)
            else:
                for case, times in dask_cases(wgc, adapters, args, rows, files,
                                              model_path).items():
                    ratio(case, times)
    if "torch" in only:
        try:
            import torch
            cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
        except ImportError:
            cuda = False
        if not cuda:
            print("torch: skipped, torch with CUDA is not here", flush=True)
        else:
            gpus = min(len(adapters), torch.cuda.device_count())
            case = f"torch fma: {args.batches} x {args.size:,} f32"
            ratio(case, torch_case(case, "fma", gpus, lambda k, g: {
                "n": args.size, "items": list(range(args.batches))[g::k]}, rows))
            try:
                import torchvision  # noqa: F401
            except ImportError:
                print("torch MobileNetV2: skipped, torchvision is not installed", flush=True)
            else:
                count = args.images // args.image_batch
                case = f"torch MobileNetV2 batch {args.image_batch}, {args.images} images " \
                       f"(random tensors)"
                ratio(case, torch_case(case, "mobilenet", gpus, lambda k, g: {
                    "batch": args.image_batch, "size": args.image_size,
                    "count": len(range(count)[g::k])}, rows))
    print("\n| case | impl | seconds | rate | max rel err |\n|---|---|---:|---:|---:|")
    for r in rows:
        rate = f"{r['img_s']:,.0f} img/s" if "img_s" in r else \
            f"{r['gbs']:.1f} GB/s" if "gbs" in r else ""
        err = "" if r.get("err") is None else f"{r['err']:.1e}"
        print(f"| {r['case']} | {r['impl']} | {r['seconds']:.3f} | {rate} | {err} |")
    print(f"\n| case | 1 device / {len(adapters)} devices |\n|---|---:|")
    for case, rt in ratios.items():
        print(f"| {case} | {rt:.2f}x |")
    out = args.json or (os.path.join(os.environ["OUT"], "multi_gpu.json")
                        if os.environ.get("OUT") else "")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"adapters": adapters, "names": names, "rows": rows, "ratios": ratios,
                       "argv": sys.argv}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
