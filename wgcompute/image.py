"""Images in and out of the GPU: load/save files (imageio) as RGBA8 buffers, numpy
conversions, running image kernels with outputs sized from params, and --pipeline text."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

import numpy as np

from . import _atomic
from .buffer import Buffer, check_buffer, normalize_shape
from .buffer import empty as _empty
from .buffer import from_numpy as _buffer_from_numpy
from .commands import Command
from .dtypes import DTYPES
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DeviceError, DtypeError, ShapeError, WgComputeError
from .kernels import registry
from .kernels.base import Meta
from .kernels.image import ImageKernel

__all__ = ["load", "save", "from_numpy", "to_numpy", "to_uint8", "as_rgba8", "apply", "Stage",
           "parse_pipeline", "submit_stages", "read_file", "write_file", "write_atomically",
           "remove_stale_temps", "has_imageio", "INSTALL_HINT"]

INSTALL_HINT = 'pip install "wgcompute[image]"'

_NO_ALPHA = {".jpg", ".jpeg", ".bmp"}
WRITE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


# -- numpy <-> RGBA8 -----------------------------------------------------------------------------
def rgba8(array: np.ndarray, argument: str = "array") -> np.ndarray:
    """(H, W), (H, W, 1|2|3|4) uint8 -> (H, W, 4) uint8 (grey replicated, alpha 255 if none)."""
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"{argument}: expected a numpy array, got {type(array).__name__}")
    if array.dtype != np.uint8:
        raise DtypeError(f"{argument}: is {array.dtype}; images are uint8 (convert explicitly, "
                         f"e.g. with wgc.image.to_uint8 for floats in [0, 1])")
    a = array[..., None] if array.ndim == 2 else array
    if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
        raise ShapeError(f"{argument}: shape {array.shape}; expected (H, W) or (H, W, C) with "
                         f"C in 1..4")
    h, w, c = a.shape
    out = np.empty((h, w, 4), np.uint8)
    if c in (1, 2):
        out[..., :3] = a[..., :1]
    else:
        out[..., :3] = a[..., :3]
    out[..., 3] = a[..., -1] if c in (2, 4) else 255
    return out


def to_uint8(array: np.ndarray) -> np.ndarray:
    """Float image values in [0, 1] to uint8: clipped, then rounded to nearest (x * 255)."""
    try:
        a = np.asarray(array)
    except (TypeError, ValueError):  # ragged lists
        a = None
    if a is None or a.dtype.kind not in "biuf":
        raise ArgumentError(f"array: expected an array of numbers, got "
                            f"{type(array).__name__}")
    a = a.astype(np.float64)
    if np.isnan(a).any():
        raise ArgumentError("array: holds NaN, which has no 8-bit value")
    return np.clip(np.rint(a * 255.0), 0, 255).astype(np.uint8)


def from_numpy(array: np.ndarray, label: str = "") -> Buffer:
    """An RGBA8 buffer (u8 (H, W, 4)) from a uint8 (H, W) or (H, W, 1|2|3|4) array."""
    return _buffer_from_numpy(rgba8(array), label=label or "image")


def to_numpy(buf: Buffer, channels: int = 4) -> np.ndarray:
    """An image buffer as uint8 (H, W, channels): RGBA8 as is, f32 images through to_uint8.
    channels 3 drops alpha (or replicates grey), 4 adds alpha 255 where there is none, 1
    gives the grey level (H, W) of a grey image (R = G = B, as the grayscale stage makes);
    a colour image with channels=1 is an error, not a silent conversion."""
    check_buffer(buf, "buf")
    if isinstance(channels, bool) or channels not in (1, 3, 4):
        raise ArgumentError(f"channels: expected 1, 3 or 4, got {channels!r}")
    _check_image_array(buf.shape, buf.dtype, "buf")
    return as_rgba8(buf.to_numpy(), channels, "buf")


def _check_image_array(shape, dtype: str, argument: str) -> None:
    if dtype == "u8":
        if len(shape) != 3 or shape[2] != 4:
            raise ShapeError(f"{argument}: u8 {shape} is not an RGBA8 image (H, W, 4)")
    elif dtype == "f32":
        if len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] > 4):
            raise ShapeError(f"{argument}: f32 {shape} is not an image (H, W) or (H, W, 1..4)")
    else:
        raise DtypeError(f"{argument}: is {dtype}; images are u8 RGBA8 or f32")


def as_rgba8(array: np.ndarray, channels: int = 4, argument: str = "array") -> np.ndarray:
    """What to_numpy makes of an image buffer, for its contents already read back: uint8
    RGBA8 (H, W, 4) as is, float32 images through to_uint8; ``channels`` 3 drops alpha, 1
    gives the grey level of a grey image."""
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"{argument}: expected a numpy array, got {type(array).__name__}")
    if isinstance(channels, bool) or channels not in (1, 3, 4):
        raise ArgumentError(f"channels: expected 1, 3 or 4, got {channels!r}")
    dt = {np.dtype(np.uint8): "u8", np.dtype(np.float32): "f32"}.get(array.dtype,
                                                                    str(array.dtype))
    _check_image_array(array.shape, dt, argument)
    a = array if dt == "u8" else rgba8(to_uint8(array), argument)
    if channels == 1:
        if not _is_grey(a):
            raise ArgumentError("channels: 1 takes a grey image (R = G = B everywhere), and "
                                "this one has colour; run the grayscale stage first, or take "
                                "channels=3")
        return np.ascontiguousarray(a[..., 0])
    return a if channels == 4 else np.ascontiguousarray(a[..., :3])


def _is_grey(a: np.ndarray) -> bool:
    return bool((a[..., 0] == a[..., 1]).all() and (a[..., 1] == a[..., 2]).all())


def compact(a: np.ndarray) -> np.ndarray:
    """What a file needs of RGBA8 pixels: RGB when alpha is 255 everywhere, one grey channel
    (H, W) when the image is also grey; it loads back identical."""
    if not (a[..., 3] == 255).all():
        return a
    return np.ascontiguousarray(a[..., 0]) if _is_grey(a) else np.ascontiguousarray(a[..., :3])


# -- files ---------------------------------------------------------------------------------------
def _imageio():
    try:
        import imageio.v3 as iio
    except ImportError:
        raise WgComputeError(f"reading and writing image files needs imageio, which is not "
                             f"installed: {INSTALL_HINT}") from None
    return iio


def has_imageio() -> bool:
    """Whether image files can be read and written here (the ``image`` extra installed)."""
    try:
        _imageio()
    except WgComputeError:
        return False
    return True


def _path(path, argument: str = "path") -> str:
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"{argument}: expected a file path (str or os.PathLike), got "
                            f"{type(path).__name__}")
    path = os.fspath(path)
    if not path or "\0" in path:
        raise ArgumentError(f"{argument}: {path!r} is not a usable file path")
    return path


def write_atomically(path, write) -> str:
    """Write a file whole or not at all: ``write(tmp)`` fills a temporary file beside
    ``path``, which is then renamed onto it (a reader never sees half a file; the temporary is
    removed if ``write`` fails, and remove_stale_temps finds one a killed process left).
    Returns ``path``."""
    path = _path(path)
    if not callable(write):
        raise ArgumentError(f"write: expected a function taking the temporary file's path, got "
                            f"{type(write).__name__}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ArgumentError(f"path: the folder of {path!r} does not exist")
    return _atomic.write_atomically(path, write)


def read_file(path) -> np.ndarray:
    """Decode an image file to uint8 (H, W, 4) on the CPU (no GPU involved). A GIF of one
    frame is that frame; an animated GIF (or any file of several frames) is refused."""
    path = _path(path)
    if not os.path.isfile(path):
        raise ArgumentError(f"path: {path!r} is not a file")
    try:
        a = np.asarray(_imageio().imread(path, plugin="pillow"))
    except Exception as e:  # every codec raises its own type
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ArgumentError(f"path: cannot decode {path!r} as an image ({first})") from None
    if a.ndim == 4 and a.shape[0] == 1:  # pillow gives GIFs a frame axis, even for one
        a = a[0]
    if a.ndim == 4 or (a.ndim == 3 and a.shape[2] > 4):
        raise ShapeError(f"path: {path!r} is an animation of {a.shape[0]} frames; wgc.image "
                         f"loads single images (read one frame with imageio.v3.imread(path, "
                         f"index=0) and pass it to wgc.image.from_numpy)")
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    if a.dtype != np.uint8:
        raise DtypeError(f"path: {path!r} decodes to {a.dtype}; wgc.image handles 8-bit images "
                         f"(convert it first)")
    return rgba8(a, f"path {path!r}")


def load(path, label: str = "") -> Buffer:
    """Read an image file (PNG, JPEG, BMP, ... through imageio) into an RGBA8 buffer:
    u8 (H, W, 4), one pixel per 32-bit word. Grey is replicated; missing alpha is 255."""
    if not isinstance(label, str):
        raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
    path = _path(path)
    return _buffer_from_numpy(read_file(path), label=label or os.path.basename(path))


def write_file(array: np.ndarray, path) -> str:
    """Encode uint8 (H, W) grey or (H, W, 3|4) to ``path`` atomically: a temporary file
    beside it, then os.replace, so a reader never sees half a file. RGBA is written in the
    fewest channels that load back the same (RGB when opaque, grey when also R = G = B);
    formats without alpha drop it."""
    path = _path(path)
    if not isinstance(array, np.ndarray) or array.dtype != np.uint8 or not (
            array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise ArgumentError(f"array: expected a uint8 (H, W) or (H, W, 3|4) numpy array, got "
                            f"{getattr(array, 'dtype', type(array).__name__)} "
                            f"{getattr(array, 'shape', '')}")
    folder, name = os.path.split(os.path.abspath(path))
    ext = os.path.splitext(name)[1].lower()
    if ext not in WRITE_EXTS:
        raise ArgumentError(f"path: {path!r} needs an extension naming the format, one of "
                            f"{', '.join(WRITE_EXTS)}")
    if not os.path.isdir(folder):
        raise ArgumentError(f"path: folder {folder!r} does not exist")
    if array.ndim == 3 and array.shape[-1] == 4:
        array = compact(array)
    if ext in _NO_ALPHA and array.ndim == 3 and array.shape[-1] == 4:
        array = array[..., :3]
    data = np.ascontiguousarray(array)
    try:
        _atomic.write_atomically(path, lambda tmp: _imageio().imwrite(tmp, data, plugin="pillow",
                                                              extension=ext))
    except WgComputeError:
        raise
    except Exception as e:
        raise ArgumentError(f"path: cannot write {path!r} ({e})") from None
    return path


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":  # no harmless probe there (os.kill would end the process)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temps(path) -> list[str]:
    """Delete the temporary files that write_file left beside ``path`` in a run that was
    killed before it could rename them (only that pattern, and only when the process that
    wrote one has ended). Returns the paths removed."""
    path = _path(path)
    folder, name = os.path.split(os.path.abspath(path))
    ext = os.path.splitext(name)[1]
    pattern = re.compile(rf"\.{re.escape(name)}\.(?:(\d+)-)?[0-9a-f]{{12}}\.tmp"
                         rf"{re.escape(ext)}")
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for entry in entries:
        m = pattern.fullmatch(entry)
        if m is None or (m.group(1) is not None and _pid_alive(int(m.group(1)))):
            continue
        full = os.path.join(folder, entry)
        try:
            os.unlink(full)
        except OSError:
            continue
        removed.append(full)
    return removed


def save(buf: Buffer, path) -> str:
    """Write an image buffer to a file chosen by extension (blocks for the read-back).
    RGBA8 is written as is, as RGB when alpha is 255 everywhere, and as one grey channel
    when it is also grey (R = G = B): each loads back the same. f32 images (H, W[, 1|3|4])
    are clipped to [0, 1] and rounded to 8 bits. JPEG and BMP have no alpha: it is
    dropped. Returns the path."""
    check_buffer(buf, "buf")
    _path(path)
    return write_file(to_numpy(buf), path)


# -- running image kernels -------------------------------------------------------------------------
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
    ``apply("resize", img, size=(240, 320))`` needs no output buffer."""
    from .commands import run_kernel

    k = registry.get(kernel)
    check_buffer(image, "image")
    inputs = [image, *extra]
    return run_kernel(k, inputs, _output_for(k, inputs, params, out), params)


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
