"""ONNX CNN inference, every peer in one run: MobileNetV2 (torchvision's architecture, random
weights, 224², f32 unless said) on wgcompute, torch CUDA eager (TF32 off; fp16 at batch
256) and onnxruntime on the CPU.

* batch 1 end to end: numpy image in -> probabilities in numpy (the model ends in Softmax;
  wgcompute: one submit, one wait), wall clock as a user's loop sees it;
* batches 32 and 256: images/s, f32 (and f16 at 256), wall clock with the transfers and
  GPU-timestamp time of the model alone;
* stream_map over images from disk (decode + crop on 4 threads, decoded ahead; preprocess ->
  model -> softmax on the GPU) against the same loop in torch with a DataLoader (4 workers),
  beside what decoding alone and the GPU alone (pre-decoded batches) reach;
* Model.profile(): the per-layer GPU times of batch 1 and 32, with each layer's kernel, tile
  configuration (tuned on this GPU) and workgroup count (an H100 has 132 SMs).

Peers that are not importable (or see no CUDA GPU) are skipped with a printed reason. Every
wgcompute output is checked against onnxruntime ("max rel err").

    python -m benchmarks.bench_inference [--small] [--json PATH]   (also writes $OUT/)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks import harness
from benchmarks.harness import WALL, Results, env_info, gpu_time, max_rel_err, peers


def median_time(fn, repeat: int, warmup: int = 3) -> float:
    return harness.median_time(fn, repeat, warmup)


def say(msg: str) -> None:
    print(msg, flush=True)


def wgc_model_gpu_time(model, shape, repeat, dtype="f32"):
    """GPU-timestamp seconds of the model's dispatches alone (one compute pass), for an input
    of ``dtype``."""
    import wgcompute as wgc

    x = wgc.empty(shape, dtype)
    out = wgc.empty(model.plan(shape).output_shape)
    from wgcompute.kernels import bind

    d = bind(model.kernel, [x], out, None)
    t, how = gpu_time(None, record_pass=d.encode, warmup=3, repeat=repeat)
    return t, how, len(d.parts)


def layer_table(model, shape) -> list[dict]:
    """Per step of the model's plan for ``shape``: layer, kernel, the convolution's algorithm
    and tile configuration (the tuned or default choice on this device) and the workgroups
    its dispatches launch."""
    import wgcompute as wgc
    from wgcompute.kernels.core.base import Meta

    dev = wgc.current_device()
    plan = model.plan(shape)
    rows = []
    for st in plan.steps:
        k = st.kernel
        params = dict(st.params)
        params["shapes"] = tuple(tuple(t.shape) for t in [*st.ins, st.out])
        res = k.resolve_params(params, None)
        ins = [Meta(tuple(t.shape), plan.storages[t.sid].dtype, dev) for t in st.ins]
        out = Meta(tuple(st.out.shape), plan.storages[st.out.sid].dtype, dev)
        launches = k.launches(ins, out, res, dev)
        row = {"layer": st.label, "kernel": k.name,
               "workgroups": sum(x * y * z for x, y, z in (la.workgroups for la in launches))}
        if k.name.startswith("conv2d"):
            c = dict(k.constants(k.logical(ins, out, res), res, dev, out.dtype))
            row["algo"], row["config"] = c["algo"], c.get("config", "")
            row["mnk"] = k._gemm_dims(params["shapes"], res)
        rows.append(row)
    return rows


def workgroup_note(rows: list[dict]) -> str:
    algos = {}
    for r in rows:
        if "algo" in r:
            algos[r["algo"]] = algos.get(r["algo"], 0) + 1
    mix = ", ".join(f"{n} {a}" for a, n in sorted(algos.items()))
    return (f"{sum(r['workgroups'] for r in rows):,} workgroups in {len(rows)} dispatches "
            f"(convolutions: {mix})")


def bench_models(res: Results, size: int, batches: list[int], repeat: int, big: int,
                 rows: list) -> dict:
    import onnxruntime as ort

    import wgcompute as wgc
    from wgcompute.ml.builders import mobilenet_v2

    proto = mobilenet_v2(seed=0, size=size, softmax=True)
    data = proto.SerializeToString()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    model = wgc.ml.load_onnx(data, name="mobilenet_v2")
    f16s = {}
    if "shader-f16" in wgc.device_info()["features"]:
        f16s = {p: wgc.ml.load_onnx(data, dtype="f16", precision=p, name=f"mobilenet_v2_f16_{p}")
                for p in ("f32", "mixed")}
    rng = np.random.default_rng(0)
    info = {}
    for n in batches:
        x = rng.standard_normal((n, 3, size, size)).astype(np.float32)
        case = f"MobileNetV2 {size}² batch {n}"
        want = sess.run(None, {"input": x})[0]
        got = model(x)
        err = max_rel_err(got, want)
        t = median_time(lambda x=x: model(x), repeat)
        res.add(case, "wgcompute", t, timing=WALL, max_rel_err=err, size=n,
                note="numpy in -> probs out, wall")
        g, how, steps = wgc_model_gpu_time(model, x.shape, repeat)
        layers = layer_table(model, x.shape)
        res.add(case, "wgcompute", g, timing=how, size=n,
                note=f"model only, {workgroup_note(layers)}")
        info[n] = {"wall_s": t, "gpu_s": g, "dispatches": steps, "max_rel_err": err,
                   "layers": layers}
        say(f"{case}: wgcompute {t * 1e3:.3f} ms wall ({n / t:,.0f} img/s), "
            f"{g * 1e3:.3f} ms {how}, err {err:.1e}; {workgroup_note(layers)}")
        if n <= 32:
            tc = median_time(lambda x=x: sess.run(None, {"input": x}), max(3, repeat // 2), 1)
            res.add(case, "onnxruntime CPU", tc, timing=WALL, size=n)
            say(f"{case}: onnxruntime CPU {tc * 1e3:.3f} ms")
        if f16s and n == big:
            bench_f16(res, case, n, x, want, sess, model, f16s, t, g, repeat, info)
    rows.append(("profile", model, size))
    return info


def bench_f16(res: Results, case: str, n: int, x, want, sess, model, f16s: dict, t32: float,
              g32: float, repeat: int, info: dict) -> None:
    """Batch ``n`` in f16, with f32 sums and with mixed precision: GPU time, and wall time
    with the input given as f32 and as f16 (half the bytes to upload, as torch's fp16 model
    takes it); the f32 model given f16 input too, so each effect is seen alone."""
    xh = x.astype(np.float16)
    (wanth,) = sess.run(None, {"input": xh.astype(np.float32)})
    for precision, m in f16s.items():
        impl = "wgcompute f16" + (" mixed" if precision == "mixed" else "")
        e = max_rel_err(m(x), want)
        tw = median_time(lambda m=m: m(x), repeat)
        g, how, _ = wgc_model_gpu_time(m, x.shape, repeat)
        res.add(case, impl, tw, timing=WALL, max_rel_err=e, size=n,
                note="f32 numpy in -> probs out, wall")
        layers = layer_table(m, x.shape)
        res.add(case, impl, g, timing=how, size=n, note=f"model only, {workgroup_note(layers)}")
        eh = max_rel_err(m(xh), wanth)
        th = median_time(lambda m=m: m(xh), repeat)
        res.add(case, impl, th, timing=WALL, max_rel_err=eh, size=n,
                note="f16 numpy in -> probs out, wall")
        gh, _, _ = wgc_model_gpu_time(m, x.shape, repeat, "f16")
        res.add(case, impl, gh, timing=how, size=n, note="model only, f16 input buffer")
        info[f"{n}_f16_{precision}"] = {"wall_s": tw, "gpu_s": g, "max_rel_err": e,
                                        "wall_f16_in_s": th, "max_rel_err_f16_in": eh,
                                        "gpu_f16_in_s": gh, "layers": layers}
        say(f"{case}: {impl}: GPU {g * 1e3:.3f} ms ({how}) = {g32 / g:.2f}x f32's, "
            f"{gh * 1e3:.3f} ms from an f16 input = {g32 / gh:.2f}x; wall {tw * 1e3:.3f} ms "
            f"f32 in ({n / tw:,.0f} img/s, {t32 / tw:.2f}x), {th * 1e3:.3f} ms f16 in "
            f"({n / th:,.0f} img/s, {t32 / th:.2f}x); err {e:.1e}, f16 in {eh:.1e}")
    t32h = median_time(lambda: model(xh), repeat)
    res.add(case, "wgcompute", t32h, timing=WALL, size=n,
            max_rel_err=max_rel_err(model(xh), wanth), note="f32 model, f16 numpy in, wall")
    info[f"{n}_f32_f16_in"] = {"wall_s": t32h}
    say(f"{case}: wgcompute f32 model, f16 in: {t32h * 1e3:.3f} ms wall ({n / t32h:,.0f} "
        f"img/s)")


def bench_torch(res: Results, size: int, batches: list[int], repeat: int, big: int) -> None:
    found = peers()
    if "torch" not in found:
        say("torch: skipped (not importable, or no CUDA GPU)")
        return
    torch = found["torch"]
    try:
        import torchvision
    except ImportError:
        say("torch: skipped (torchvision is not importable)")
        return
    from benchmarks.harness import cuda_time

    net = torchvision.models.mobilenet_v2(weights=None).eval().cuda()
    half = torchvision.models.mobilenet_v2(weights=None).eval().cuda().half()

    def e2e(x):
        with torch.no_grad():
            return torch.softmax(net(torch.from_numpy(x).cuda()), -1).cpu().numpy()

    def forward(module, xt):
        with torch.no_grad():
            return module(xt)

    for n in batches:
        case = f"MobileNetV2 {size}² batch {n}"
        x = np.random.default_rng(n).standard_normal((n, 3, size, size)).astype(np.float32)
        t = median_time(lambda x=x: e2e(x), repeat)
        res.add(case, "torch CUDA eager", t, timing=WALL, size=n, note="numpy in -> probs out")
        xt = torch.from_numpy(x).cuda()
        g = cuda_time(torch, lambda xt=xt: forward(net, xt), repeat=repeat)
        res.add(case, "torch CUDA eager", g, timing="cuda-event", size=n, note="model only")
        say(f"{case}: torch {t * 1e3:.3f} ms wall, {g * 1e3:.3f} ms cuda-event")
        if n == big:
            xh = xt.half()
            gh = cuda_time(torch, lambda xh=xh: forward(half, xh), repeat=repeat)
            res.add(case, "torch CUDA fp16", gh, timing="cuda-event", size=n)
            say(f"{case}: torch fp16 {gh * 1e3:.3f} ms ({n / gh:,.0f} img/s)")


def write_images(folder: str, count: int, side: int) -> list[str]:
    """``count`` JPEGs of side×(side·4/3) pixels: crops of the bundled photos."""
    from PIL import Image

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "data")
    photos = [np.asarray(Image.open(os.path.join(root, n)).convert("RGB"))
              for n in ("astronaut.jpg", "coffee.jpg", "chelsea.png")]
    rng = np.random.default_rng(0)
    paths = []
    w = side * 4 // 3
    for i in range(count):
        p = photos[i % len(photos)]
        y = rng.integers(0, max(1, p.shape[0] - side))
        x = rng.integers(0, max(1, p.shape[1] - w))
        crop = p[y:y + side, x:x + w]
        path = os.path.join(folder, f"img{i:05d}.jpg")
        Image.fromarray(crop).resize((w, side)).save(path, quality=90)
        paths.append(path)
    return paths


def bench_stream(res: Results, size: int, count: int, batch: int, workers: int) -> None:
    import wgcompute as wgc
    from wgcompute.cli.infer import IMAGENET_MEAN, IMAGENET_STD, Classifier, decode_batches
    from wgcompute.ml.builders import mobilenet_v2

    folder = tempfile.mkdtemp(prefix="wgc-bench-images-")
    files = write_images(folder, count, max(size + 32, size * 8 // 7))
    case = f"{count} images from disk, batch {batch}: decode -> preprocess -> model -> softmax"
    model = wgc.ml.load_onnx(mobilenet_v2(seed=0, size=size).SerializeToString())
    classify = Classifier(model.kernel, size, IMAGENET_MEAN, IMAGENET_STD)

    def batches():
        for arr, _ok, _failed in decode_batches(files, size, batch, workers):
            yield arr

    def run(source):
        n = 0
        for probs in wgc.stream_map(classify, source, depth=3, out_shape=(batch, 1000),
                                    out_dtype="f32"):
            n += probs.shape[0]
        return n

    run(batches())  # warm-up: pipelines, staging, file cache
    t0 = time.perf_counter()
    run(batches())
    t = time.perf_counter() - t0
    res.add(case, "wgcompute stream_map", t, timing=WALL, size=count,
            note=f"{count / t:,.0f} img/s, {workers} decode threads")
    say(f"{case}: wgcompute {count / t:,.0f} img/s")
    # what bounds it: decoding alone, and the GPU part alone on batches decoded beforehand
    t0 = time.perf_counter()
    for _ in batches():
        pass
    td = time.perf_counter() - t0
    res.add(case, "wgcompute decode only", td, timing=WALL, size=count,
            note=f"{count / td:,.0f} img/s, {workers} threads")
    ready = [arr for arr, _ok, _f in decode_batches(files[:batch * 4], size, batch, workers)]
    t0 = time.perf_counter()
    run(ready[i % len(ready)] for i in range(-(-count // batch)))
    tg = time.perf_counter() - t0
    res.add(case, "wgcompute GPU only", tg, timing=WALL, size=count,
            note=f"{count / tg:,.0f} img/s, pre-decoded batches")
    say(f"{case}: decode alone {count / td:,.0f} img/s, GPU part alone {count / tg:,.0f} img/s")
    found = peers()
    if "torch" not in found:
        say("stream torch: skipped (not importable, or no CUDA GPU)")
        return
    torch = found["torch"]
    try:
        import torchvision
        from torchvision import transforms
    except ImportError:
        say("stream torch: skipped (torchvision is not importable)")
        return
    from PIL import Image

    tf = transforms.Compose([transforms.Resize(round(size * 256 / 224)),
                             transforms.CenterCrop(size), transforms.ToTensor(),
                             transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return tf(Image.open(files[i]).convert("RGB"))

    net = torchvision.models.mobilenet_v2(weights=None).eval().cuda()

    def run_torch():
        loader = torch.utils.data.DataLoader(Files(), batch_size=batch, num_workers=workers,
                                             pin_memory=True, prefetch_factor=4)
        n = 0
        with torch.no_grad():
            for xb in loader:
                probs = torch.softmax(net(xb.cuda(non_blocking=True)), -1).cpu().numpy()
                n += probs.shape[0]
        return n

    run_torch()
    t0 = time.perf_counter()
    run_torch()
    tt = time.perf_counter() - t0
    res.add(case, "torch DataLoader", tt, timing=WALL, size=count,
            note=f"{count / tt:,.0f} img/s, {workers} workers")
    say(f"{case}: torch {count / tt:,.0f} img/s")


def profile_table(model, size: int, batch: int) -> list[dict]:
    """Model.profile() joined with layer_table(): per layer the GPU time, algorithm, tile
    configuration, GEMM dims (M output channels, N pixels, K) and workgroups; prints every
    layer (the JSON keeps them too)."""
    import wgcompute as wgc

    if "timestamp-query" not in wgc.device_info()["features"]:
        say("profile: skipped (no timestamp-query)")
        return []
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
    rows = model.profile(x, repeat=5)
    for r, info in zip(rows, layer_table(model, x.shape), strict=True):
        r.update({k: v for k, v in info.items() if k not in r})
    total = sum(r["ms"] for r in rows)
    say(f"\nper-layer profile, batch {batch} (each step in its own pass): {total:.3f} ms "
        f"in {len(rows)} steps:")
    say("| layer | kernel | algo | config | M×N×K | workgroups | ms | share |\n"
        "|---|---|---|---|---|---:|---:|---:|")
    for r in rows:
        mnk = "×".join(map(str, r.get("mnk", ()))) or "-"
        say(f"| {r['layer'][:48]} | {r['kernel']} | {r.get('algo', '-')} | "
            f"{r.get('config') or '-'} | {mnk} | {r['workgroups']} | {r['ms']:.4f} | "
            f"{100 * r['ms'] / total:.1f}% |")
    return rows


def main(argv=None) -> Results:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true",
                    help="lavapipe sizes: 96², batches 1/4/8, 64 images")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per case")
    ap.add_argument("--size", type=int, default=None, help="image side (224; --small 96)")
    ap.add_argument("--batches", default=None,
                    help="comma-separated batch sizes (1,32,256; --small 1,4,8)")
    ap.add_argument("--images", type=int, default=None, help="images for the stream case")
    ap.add_argument("--json", help="write the results as JSON here")
    args = ap.parse_args(argv)
    size = args.size or (96 if args.small else 224)
    batches = [int(b) for b in args.batches.split(",")] if args.batches else (
        [1, 4, 8] if args.small else [1, 32, 256])
    big = batches[-1]
    repeat = args.repeat or (5 if args.small else 20)
    count = args.images or (64 if args.small else 2048)
    env = env_info()  # the peers are looked for first (see harness.env_info)
    say(f"device: {env['device']} ({env['backend']}); clocks held: {env['clocks_held']}; "
        f"peers: {env['peers'] or 'none'}")
    res = Results("ONNX inference: MobileNetV2, random weights")
    rows: list = []
    info = bench_models(res, size, batches, repeat, big, rows)
    bench_torch(res, size, batches, repeat, big)
    bench_stream(res, size, count, min(8 if args.small else 32, count), 4)
    profiles = {}
    for _, model, sz in rows:
        for b in sorted({1, batches[min(1, len(batches) - 1)]}):
            profiles[b] = profile_table(model, sz, b)
    say("\n" + res.markdown())
    out = os.environ.get("OUT")
    path = args.json or (os.path.join(out, "bench_inference.json") if out else None)
    if path:
        res.write_json(path)
        import json

        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        data["summary"] = info
        data["profiles"] = profiles
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, default=str)
        say(f"wrote {path}")
    return res


if __name__ == "__main__":
    main(sys.argv[1:])
