"""`wgcompute infer`: classify image files with an ONNX model: decode and crop on worker
threads, then preprocess -> model -> softmax on the GPU as one submit per batch (stream_map)."""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import wgcompute as wgc
from wgcompute.cli.process import UsageError, expand_inputs

DESCRIPTION = """Classify images with an ONNX model on the GPU.

  wgcompute infer mobilenet_v2.onnx photos/ extra/*.jpg --top 5 --labels imagenet.txt

Each image is decoded, resized (shorter side to 256/224 of the model's input size) and
center-cropped on worker threads; batches then run preprocess (normalize, HWC -> CHW) ->
model -> softmax on the GPU, one submit per batch, while the next batches decode. Labels
come from a text file of one class name per line; --json prints the results as JSON."""

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.onnx", help="an ONNX image classifier")
    p.add_argument("inputs", nargs="+", metavar="IMAGE", help="image files, globs or directories")
    p.add_argument("--top", type=int, default=5, help="classes shown per image (default 5)")
    p.add_argument("--batch", type=int, default=1, help="images per GPU submit (default 1)")
    p.add_argument("--labels", metavar="FILE", help="class names, one per line")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--size", type=int, default=None,
                   help="input side in pixels (default: the model's, else 224)")
    p.add_argument("--mean", type=float, nargs=3, default=IMAGENET_MEAN, metavar="M",
                   help="per-channel mean of [0, 1] values (default: ImageNet's)")
    p.add_argument("--std", type=float, nargs=3, default=IMAGENET_STD, metavar="S",
                   help="per-channel std (default: ImageNet's)")
    p.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1),
                   help="threads decoding images (default: min(4, CPUs))")
    p.add_argument("--f16", action="store_true",
                   help="store weights and activations as f16 (needs shader-f16)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def crop(rgba: np.ndarray, size: int) -> np.ndarray:
    """Resize the shorter side to size·256/224 (antialiased) and center-crop size×size:
    the usual ImageNet evaluation crop. uint8 (H, W, 4) in and out."""
    from PIL import Image

    img = Image.fromarray(rgba[..., :3])
    short = round(size * 256 / 224)
    w, h = img.size
    scale = short / min(w, h)
    img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))),
                     Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    rgb = np.asarray(img.crop((left, top, left + size, top + size)))
    out = np.empty((size, size, 4), np.uint8)
    out[..., :3] = rgb
    out[..., 3] = 255
    return out


def _load_labels(path: str | None, classes: int) -> list[str]:
    if path is None:
        return [str(i) for i in range(classes)]
    try:
        with open(path, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
    except OSError as e:
        raise UsageError(f"--labels: cannot read {path!r}: {e.strerror}") from None
    if len(names) < classes:
        raise UsageError(f"--labels: {path!r} has {len(names)} names; the model has "
                         f"{classes} classes")
    return names


class Classifier:
    """preprocess_batch -> model -> softmax as one pipeline per (input, output) buffer pair
    (stream_map reuses its slots' buffers, so a few pipelines serve a whole run)."""

    def __init__(self, model, size: int, mean, std):
        self.model = model
        self.size = size
        self.params = {"size": (size, size), "mean": tuple(mean), "std": tuple(std)}
        self.pipelines: dict = {}

    def __call__(self, inp, out):
        key = (id(inp), id(out), inp.shape)
        p = self.pipelines.get(key)
        if p is None:
            n = inp.shape[0]
            p = wgc.pipeline(f"infer batch of {n}")
            p.add(kernel="preprocess_batch", inputs=[inp], params=self.params)
            pre = p.stages[-1]["output"]
            p.add(kernel=self.model.kernel, inputs=[pre],
                  output=wgc.empty(out.shape, "f32", label="logits"))
            logits = p.stages[-1]["output"]
            p.add(kernel="softmax", inputs=[logits], output=out)
            self.pipelines[key] = p
        return p.submit()


def run(args) -> int:
    try:
        if args.top < 1 or args.batch < 1 or args.workers < 1:
            raise UsageError("--top, --batch and --workers take positive ints")
        if not os.path.isfile(args.model):
            raise UsageError(f"MODEL: {args.model!r} is not a file")
        files = expand_inputs(args.inputs)
        model = wgc.ml.load_onnx(args.model, dtype="f16" if args.f16 else "f32")
        if len(model.input_names) != 1 or len(model.input_shapes[0] or ()) != 4:
            raise UsageError(f"MODEL: expected one (N, 3, H, W) image input, the model takes "
                             f"{model.input_shapes}")
        dims = model.input_shapes[0]
        size = args.size or (dims[2] if isinstance(dims[2], int) and dims[2] > 0 else 224)
        probe = model.plan((1, 3, size, size)).output_shape
        classes = int(np.prod(probe[1:]))
        labels = _load_labels(args.labels, classes)
    except (UsageError, wgc.WgComputeError) as e:
        print(f"wgcompute infer: error: {e}", file=sys.stderr)
        return 2

    failures: list[tuple[str, str]] = []
    ok_files: list[list[str]] = []

    def decode(path):
        try:
            return path, crop(wgc.image.read_file(path), size)
        except Exception as e:  # one bad file must not stop the run
            return path, e

    def batches():
        # every batch holds args.batch images (the last is padded with blank ones): one
        # stream_map, its buffers and pipelines reused from the first batch to the last
        with ThreadPoolExecutor(args.workers, thread_name_prefix="decode") as pool:
            for start in range(0, len(files), args.batch):
                done = list(pool.map(decode, files[start:start + args.batch]))
                good = [(p, a) for p, a in done if isinstance(a, np.ndarray)]
                failures.extend((p, f"{type(a).__name__}: {a}") for p, a in done
                                if not isinstance(a, np.ndarray))
                if good:
                    ok_files.append([p for p, _ in good])
                    arrays = [a for _, a in good]
                    arrays += [np.zeros_like(arrays[0])] * (args.batch - len(arrays))
                    yield np.stack(arrays)

    bar = None
    if not args.no_progress and sys.stderr.isatty():
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(files), unit="img", desc="infer", file=sys.stderr,
                       dynamic_ncols=True)
        except ImportError:
            bar = None
    classify = Classifier(model, size, args.mean, args.std)
    results = []
    t0 = time.perf_counter()
    stream = wgc.stream_map(classify, batches(), depth=3, out_shape=(args.batch, classes),
                            out_dtype="f32")
    for i, probs in enumerate(stream):
        names = ok_files[i]
        for path, row in zip(names, probs[:len(names)], strict=True):
            top = np.argsort(-row, kind="stable")[:args.top]
            results.append({"file": path, "top": [
                {"class": int(k), "label": labels[k], "prob": float(row[k])} for k in top]})
        if bar is not None:
            bar.update(len(names))
    dt = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    if args.json:
        print(json.dumps({"model": args.model, "results": results,
                          "failed": [{"file": p, "error": m} for p, m in failures]}, indent=1))
    else:
        for r in results:
            tops = ", ".join(f"{t['label']} ({t['prob']:.3f})" for t in r["top"])
            print(f"{r['file']}: {tops}")
    n = len(results)
    print(f"classified {n} of {len(files)} image(s) in {dt:.2f} s: {n / dt:.1f} images/s",
          file=sys.stderr if args.json else sys.stdout)
    if failures:
        print(f"{len(failures)} failed:", file=sys.stderr)
        for path, msg in failures:
            print(f"  {path}: {msg}", file=sys.stderr)
        return 1
    return 0
