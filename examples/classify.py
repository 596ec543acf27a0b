"""Classify a photo with any ONNX image classifier on the GPU: the image is uploaded as
RGBA8, then preprocess -> model -> softmax run as ONE pipeline (one command buffer, one
submit), and the top 5 classes are printed.

    python examples/classify.py mobilenet_v2.onnx [IMAGE] [--labels imagenet_classes.txt]

IMAGE defaults to examples/data/coffee.jpg. docs/guide/inference.md shows how to export
torchvision's pretrained MobileNetV2 to ONNX (and its class names) on a machine with a
network; wgcompute itself never downloads weights."""

import argparse
import os
import sys

import numpy as np

import wgcompute as wgc

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="an ONNX classifier taking (N, 3, H, W) images")
    ap.add_argument("image", nargs="?", default=os.path.join(HERE, "data", "coffee.jpg"))
    ap.add_argument("--labels", help="class names, one per line")
    args = ap.parse_args(argv)

    model = wgc.ml.load_onnx(args.model)
    wgc.ml.register_model("classifier", model, replace=True)
    side = model.input_shapes[0][2]
    side = side if isinstance(side, int) and side > 0 else 224

    camera = wgc.image.load(args.image)  # RGBA8 (H, W, 4) on the GPU
    pre = wgc.empty((3, side, side))
    p = wgc.pipeline("classify")
    p.add({"op": "run_kernel", "kernel": "preprocess", "inputs": [camera], "output": pre,
           "params": {"size": (side, side), "mean": (0.485, 0.456, 0.406),
                      "std": (0.229, 0.224, 0.225)}})
    p.add({"op": "run_kernel", "kernel": "classifier", "inputs": [pre]})
    logits = p.stages[-1]["output"]
    p.add({"op": "run_kernel", "kernel": "softmax", "inputs": [logits]})
    probs = p.stages[-1]["output"]
    p.run()  # one submit, one wait

    row = probs.to_numpy().reshape(-1)
    names = [str(i) for i in range(row.size)]
    if args.labels:
        with open(args.labels, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
    print(f"{os.path.basename(args.image)} ({model.name}, {wgc.device_info()['name']}):")
    for k in np.argsort(-row)[:5]:
        print(f"  {row[k]:.4f}  {names[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
