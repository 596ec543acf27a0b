"""`wgcompute tune MODEL.onnx --batch 1,32`: time a model's kernel configurations ahead of its
first use, so that no call of it waits for tuning and the first one already runs tuned."""

from __future__ import annotations

import os
import time

DESCRIPTION = """\
Run an ONNX model once per batch size with tuning on the caller: every convolution and matmul
shape of the model times its candidate configurations on this GPU and the winners are kept
in the autotune cache (autotune.json in the user cache folder), where later processes find
them. Without this, a model's first call runs the default configurations at once and the
tuning happens in the background.

  wgcompute tune model.onnx --batch 1,32
  wgcompute tune model.onnx --batch 8 --size 320     (inputs with dynamic height and width)"""


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model to tune")
    p.add_argument("--batch", default="1", help="batch sizes, comma-separated (default 1)")
    p.add_argument("--size", type=int, default=None,
                   help="the value of every other dynamic axis (e.g. an image's height and "
                        "width); required when the model has such axes")
    p.add_argument("--dtype", choices=("f32", "f16"), default="f32",
                   help="the dtype the model computes in (default f32)")


def _batches(text: str) -> list[int]:
    from wgcompute import ArgumentError

    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        out = []
    if not out or any(b < 1 for b in out):
        raise ArgumentError(f"--batch: expected positive integers separated by commas, got "
                            f"{text!r}")
    return out


def _shape(name: str, dims, batch: int, size: int | None) -> tuple[int, ...]:
    from wgcompute import ArgumentError

    shape = []
    for i, d in enumerate(dims or ()):
        if isinstance(d, int) and d > 0 and i > 0:
            shape.append(d)
        elif i == 0:
            shape.append(batch)
        elif size is None:
            raise ArgumentError(f"input {name!r} has a dynamic axis {i} ({d!r}); give its "
                                f"value with --size")
        else:
            shape.append(size)
    return tuple(shape)


def run(args) -> int:
    os.environ["WGCOMPUTE_AUTOTUNE"] = "now"  # this process tunes on the caller
    import numpy as np

    import wgcompute as wgc
    from wgcompute import autotune

    batches = _batches(args.batch)
    model = wgc.ml.load_onnx(args.model, dtype=args.dtype)
    if model.host_inputs:
        raise wgc.ArgumentError(f"{args.model}: integer inputs ({', '.join(model.host_inputs)}) "
                                f"set shapes; tune such a model by running it")
    dev = wgc.current_device()
    if not dev.is_gpu:
        print(f"note: {dev.name} is not a GPU; its timings would say nothing about one, but "
              f"they are taken as asked")
    rng = np.random.default_rng(0)
    def kept() -> int:
        return len(autotune.stored(dev))

    for b in batches:
        before = kept()
        xs = [rng.standard_normal(_shape(n, d, b, args.size)).astype(np.float32)
              for n, d in zip(model.input_names, model.input_shapes, strict=True)]
        t0 = time.perf_counter()
        model.run(xs)
        dt = time.perf_counter() - t0
        print(f"batch {b}: {kept() - before} configuration choices timed in "
              f"{dt:.1f} s")
    print(f"kept in {autotune.cache_path()}")
    return 0
