"""Where a batch's wall time goes in ``model(x)`` (numpy in, probabilities out), on this GPU:
the model's GPU time per batch size, the host fill of the mapped upload staging (by thread
count), the GPU copy from staging, and the whole call.

    python -m benchmarks.probe_infer [--batches 1,8,32] [--size 224] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from benchmarks.bench_inference import median_time, wgc_model_gpu_time


def measure_batch(model, dev, n: int, size: int) -> dict:
    """One batch size: the model's GPU time, the whole call, the staging fill by copy-thread
    count, and fill + GPU copy into a device buffer (submit + wait)."""
    import wgcompute as wgc
    from wgcompute import _pools, _queue, transfers

    x = np.random.default_rng(n).standard_normal((n, 3, size, size)).astype(np.float32)
    g, how, _ = wgc_model_gpu_time(model, x.shape, 10)
    wall = median_time(lambda: model(x), 15)
    stage = transfers.UploadStage(dev, x.nbytes)
    dst = wgc.empty(x.shape)

    def refill(copy: bool) -> None:
        padded = stage.fill(x)
        if copy:
            enc = dev.link.encoder()
            stage.record(enc, dst.gpu_buffer, padded)
            _queue.wait(dev.submitter.submit([enc.finish()]))
        stage.remap()
        dev.staging.wait_map(stage._request)
        stage._request = None

    fills = {}
    try:
        for split in (1, 4, 8, 16):
            _pools.SPLIT = split
            fills[split] = median_time(lambda: refill(False), 15) * 1e3
    finally:
        _pools.SPLIT = min(8, _pools._CPUS)
    fill_copy = median_time(lambda: refill(True), 15)
    stage.release()
    dst.free()
    return {"batch": n, "input_MB": x.nbytes / 1e6, "model_gpu_ms": g * 1e3, "timing": how,
            "wall_ms": wall * 1e3, "img_s": n / wall, "fill_ms_by_threads": fills,
            "fill_plus_copy_ms": fill_copy * 1e3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--batches", default="1,8,16,32,64,128,256")
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args(argv)
    import wgcompute as wgc
    from wgcompute.ml.builders import mobilenet_v2

    model = wgc.ml.load_onnx(mobilenet_v2(seed=0, size=args.size, softmax=True)
                             .SerializeToString(), name="mnv2")
    dev = wgc.current_device()
    rows = []
    for n in [int(b) for b in args.batches.split(",")]:
        rows.append(measure_batch(model, dev, n, args.size))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": wgc.device_info()["name"], "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
