"""Every tile configuration of a list, timed on each convolution layer of MobileNetV2 at its
full batch (the autotuner times a layer on at most 131,072 output pixels): the tuned (or
default) choice against the fastest of the list, per layer shape, f32 and f16 "mixed".

    python -m benchmarks.probe_conv_tiles [--batch 256] [--size 224] [--dtypes f32,f16-mixed]
        [--configs NAME,...] [--budget 120] [--json PATH]

Each config is timed by the autotuner's own method (conv_configs.time_calls: repeated calls in
one pass, the median of 3 passes). Configs that do not fit the adapter, or (f16 "mixed") whose
k step is not one that precision takes, are left out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

# the tuner's sets plus the tiles only convolutions take, and wider ones it does not time
DEFAULT_CONFIGS = ("64x128x16_4x8,128x128x16_8x8,128x64x16_8x4,64x64x16_4x4,64x128x8_8x8_u,"
                   "128x128x8_8x8,32x64x16_4x4,128x128x8_8x8_u,128x128x16_8x8_u,64x128x16_8x8_u,"
                   "32x128x16_4x8,32x128x16_4x8_u,64x128x16_4x8_u,64x64x16_4x4_u,128x64x16_8x4_u,"
                   "64x256x16_8x8_u,32x64x16_4x4_u")
VARIANTS = {"f32": {}, "f16-mixed": {"dtype": "f16", "precision": "mixed"}}


def conv_layers(model, shape) -> list[dict]:
    """The model's implicit-GEMM convolution steps for an input of ``shape``, one per distinct
    (kernel, shapes, params), with how many steps share it and the configuration chosen."""
    import wgcompute as wgc
    from wgcompute.kernels.core.base import Meta

    dev = wgc.current_device()
    plan = model.plan(shape)
    layers: dict = {}
    for st in plan.steps:
        k = st.kernel
        if not k.name.startswith("conv2d"):
            continue
        shapes = tuple(tuple(t.shape) for t in [*st.ins, st.out])
        res = k.resolve_params(dict(st.params, shapes=shapes), None)
        dt = plan.storages[st.out.sid].dtype
        metas = [Meta(s, dt, dev) for s in shapes]
        c = dict(k.constants(k.logical(metas[:-1], metas[-1], res), res, dev, dt))
        if c["algo"] == "depthwise":
            continue
        key = (k.name, shapes, repr(sorted((n, repr(v)) for n, v in res.items())))
        if key in layers:
            layers[key]["count"] += 1
            continue
        layers[key] = {"layer": st.label, "kernel": k, "params": res, "dtype": dt,
                       "shapes": shapes, "mnk": k._gemm_dims(shapes, res),
                       "chosen": c["config"], "count": 1, "ms": {}}
    return list(layers.values())


def usable(name: str, dev, mixed: bool) -> bool:
    from wgcompute.kernels.conv.conv_configs import parse_config
    from wgcompute.kernels.matmul.matmul import MIXED_BK, TileConfig

    cfg = parse_config(name)
    if isinstance(cfg, TileConfig):
        return cfg.split == 1 and cfg.fits(dev, 2 if mixed else 4) and \
            (not mixed or cfg.bk in MIXED_BK)
    return cfg.fits(dev)


def sweep(layer: dict, names: list[str], mixed: bool, deadline: float) -> None:
    """Time each usable config on ``layer`` (its full batch) into layer["ms"]."""
    import wgcompute as wgc
    from wgcompute.kernels.conv import conv_configs
    from wgcompute.kernels.core.bind import bind

    dev = wgc.current_device()
    k, res, shapes = layer["kernel"], layer["params"], layer["shapes"]
    bufs = [wgc.empty(s, layer["dtype"]) for s in shapes]
    p = {n: res[n] for n in ("strides", "pads", "dilations", "group", "activation",
                             "post_activation", "precision")}
    try:
        for name in names:
            if time.perf_counter() > deadline:
                break
            if usable(name, dev, mixed):
                d = bind(k, bufs[:-1], bufs[-1], dict(p, _config=conv_configs.parse_config(name)))
                layer["ms"][name] = conv_configs.time_calls(dev, d.raw_calls(), 4e-3) * 1e3
    finally:
        for b in bufs:
            b.free()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--dtypes", default="f32,f16-mixed", help="of: " + ", ".join(VARIANTS))
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help="tile names; the tuner's candidates for each layer are added")
    ap.add_argument("--only", action="store_true",
                    help="time --configs alone, not the tuner's candidates and choice too")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds of timing per dtype; layers past it keep what they have")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import wgcompute as wgc
    from wgcompute.kernels.conv import conv_configs
    from wgcompute.ml.builders import mobilenet_v2

    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in VARIANTS]
    if unknown:
        ap.error(f"--dtypes: unknown {', '.join(unknown)} (choose from {', '.join(VARIANTS)})")
    dev = wgc.current_device()
    if any(v.get("dtype") == "f16" for d, v in VARIANTS.items() if d in dtypes) \
            and not dev.has("shader-f16"):
        print("f16-mixed: skipped (adapter lacks shader-f16)")
        dtypes = [d for d in dtypes if VARIANTS[d].get("dtype") != "f16"]
    data = mobilenet_v2(seed=0, size=args.size, softmax=True).SerializeToString()
    shape = (args.batch, 3, args.size, args.size)
    report = {"device": wgc.device_info()["name"], "batch": args.batch, "size": args.size}
    for variant in dtypes:
        model = wgc.ml.load_onnx(data, name=f"mobilenet_v2_{variant}", **VARIANTS[variant])
        model(np.zeros(shape, np.float32))  # tunes the layers, as a user's first call does
        layers = conv_layers(model, shape)
        deadline = time.perf_counter() + args.budget
        for layer in layers:
            names = [n for n in args.configs.split(",") if n]
            problem = layer["kernel"]._problem(layer["shapes"], layer["params"], layer["dtype"])
            if not args.only:
                names += [n for n in [*conv_configs.candidates(problem, dev), layer["chosen"]]
                          if n not in names]
            sweep(layer, names, variant.endswith("mixed"), deadline)
            ms = layer["ms"]
            if not ms:
                print(f"{variant} | {layer['layer'][:36]} | not timed (--budget spent, or no "
                      f"config of the list fits)", flush=True)
                continue
            best = min(ms, key=ms.get)
            m, n, k = layer["mnk"]
            top = " ".join(f"{c}={t:.4f}" for c, t in sorted(ms.items(), key=lambda i: i[1])[:5])
            print(f"{variant} | {layer['layer'][:36]} x{layer['count']} | {m}x{n}x{k} | chosen "
                  f"{layer['chosen']} {ms.get(layer['chosen'], float('nan')):.4f} ms | best "
                  f"{best} {ms.get(best, float('nan')):.4f} ms | {top}", flush=True)
        timed = [la for la in layers if la["chosen"] in la["ms"]]
        chosen = sum(la["count"] * la["ms"][la["chosen"]] for la in timed)
        best = sum(la["count"] * min(la["ms"].values()) for la in timed)
        print(f"{variant}: {sum(la['count'] for la in timed)} convolutions (those whose choice "
              f"was timed) in {chosen:.3f} ms with the chosen tiles, {best:.3f} ms with the "
              f"fastest of the list", flush=True)
        report[variant] = [{n: v for n, v in la.items() if n not in ("kernel", "params")}
                           for la in layers]
        model.free()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
