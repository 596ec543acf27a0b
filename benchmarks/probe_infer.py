"""Where a batch's wall time goes in ``model(x)`` (numpy in, probabilities out), on this GPU:
the model's GPU time per batch size, the host fill of the mapped upload staging (by thread
count), the GPU copy from staging, and the whole call.

    python -m benchmarks.probe_infer [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def med(fn, repeat=15, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--batches", default="1,8,16,32,64,128,256")
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args(argv)
    import wgcompute as wgc
    from wgcompute import _pools, _queue, transfers
    from wgcompute.ml.builders import mobilenet_v2

    from benchmarks.bench_inference import wgc_model_gpu_time

    out = {"device": wgc.device_info()["name"]}
    model = wgc.ml.load_onnx(mobilenet_v2(seed=0, size=args.size, softmax=True)
                             .SerializeToString(), name="mnv2")
    dev = wgc.current_device()
    rows = []
    for n in [int(b) for b in args.batches.split(",")]:
        x = np.random.default_rng(n).standard_normal((n, 3, args.size, args.size)) \
            .astype(np.float32)
        g, how, _ = wgc_model_gpu_time(model, x.shape, 10)
        wall = med(lambda x=x: model(x))
        # host fill of the staging, by copy thread count
        fills = {}
        stage = transfers.UploadStage(dev, x.nbytes)
        for split in (1, 4, 8, 16):
            _pools.SPLIT = split

            def fill():
                stage.fill(x)
                stage.remap()
                dev.staging.wait_map(stage._request)
                stage._request = None
            fills[split] = med(fill)
        _pools.SPLIT = min(8, _pools._CPUS)
        # GPU copy staging -> buffer, submit + wait
        dst = wgc.empty(x.shape)

        def copy():
            stage.fill(x)
            enc = dev.link.encoder()
            stage.record(enc, dst.gpu_buffer, x.nbytes)
            _queue.wait(dev.submitter.submit([enc.finish()]))
            stage.remap()
            dev.staging.wait_map(stage._request)
            stage._request = None
        copy_fill = med(copy)
        stage.release()
        row = {"batch": n, "input_MB": x.nbytes / 1e6, "model_gpu_ms": g * 1e3, "timing": how,
               "wall_ms": wall * 1e3, "img_s": n / wall,
               "fill_ms_by_threads": {k: v * 1e3 for k, v in fills.items()},
               "fill_plus_copy_ms": copy_fill * 1e3}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out["rows"] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
