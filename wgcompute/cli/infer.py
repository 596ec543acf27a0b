"""`wgcompute infer`: classify image files with an ONNX model: decode and crop on threads
(PIL, the GIL released while it decodes and resizes), batches decoded ahead while the GPU runs
preprocess -> model -> softmax as one submit per batch (stream_map), spread over one worker
process per GPU (--devices), or over a Dask cluster's workers, each with its own stream_map."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import wgcompute as wgc
from wgcompute._extras import require
from wgcompute.cli.process import UsageError, check_parallel_args, expand_inputs, rate

DESCRIPTION = """Classify images with an ONNX model on the GPU.

  wgcompute infer mobilenet_v2.onnx photos/ extra/*.jpg --top 5 --labels imagenet.txt

Each image is decoded, resized (shorter side to 256/224 of the model's input size) and
center-cropped on threads (a JPEG much larger than that decodes at a reduced scale);
batches then run preprocess (normalize, HWC -> CHW) -> model -> softmax on the GPU, one
submit per batch, while the next batches decode. A model that ends in Softmax gives
probabilities already and gets no second one (--softmax yes|no decides otherwise); a
--batch larger than the number of images is cut to it. Labels come from a text file of one
class name per line, as many as the model has classes; --json prints the results as JSON,
and -o FILE writes them to FILE (a temporary file, then a rename: never half-written).

With --devices all (or 0,1: adapter indices, counted from 0 in the list of adapters
`wgcompute info` prints) one worker process per GPU decodes its own batches of files and
classifies them on its GPU; only the file names travel to it and the probabilities back
(through shared memory). The results are the same, in the same order.

With --workers N (a local Dask cluster of N worker processes, one per GPU) or --scheduler
ADDRESS (a running Dask cluster whose workers see the same files), the batches are spread
over the workers; each loads the model once, decodes its images and classifies them on its
GPU. The results are the same as without a cluster, in the same order. A worker that dies
has its batches done again by another. Needs wgcompute[dask]."""

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.onnx", help="an ONNX image classifier")
    p.add_argument("inputs", nargs="+", metavar="IMAGE", help="image files, globs or directories")
    p.add_argument("--top", type=int, default=5, help="classes shown per image (default 5)")
    p.add_argument("--batch", type=int, default=1, help="images per GPU submit (default 1)")
    p.add_argument("--labels", metavar="FILE",
                   help="class names, one per line (as many as the model has classes)")
    p.add_argument("--softmax", choices=("auto", "yes", "no"), default="auto",
                   help="apply softmax to the model's outputs: auto (default): unless the "
                        "model ends in Softmax (probabilities already; a final LogSoftmax's "
                        "log-probabilities get it, which gives the probabilities), yes, or no "
                        "(show the outputs as they are)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--size", type=int, default=None,
                   help="input side in pixels (default: the model's, else 224)")
    p.add_argument("--mean", type=float, nargs=3, default=IMAGENET_MEAN, metavar="M",
                   help="per-channel mean of [0, 1] values (default: ImageNet's)")
    p.add_argument("--std", type=float, nargs=3, default=IMAGENET_STD, metavar="S",
                   help="per-channel std (default: ImageNet's)")
    p.add_argument("-o", "--out", metavar="FILE",
                   help="also write the results as JSON to FILE (atomically)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads decoding images (default: min(4, CPUs); on a cluster: "
                        "batches each worker takes at once, default 4)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run on a local Dask cluster of N worker processes, each on its own "
                        "GPU (in turn if there are fewer GPUs)")
    p.add_argument("--devices", default=None, metavar="all|I,J",
                   help="one worker process per GPU: all of them, or these adapter indices "
                        "(each reads and decodes its own files)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on the Dask cluster at ADDRESS (e.g. tcp://host:8786)")
    p.add_argument("--f16", action="store_true",
                   help="store weights and activations as f16 (needs shader-f16)")
    p.add_argument("--mixed", action="store_true",
                   help="with --f16: the convolutions sum each k slice of 8-16 products in "
                        "f16 (faster on NVIDIA GPUs, larger error)")
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


# modes whose samples are not 8-bit: converting them to RGB would clip silently
_WIDE_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def load_crop(path, size: int) -> np.ndarray:
    """Decode an image file and take ``crop``'s ImageNet evaluation crop, uint8
    (size, size, 4) RGBA. A JPEG much larger than needed is decoded at 1/2, 1/4 or 1/8 scale
    (PIL's draft: libjpeg's DCT scaling, never below the resize target), and every step
    runs in PIL's C code with the GIL released, so that decoding threads run in parallel."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            if getattr(img, "n_frames", 1) > 1:
                raise wgc.ShapeError(f"path: {path!r} is an animation of {img.n_frames} "
                                     f"frames; classify single images")
            if img.mode in _WIDE_MODES:
                raise wgc.DtypeError(f"path: {path!r} has {img.mode} samples; 8-bit images "
                                     f"only (convert it first)")
            short = round(size * 256 / 224)
            w, h = img.size
            scale = short / min(w, h)
            tw, th = max(size, round(w * scale)), max(size, round(h * scale))
            img.draft("RGB", (tw, th))
            rgb = img.convert("RGB")
    except wgc.WgComputeError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise wgc.ArgumentError(f"path: cannot decode {path!r} as an image ({first})") from None
    rgb = rgb.resize((tw, th), Image.BILINEAR)
    left, top = (tw - size) // 2, (th - size) // 2
    return np.asarray(rgb.crop((left, top, left + size, top + size)).convert("RGBA"))


def _decode_into(path, size: int, out: np.ndarray, slot: int) -> str | None:
    """``load_crop`` into ``out[slot]``; a file that fails leaves the slot blank and gives
    its error message (one bad file must not stop the run)."""
    try:
        out[slot] = load_crop(path, size)
        return None
    except Exception as e:
        out[slot] = 0
        return f"{type(e).__name__}: {e}"


def _split(names, errors):
    """([(slot, path) decoded], [(path, error) failed]) of one batch."""
    ok = [(i, p) for i, (p, e) in enumerate(zip(names, errors)) if e is None]
    return ok, [(p, e) for p, e in zip(names, errors) if e is not None]


def decode_batches(files, size: int, batch: int, threads: int, ahead: int = 2):
    """Batches of ``load_crop``ed images, decoded by ``threads`` threads up to ``ahead``
    batches beyond the one being consumed (so decoding goes on while the GPU runs). Yields
    (uint8 (batch, size, size, 4) array, [(slot, path) decoded], [(path, error) failed]) per
    batch holding at least one image; failed and missing slots are zero."""

    with ThreadPoolExecutor(threads, thread_name_prefix="decode") as pool:
        pending: deque = deque()

        def submit(start):
            arr = np.empty((batch, size, size, 4), np.uint8)
            names = files[start:start + batch]
            arr[len(names):] = 0
            pending.append((arr, names, [pool.submit(_decode_into, p, size, arr, i)
                                         for i, p in enumerate(names)]))

        starts = iter(range(0, len(files), batch))
        for start in starts:
            submit(start)
            if len(pending) > ahead:
                break
        while pending:
            arr, names, futures = pending.popleft()
            nxt = next(starts, None)
            if nxt is not None:
                submit(nxt)
            ok, failed = _split(names, [f.result() for f in futures])
            if ok:
                yield arr, ok, failed
            elif failed:
                yield None, [], failed


def _load_labels(path: str | None, classes: int) -> list[str]:
    if path is None:
        return [str(i) for i in range(classes)]
    try:
        with open(path, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
    except OSError as e:
        raise UsageError(f"--labels: cannot read {path!r}: {e.strerror}") from None
    if len(names) != classes:
        raise UsageError(f"--labels: {path!r} has {len(names)} names; the model has "
                         f"{classes} classes (one name per class, in class order)")
    return names


# ops that only reshape their first input: a Softmax before them still ends the model
_RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")


def final_softmax(model) -> str | None:
    """"Softmax" or "LogSoftmax" when the model's output is one over the class axis (axis 1
    or -1), through any reshapes after it; else None (the output is logits)."""
    graph = model.graph
    producer = {o: n for n in graph.nodes for o in n.outputs}
    node = producer.get(graph.outputs[0]) if graph.outputs else None
    while node is not None and node.op in _RESHAPES and node.inputs:
        node = producer.get(node.inputs[0])
    if node is None or node.op not in ("Softmax", "LogSoftmax"):
        return None
    axis = node.attrs.get("axis", 1 if graph.opset < 13 else -1)
    return node.op if axis in (1, -1) else None


def wants_softmax(model, mode: str) -> bool:
    """--softmax: "yes", "no", or "auto": unless the model ends in Softmax (probabilities
    already). A LogSoftmax's outputs get it: softmax(log p) = p."""
    if mode == "auto":
        return final_softmax(model) != "Softmax"
    return mode == "yes"


class Classifier:
    """preprocess_batch -> model -> softmax as one pipeline per (input, output) buffer pair
    (stream_map reuses its slots' buffers, so a few pipelines serve a whole run). ``kernel``
    is the model as a kernel: Model.kernel, or the name wgc.ml.register_model gave it;
    ``softmax`` False leaves the model's outputs as they are."""

    def __init__(self, kernel, size: int, mean, std, softmax: bool = True):
        self.kernel = kernel
        self.size = size
        self.params = {"size": (size, size), "mean": tuple(mean), "std": tuple(std)}
        self.softmax = softmax
        self.pipelines: dict = {}

    def __call__(self, inp, out):
        key = (id(inp), id(out), inp.shape)
        p = self.pipelines.get(key)
        if p is None:
            n = inp.shape[0]
            p = wgc.pipeline(f"infer batch of {n}")
            p.add(kernel="preprocess_batch", inputs=[inp], params=self.params)
            pre = p.stages[-1]["output"]
            if not self.softmax:
                p.add(kernel=self.kernel, inputs=[pre], output=out)
            else:
                p.add(kernel=self.kernel, inputs=[pre],
                      output=wgc.empty(out.shape, "f32", label="logits"))
                logits = p.stages[-1]["output"]
                p.add(kernel="softmax", inputs=[logits], output=out)
            self.pipelines[key] = p
        return p.submit()


class ClusterClassifier:
    """The Classifier as work a Dask worker runs: the model travels as its recipe (its file
    and sha256, or its bytes). A worker unpickles this once and runs it through its own
    stream_map; the first batch registers the model as a kernel, once per worker process
    and model digest (wgc.dask's model work), so the kernels are those of a run without a
    cluster."""

    def __init__(self, model_recipe, size: int, mean, std, softmax: bool = True):
        self.model_recipe = model_recipe
        self.size = size
        self.mean = tuple(mean)
        self.std = tuple(std)
        self.softmax = softmax
        self.classifier = None

    def __call__(self, inp, out):
        if self.classifier is None:  # stream_map calls it on one thread, in batch order
            model = wgc.dask.work(self.model_recipe)
            kernel = model.stream_args((inp.shape[0], 3, self.size, self.size), "f32")["work"]
            self.classifier = Classifier(kernel, self.size, self.mean, self.std, self.softmax)
        return self.classifier(inp, out)


class DecodeBatch:
    """One batch of files decoded in a worker process, laid out as decode_batches lays it out
    (failed and missing slots blank): returns (batch, ([(slot, path) decoded], [(path, error)
    failed])), the second part travelling back with the batch's probabilities."""

    def __init__(self, size: int, batch: int):
        self.size = size
        self.batch = batch

    def __call__(self, names):
        arr = np.empty((self.batch, self.size, self.size, 4), np.uint8)
        arr[len(names):] = 0
        ok, failed = _split(names, [_decode_into(p, self.size, arr, i)
                                    for i, p in enumerate(names)])
        return arr, (ok, failed)


class ProcessClassifier:
    """The Classifier as work of a worker process: the model travels as its file's path (and
    how to load it) and is loaded once in the process, on its device."""

    def __init__(self, model_path: str, dtype: str, precision: str, size: int, mean, std,
                 softmax: bool = True):
        self.model_path = model_path
        self.dtype = dtype
        self.precision = precision
        self.size = size
        self.mean = tuple(mean)
        self.std = tuple(std)
        self.softmax = softmax
        self.classifier = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["classifier"] = None  # built in the worker
        return state

    def __call__(self, inp, out):
        if self.classifier is None:  # stream_map calls it on one thread, in batch order
            model = wgc.ml.load_onnx(self.model_path, dtype=self.dtype,
                                     precision=self.precision)
            self.classifier = Classifier(model.kernel, self.size, self.mean, self.std,
                                         self.softmax)
        return self.classifier(inp, out)


def top_classes(row: np.ndarray, top: int) -> list[tuple[int, float]]:
    """(class, probability) of the ``top`` most probable classes of one image, ties in
    class order."""
    return [(int(k), float(row[k])) for k in np.argsort(-row, kind="stable")[:top]]


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="img", desc="infer", file=sys.stderr, dynamic_ncols=True)


def classify(files, model, size: int, classes: int, *, mean, std, batch: int, top: int,
             threads: int, progress: bool, softmax: bool = True):
    """Decode on ``threads`` threads, classify through one stream_map. Returns (results,
    failures): (path, top_classes) per image classified, (path, error) per image that
    failed, both in the order of ``files``."""
    failures: list[tuple[str, str]] = []
    ok_slots: list[list[tuple[int, str]]] = []
    bar = _progress_bar(len(files), progress)

    def batches():
        # every batch holds `batch` images (the last is padded with blank ones): one
        # stream_map, its buffers and pipelines reused from the first batch to the last
        for arr, ok, failed in decode_batches(files, size, batch, threads):
            failures.extend(failed)
            if bar is not None:
                bar.update(len(failed))
            if arr is not None:
                ok_slots.append(ok)
                yield arr

    results = []
    try:
        stream = wgc.stream_map(Classifier(model.kernel, size, mean, std, softmax), batches(),
                                depth=3, out_shape=(batch, classes), out_dtype="f32")
        for i, probs in enumerate(stream):
            for slot, path in ok_slots[i]:
                results.append((path, top_classes(probs[slot], top)))
            if bar is not None:
                bar.update(len(ok_slots[i]))
    finally:
        if bar is not None:
            bar.close()
    return results, failures


def _classify_batch(w, names, size: int, batch: int, top: int):
    """One task on a worker: ``names`` decoded into a batch as decode_batches does it (failed
    and missing slots blank), classified through the worker's stream_map for ``w``. Returns
    ([(path, top_classes)], [(path, error)])."""
    arr = np.empty((batch, size, size, 4), np.uint8)
    arr[len(names):] = 0
    ok, failed = _split(names, [_decode_into(p, size, arr, i) for i, p in enumerate(names)])
    if not ok:
        return [], failed
    probs = wgc.dask.run_chunk(w, arr)
    return [(path, top_classes(probs[slot], top)) for slot, path in ok], failed


def classify_on_cluster(files, model, size: int, classes: int, *, mean, std, batch: int,
                        top: int, progress: bool, workers=None, scheduler=None, threads=None,
                        softmax: bool = True):
    """The files spread over a Dask cluster's workers (a local one of ``workers`` processes,
    or the one at ``scheduler``) in tasks of one batch each: a worker runs ``threads`` (4)
    tasks at once, and they meet in its one stream_map, which overlaps their decoding,
    upload, GPU work and download as a single process's does, so a task needs no more than
    a batch; small tasks keep what a dead worker's retries redo small and move the progress
    bar often. Each batch is laid out as classify() lays it out (padded to ``batch``), so
    each image meets the same kernels. Returns (results, failures) as classify() does."""
    import distributed

    fn = ClusterClassifier(wgc.dask.work(model).recipe, size, mean, std, softmax)
    w = wgc.dask.work(fn, {"out_shape": (batch, classes), "out_dtype": "f32"})
    chunks = [files[i:i + batch] for i in range(0, len(files), batch)]
    done: list = [None] * len(chunks)
    bar = _progress_bar(len(files), progress)
    kw = {} if scheduler is not None or threads is None else {"threads_per_worker": threads}
    key = f"wgcompute-infer-{w.digest()[:16]}-{time.monotonic_ns()}"
    try:
        with wgc.dask.connect(workers=workers, scheduler=scheduler, **kw) as client:
            futures = {client.submit(_classify_batch, w, names, size, batch, top, pure=False,
                                     key=f"{key}-{i}"): i for i, names in enumerate(chunks)}
            try:
                for f in distributed.as_completed(list(futures)):
                    i = futures[f]
                    try:
                        done[i] = f.result()
                    except Exception as e:  # a batch's failure must not stop the others
                        done[i] = [], [(p, f"{type(e).__name__}: {e}") for p in chunks[i]]
                    if bar is not None:
                        bar.update(len(chunks[i]))
            finally:
                for f in futures:
                    f.release()
    finally:
        if bar is not None:
            bar.close()
    return ([r for ok, _ in done for r in ok], [x for _, failed in done for x in failed])


def classify_on_devices(files, model, size: int, classes: int, *, mean, std, batch: int,
                        top: int, progress: bool, devices, threads: int, softmax: bool = True):
    """The files spread over one worker process per device (adapter indices, None: every
    GPU; or a wgc.DeviceProcesses already started) in batches of ``batch`` file names: each
    process decodes its batches on ``threads`` threads and classifies them through its own
    stream_map. Returns (results, failures) as classify() does, in the order of ``files``."""
    fn = ProcessClassifier(os.path.abspath(model.source), model.dtype, model.precision, size,
                           mean, std, softmax)
    chunks = [files[i:i + batch] for i in range(0, len(files), batch)]
    results: list = []
    failures: list = []
    bar = _progress_bar(len(files), progress)
    try:
        given = isinstance(devices, wgc.DeviceProcesses)
        loads = wgc.load_each(DecodeBatch(size, batch), chunks, threads)
        with (contextlib.nullcontext(devices) if given else wgc.device_processes(devices)) \
                as pool, wgc.stream_map(fn, loads, depth=3, out_shape=(batch, classes),
                                        out_dtype="f32", processes=pool) as stream:
            for i, got in enumerate(stream):
                probs, (ok, failed) = got
                failures.extend(failed)
                results.extend((path, top_classes(probs[slot], top)) for slot, path in ok)
                if bar is not None:
                    bar.update(len(chunks[i]))
    finally:
        if bar is not None:
            bar.close()
    return results, failures


def parse_devices(text: str | None):
    """--devices: None (not given), "all" (every GPU: None for device_processes) or adapter
    indices "0,1"."""
    if text is None:
        return None
    if text.strip().lower() == "all":
        return "all"
    try:
        found = [int(t) for t in text.split(",")]
    except ValueError:
        found = []
    count = len(wgc.devices())
    if not found or any(not 0 <= i < count for i in found):
        raise UsageError(f"--devices: expected all or adapter indices in 0..{count - 1} "
                         f"separated by commas (their order in `wgcompute info`), got {text!r}")
    return found


def _check_out(path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"-o: {path!r} is a directory; give the JSON file to write")
    if not os.path.isdir(folder):
        raise UsageError(f"-o: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"-o: cannot write in folder {folder!r}")


def _prepare(args):
    """The arguments checked and the model loaded: (files, model, size, classes, labels,
    softmax); a bad one raises UsageError or a WgComputeError."""
    for flag, value in (("--top", args.top), ("--batch", args.batch)):
        if value < 1:
            raise UsageError(f"{flag}: expected a positive int, got {value}")
    check_parallel_args(args)
    args.devices = parse_devices(args.devices)
    if args.devices is not None and (args.workers is not None or args.scheduler is not None):
        raise UsageError("--devices: give --devices (worker processes here) or --workers / "
                         "--scheduler (a Dask cluster), not both")
    if args.out is not None:
        _check_out(args.out)
    if not os.path.isfile(args.model):
        raise UsageError(f"MODEL: {args.model!r} is not a file")
    files = expand_inputs(args.inputs)
    require("PIL", "wgcompute infer")  # decodes the images: once, not once per file
    if args.mixed and not args.f16:
        raise UsageError("--mixed: needs --f16 (an f32 model sums in f32)")
    model = wgc.ml.load_onnx(args.model, dtype="f16" if args.f16 else "f32",
                             precision="mixed" if args.mixed else "f32")
    if len(model.input_names) != 1 or len(model.input_shapes[0] or ()) != 4:
        raise UsageError(f"MODEL: expected one (N, 3, H, W) image input, the model takes "
                         f"{model.input_shapes}")
    dims = model.input_shapes[0]
    size = args.size or (dims[2] if isinstance(dims[2], int) and dims[2] > 0 else 224)
    probe = model.plan((1, 3, size, size)).output_shape
    classes = int(np.prod(probe[1:]))
    labels = _load_labels(args.labels, classes)
    softmax = wants_softmax(model, args.softmax)
    return files, model, size, classes, labels, softmax


def run(args) -> int:
    try:
        files, model, size, classes, labels, softmax = _prepare(args)
    except (UsageError, wgc.WgComputeError) as e:
        print(f"wgcompute infer: error: {e}", file=sys.stderr)
        return 2
    stale = wgc.image.remove_stale_temps(args.out) if args.out is not None else []
    if stale:
        print(f"removed {len(stale)} temporary file(s) left by an interrupted run",
              file=sys.stderr)

    batch = args.batch
    if batch > len(files):  # every batch is padded to --batch images: no more than there are
        print(f"--batch: {batch} is more than the {len(files)} image(s); using {len(files)}",
              file=sys.stderr)
        batch = len(files)
    common = {"mean": args.mean, "std": args.std, "batch": batch, "top": args.top,
              "progress": not args.no_progress and sys.stderr.isatty(), "softmax": softmax}
    t0 = time.perf_counter()
    if args.devices is not None:
        found, failures = classify_on_devices(
            files, model, size, classes, **common, threads=args.threads or 4,
            devices=None if args.devices == "all" else args.devices)
    elif args.workers is not None or args.scheduler is not None:
        found, failures = classify_on_cluster(files, model, size, classes, **common,
                                              workers=args.workers, scheduler=args.scheduler,
                                              threads=args.threads)
    else:
        found, failures = classify(files, model, size, classes, **common,
                                   threads=args.threads or min(4, os.cpu_count() or 1))
    dt = time.perf_counter() - t0
    results = [{"file": path, "top": [{"class": k, "label": labels[k], "prob": p}
                                      for k, p in top]} for path, top in found]
    text = json.dumps({"model": args.model, "results": results,
                       "failed": [{"file": p, "error": m} for p, m in failures]}, indent=1)
    if args.json:
        print(text)
    else:
        for r in results:
            tops = ", ".join(f"{t['label']} ({t['prob']:.3f})" for t in r["top"])
            print(f"{r['file']}: {tops}")
    rc = 1 if failures else 0
    if args.out is not None:
        try:
            wgc.image.write_atomically(args.out, lambda tmp: Path(tmp).write_text(text + "\n",
                                                                       encoding="utf-8"))
        except OSError as e:
            print(f"wgcompute infer: error: -o: cannot write {args.out!r} "
                  f"({e.strerror or type(e).__name__})", file=sys.stderr)
            rc = 1
    n = len(results)
    print(f"classified {n} of {len(files)} image(s) in {dt:.2f} s: {rate(n, dt)}",
          file=sys.stderr if args.json else sys.stdout)
    if failures:
        print(f"{len(failures)} failed:", file=sys.stderr)
        for path, msg in failures:
            print(f"  {path}: {msg}", file=sys.stderr)
    return rc
