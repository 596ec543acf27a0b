"""Image pipeline on a bundled photo: blur -> sharpen -> grayscale, plus sobel edges and a
resize, all on the GPU; writes before/after PNGs.

    python examples/image_pipeline.py [--image examples/data/chelsea.png] [--out DIR]

The same stages from the command line:

    wgcompute process examples/data -o out \
        --pipeline "gaussian_blur(radius=3, sigma=1.5) | sharpen(amount=0.5) | grayscale"
"""

from __future__ import annotations

import argparse
import os
import time

import wgcompute as wgc

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE = "gaussian_blur(radius=3, sigma=1.5) | sharpen(amount=0.5) | grayscale"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default=os.path.join(HERE, "data", "chelsea.png"))
    ap.add_argument("--out", default="image_pipeline_out", help="folder for the PNGs")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    img = wgc.image.load(args.image)  # u8 (H, W, 4): one RGBA pixel per 32-bit word
    h, w, _ = img.shape
    print(f"{os.path.basename(args.image)}: {w}x{h} on {wgc.device_info()['name']}")

    # Three stages recorded into one command buffer, one submit.
    stages = wgc.image.parse_pipeline(PIPELINE)
    t0 = time.perf_counter()
    cmd, result = wgc.image.submit_stages(img, stages, label="example")
    cmd.wait()
    print(f"  {PIPELINE}: {(time.perf_counter() - t0) * 1e3:.1f} ms")

    # Single kernels, outputs sized for us.
    edges = wgc.image.apply("sobel", wgc.image.apply("grayscale", img), scale=0.5)
    small = wgc.image.apply("resize", img, size=(h // 2, w // 2))

    outputs = {"original.png": img, "blur_sharpen_gray.png": result, "sobel.png": edges,
               "half_size.png": small}
    for name, buf in outputs.items():
        path = wgc.image.save(buf, os.path.join(args.out, name))
        print(f"  wrote {path} {buf.shape[1]}x{buf.shape[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
