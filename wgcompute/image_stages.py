"""Image kernels run with outputs sized from params (apply), and --pipeline text: its stages
parsed and checked without the GPU, their help, and their submission as one pipeline."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import numpy as np

from .buffer import Buffer, check_buffer, normalize_shape
from .buffer import empty as _empty
from .buffer import from_numpy as _buffer_from_numpy
from .commands import Command
from .dtypes import DTYPES
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DeviceError, WgComputeError
from .kernels import registry
from .kernels.core.base import Meta
from .kernels.image.image import ImageKernel


def _output_for(kernel, inputs, params, out):
    if out is not None:
        return out
    shape, dtype = kernel.output_spec(list(inputs), params)
    device = inputs[0].device
    if params.get("size") is not None:  # size= sets the output: a too large one is named
        nbytes = int(np.prod(shape, dtype=object)) * DTYPES[dtype].itemsize
        limit = device.limit("max-buffer-size")
        if nbytes > limit:
            raise DeviceError(f"{kernel.name}: param 'size': {tuple(params['size'])} makes a "
                              f"{shape} {dtype} output of {nbytes} bytes, more than this "
                              f"adapter's max-buffer-size ({limit} bytes, {device.name})")
    return _empty(shape, dtype, label=f"{kernel.name}-out", device=device)


def apply(kernel: str, image: Buffer, *extra: Buffer, out: Buffer | None = None,
          **params) -> Buffer:
    """Run one image kernel on ``image`` (and ``extra`` inputs, e.g. convolve2d's weights)
    and return its output, sized from params when ``out`` is None, so
    ``apply("resize", img, size=(240, 320))`` needs no output buffer. The kernel is queued as
    the operators' are (a read of the output waits for it)."""
    from ._lazy import enqueue

    k = registry.get(kernel)
    check_buffer(image, "image")
    inputs = [image, *extra]
    return enqueue(k, inputs, _output_for(k, inputs, params, out), params)


@dataclass
class Stage:
    """One parsed --pipeline stage: a kernel, its params, and where it was in the text."""

    kernel: str
    params: dict = field(default_factory=dict)
    text: str = ""
    span: tuple[int, int] = (0, 0)
    weights: np.ndarray | None = None  # convolve2d's kernel, given as weights=[[...]]


def _split(text: str) -> list[tuple[int, int]]:
    """Spans of the '|'-separated stages, ignoring '|' inside brackets or quotes."""
    spans, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "|" and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, len(text)))
    return spans


def _point(text: str, span, index: int, total: int, message: str) -> ArgumentError:
    a, b = span
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    caret = " " * a + "^" * max(1, b - a)
    return ArgumentError(f"--pipeline stage {index + 1} of {total}: {message}\n  {text}\n  {caret}")


_NOT_IMAGES = {"preprocess": "writes a CHW model tensor, not an image",
               "generate_gradient": "takes no input image"}


_MAX_NESTING = 100  # brackets inside brackets, or signs in a row: Python's parser recurses
_SIGNS = re.compile(r"(?:(?:[-+~]|\bnot\b)\s*){" + str(_MAX_NESTING + 1) + ",}")


def _nesting(piece: str) -> int:
    depth = deepest = 0
    for ch in piece:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def _parse_stage(piece: str):
    too_deep = (f"nested too deeply: at most {_MAX_NESTING} brackets inside each other or "
                f"signs in a row")
    if _nesting(piece) > _MAX_NESTING or _SIGNS.search(piece):
        raise ValueError(too_deep)
    try:
        node = ast.parse(piece.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError("expected name or name(param=value, ...)") from None
    except (RecursionError, MemoryError):  # e.g. 1+1+...+1: a tree too deep to build
        raise ValueError(too_deep) from None
    if isinstance(node, ast.Name):
        return node.id, {}
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError("expected name or name(param=value, ...)")
    if node.args:
        raise ValueError("params must be given by name, e.g. radius=3")
    params = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError("params must be given by name, e.g. radius=3")
        try:
            params[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise ValueError(f"param {kw.arg!r}: value {_source(piece, kw.value)!r} is not a "
                             f"literal (number, string, tuple or list)") from None
        except RecursionError:
            raise ValueError(f"param {kw.arg!r}: {too_deep}") from None
    return node.func.id, params


def _source(piece: str, node, limit: int = 60) -> str:
    """The text of ``node`` in the stripped ``piece`` (shortened): ast.unparse would recurse
    through a deep tree."""
    text = ast.get_source_segment(piece.strip(), node) or "?"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_pipeline(text: str, shape=(64, 64, 4), dtype: str = "u8") -> list[Stage]:
    """Parse "gaussian_blur(radius=3, sigma=1.5) | sharpen(amount=0.5) | grayscale" and
    validate every stage (kernel name, param names and values, shapes through the chain on a
    ``shape`` image) without touching the GPU. Errors point at the offending stage."""
    if not isinstance(text, str) or not text.strip():
        raise ArgumentError("--pipeline: expected stages like 'gaussian_blur(sigma=2) | "
                            "grayscale', got an empty string")
    spans = _split(text)
    stages = []
    meta = Meta(normalize_shape(shape, "shape"), resolve_dtype(dtype, "dtype").name)
    if meta.ndim not in (2, 3) or not all(meta.shape[:2]):
        raise ArgumentError(f"shape: expected an image shape (H, W) or (H, W, C) with H, W > 0, "
                            f"got {meta.shape}")
    for i, span in enumerate(spans):
        piece = text[span[0]:span[1]]

        def fail(msg, i=i, span=span):
            return _point(text, span, i, len(spans), msg)

        if not piece.strip():
            raise fail("empty stage")
        try:
            name, params = _parse_stage(piece)
        except ValueError as e:
            raise fail(str(e)) from None
        try:
            k = registry.get(name)
        except WgComputeError as e:
            raise fail(str(e)) from None
        if not isinstance(k, ImageKernel) or name in _NOT_IMAGES:
            why = _NOT_IMAGES.get(name, "is not an image kernel")
            raise fail(f"{name} {why}; image stages: {', '.join(image_stage_names())}")
        weights = None
        inputs = [meta]
        if name == "convolve2d":
            if "weights" not in params:
                raise fail("convolve2d needs weights=[[...], ...] (an odd-sized 2-D kernel)")
            try:
                weights = np.asarray(params.pop("weights"), dtype=np.float64)
            except (TypeError, ValueError):
                raise fail("convolve2d: weights must be a 2-D list of numbers") from None
            f32_max = float(np.finfo(np.float32).max)
            if not (np.isfinite(weights) & (np.abs(weights) <= f32_max)).all():
                bad = weights[~(np.isfinite(weights) & (np.abs(weights) <= f32_max))]
                raise fail(f"convolve2d: weights must be finite f32 numbers (|w| <= "
                           f"{f32_max:.4g}); {float(bad.flat[0])!r} is not")
            weights = weights.astype(np.float32)
            inputs.append(Meta(weights.shape, "f32"))
        try:
            resolved = k.resolve_params(params, DTYPES[meta.dtype])
            out = Meta(*k.output_spec(inputs, resolved))
            k.check(inputs, out, resolved)
        except WgComputeError as e:
            raise fail(str(e)) from None
        stages.append(Stage(name, params, piece.strip(), span, weights))
        meta = out
    return stages


def image_stage_names() -> list[str]:
    return sorted(n for n in registry.names()
                  if isinstance(registry.get(n), ImageKernel) and n not in _NOT_IMAGES)


_STAGE_INPUTS = {"convolve2d": ("weights", "the kernel: an odd-sized 2-D list of numbers, "
                                           "e.g. [[0, -1, 0], [-1, 5, -1], [0, -1, 0]]")}


def stage_help() -> str:
    """Every --pipeline stage with its params, their defaults and what they do, read from the
    kernel registry (so it lists what this installation runs)."""
    import textwrap

    from .kernels.core.base import REQUIRED

    lines = []
    for name in image_stage_names():
        k = registry.get(name)
        try:  # a param whose default only suits a given output buffer is required here
            parse_pipeline(name)
            bare = True
        except WgComputeError:
            bare = name in _STAGE_INPUTS
        sig, docs = [], []
        if name in _STAGE_INPUTS:
            sig.append(f"{_STAGE_INPUTS[name][0]}=...")
            docs.append((_STAGE_INPUTS[name][0], _STAGE_INPUTS[name][1] + " (required)"))
        for prm in k.params:
            required = prm.default is REQUIRED or (prm.default is None and not bare)
            sig.append(prm.name if required else f"{prm.name}={prm.default!r}")
            docs.append((prm.name, (prm.doc or "") + (" (required)" if required else "")))
        lines.append(f"  {name}({', '.join(sig)})" if sig else f"  {name}")
        body = [getattr(k, "description", "")] + [f"{n}: {d}" for n, d in docs]
        for text in filter(None, body):
            lines += textwrap.wrap(text, 88, initial_indent=" " * 6,
                                   subsequent_indent=" " * 8)
    return "\n".join(lines)


def submit_stages(image: Buffer, stages: list[Stage], label: str = "image") -> tuple[Command,
                                                                                        Buffer]:
    """Record every stage on ``image`` into one pipeline (one submit); returns the Command
    and the final output buffer (ready once the command completes)."""
    from .pipeline import pipeline

    check_buffer(image, "image")
    if isinstance(stages, (str, Stage)) or not isinstance(stages, (list, tuple)):
        raise ArgumentError(f"stages: expected a list of wgc.image.Stage (from "
                            f"parse_pipeline), got {type(stages).__name__}")
    if not stages:
        raise ArgumentError("stages: expected at least one stage")
    for i, s in enumerate(stages):
        if not isinstance(s, Stage):
            raise ArgumentError(f"stages[{i}]: expected a wgc.image.Stage (from "
                                f"parse_pipeline), got {type(s).__name__}")
    p = pipeline(label, device=image.device)
    cur = image
    for s in stages:
        k = registry.get(s.kernel)
        inputs = [cur]
        if s.weights is not None:
            inputs.append(_buffer_from_numpy(s.weights, label=f"{s.kernel}-weights",
                                             device=image.device))
        resolved = k.resolve_params(s.params, DTYPES[cur.dtype])
        out = _output_for(k, inputs, resolved, None)
        p.add(kernel=k.name, inputs=inputs, output=out, params=dict(s.params))
        cur = out
    return p.submit(), cur
