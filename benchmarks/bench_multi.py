"""Data-parallel work over several devices, every case in one run:

* stream_map of batches (upload -> 64 fused multiply-adds -> download) with
  ``devices=[d0]`` and with ``devices=[d0, d1, ...]``;
* MobileNetV2 (random weights, 224², f32) at batch 32 over images through stream_map, on one
  device and on several (needs onnx);
* torch doing the same work with one CUDA stream per GPU, where torch sees CUDA.

With one GPU in the machine, "several devices" are logical devices on that GPU (``devices=
[d, d]``): the run then measures what spreading costs, not a speed-up. ``--devices N`` picks
how many (default: one per Vulkan/Metal/D3D12 GPU adapter, at least two).

    python -m benchmarks.bench_multi [--small] [--json PATH]"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from benchmarks.bench_streams import FMA_WGSL, KERNEL, A, B, fma_ref, torch_streams
from benchmarks.harness import env_info, peers


def open_devices(wgc, n: int | None) -> list:
    gpus = [a for a in wgc.devices() if a.gpu and a.backend != "OpenGL"]
    adapters = [a.index for a in gpus] or [wgc.devices()[0].index]
    count = n or max(2, len(adapters))
    return [wgc.device(adapters[i % len(adapters)], new=True) for i in range(count)]


def timed(fn, repeat: int):
    fn()  # warm: pipelines compiled, staging pinned
    best = None
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, out


def fma_case(wgc, devs, batches, repeat):
    for d in devs:
        with wgc.use_device(d):
            if KERNEL not in wgc.kernels():
                wgc.register_kernel(KERNEL, FMA_WGSL)

    def run(ds):
        return list(wgc.stream_map(KERNEL, batches, depth=3, params={"a": A, "b": B},
                                   devices=ds))

    rows = []
    want_first, want_last = fma_ref(batches[0]), fma_ref(batches[-1])
    for label, ds in (("1 device", devs[:1]), (f"{len(devs)} devices", devs)):
        t, out = timed(lambda ds=ds: run(ds), repeat)
        err = max(float(np.abs(out[0] - want_first).max() / np.abs(want_first).max()),
                  float(np.abs(out[-1] - want_last).max() / np.abs(want_last).max()))
        rows.append({"case": "fma stream_map", "impl": f"wgcompute, {label}", "seconds": t,
                     "err": err})
    return rows


def torch_fma_case(batches, repeat, n_gpus):
    import threading

    import torch

    rows = []
    per = [batches[i::n_gpus] for i in range(n_gpus)]
    runs = []
    for g in range(n_gpus):
        with torch.cuda.device(g):
            run, note = torch_streams(torch, per[g], len(batches[0]))
            runs.append(run)

    def all_gpus():
        threads = [threading.Thread(target=r) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    t, _ = timed(all_gpus, repeat)
    rows.append({"case": "fma stream_map", "impl": f"torch, {n_gpus} GPU(s), 3 streams each "
                 f"({note})", "seconds": t, "err": None})
    return rows


def mobilenet_case(wgc, devs, images, batch, repeat, size):
    from wgcompute.ml.builders import mobilenet_v2

    model = wgc.ml.load_onnx(mobilenet_v2(seed=0, size=size).SerializeToString())
    wgc.ml.register_model("bench_mnv2", model, replace=True)
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
    count = images // batch
    want = model(x)
    rows = []
    for label, ds in (("1 device", devs[:1]), (f"{len(devs)} devices", devs)):
        def run(ds=ds):
            return list(wgc.stream_map("bench_mnv2", [x] * count, depth=3, devices=ds))

        t, out = timed(run, repeat)
        err = float(np.abs(out[-1] - want).max() / np.abs(want).max())
        rows.append({"case": f"MobileNetV2 {size}² batch {batch}, {images} images",
                     "impl": f"wgcompute, {label}", "seconds": t,
                     "img_s": count * batch / t, "err": err})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="lavapipe sizes")
    ap.add_argument("--devices", type=int, default=None, help="devices to spread over")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    found = sorted(peers())
    import wgcompute as wgc

    nb, n = (8, 1 << 18) if args.small else (64, 16 << 20)
    images, batch, size = (64, 8, 64) if args.small else (4096, 32, 224)
    devs = open_devices(wgc, args.devices)
    info = env_info()
    print(f"device: {info['device']}; devices: {devs}; peers: {found or 'none'}; clocks held: "
          f"{info.get('clocks_held')}", flush=True)
    base = np.linspace(-1, 1, n, dtype=np.float32)
    batches = [base + np.float32(i) for i in range(nb)]
    rows = fma_case(wgc, devs, batches, args.repeat)
    if "torch" in found:
        import torch

        rows += torch_fma_case(batches, args.repeat, torch.cuda.device_count())
    try:
        import onnx  # noqa: F401

        rows += mobilenet_case(wgc, devs, images, batch, args.repeat, size)
    except ImportError:
        print("MobileNetV2: skipped, onnx is not installed", flush=True)
    moved = 2 * 4 * n * nb
    print("\n| case | impl | time | rate | max rel err |\n|---|---|---:|---:|---:|")
    for r in rows:
        rate = f"{r['img_s']:,.0f} img/s" if "img_s" in r else \
            f"{moved / r['seconds'] / 1e9:.1f} GB/s"
        err = "" if r.get("err") is None else f"{r['err']:.1e}"
        print(f"| {r['case']} | {r['impl']} | {r['seconds']:.3f} s | {rate} | {err} |")
    out = args.json or (os.path.join(os.environ["OUT"], "bench_multi.json")
                        if os.environ.get("OUT") else "")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"env": info, "devices": [repr(d) for d in devs], "rows": rows}, f,
                      indent=1, default=str)
    for d in devs:
        d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
