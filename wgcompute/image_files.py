"""Image files on the host, no GPU involved: decoding (imageio) to RGBA8 or f32 arrays, 16-bit
grey, animation frames, atomic writes, and the numpy <-> RGBA8 conversions they share."""

from __future__ import annotations

import os
import re

import numpy as np

from . import _atomic
from ._extras import install_hint, require
from .errors import ArgumentError, DtypeError, ShapeError, WgComputeError

INSTALL_HINT = install_hint("image")

_NO_ALPHA = {".jpg", ".jpeg", ".bmp"}
WRITE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
SIXTEEN_BIT_EXTS = (".png", ".tif", ".tiff")  # formats 16-bit (grey) images are written to
ANIMATION_EXTS = (".gif",)
LOAD_DTYPES = (None, "u8", "f32")


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
    return require("imageio.v3", "reading and writing image files")


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


_GENERIC = ("can not handle the given uri", "unknown error occurred")


def _cannot_decode(path: str, e: Exception) -> ArgumentError:
    """The error for a file the codec cannot read, with the codec's most telling words (the
    innermost cause when imageio's own text is generic)."""
    chain, c = [], e
    while c is not None and len(chain) < 8:
        chain.append(c)
        c = c.__cause__ or c.__context__
    texts = [str(x).strip().splitlines()[0] for x in chain if str(x).strip()]
    useful = [t for t in texts if not any(g in t.lower() for g in _GENERIC)]
    why = useful[-1] if useful and any(g in texts[0].lower() for g in _GENERIC) else \
        (texts[0] if texts else type(e).__name__)
    return ArgumentError(f"path: cannot decode {path!r}: it is not a readable image "
                         f"(truncated, corrupt, or not an image file: {why})")


def _check_dtype(dtype) -> None:
    if dtype not in LOAD_DTYPES:
        raise ArgumentError(f"dtype: expected None (the file's depth), 'u8' or 'f32', got "
                            f"{dtype!r}")


def _png_depth(path: str) -> tuple[int, int] | None:
    """(bit depth, colour type) from a PNG's header, None for other files: the codec (Pillow)
    reads 16-bit colour PNGs as 8-bit without saying so."""
    try:
        with open(path, "rb") as f:
            head = f.read(26)
    except OSError:
        return None
    if len(head) < 26 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return head[24], head[25]


def _pixels(a: np.ndarray, path: str, dtype) -> np.ndarray:
    """One decoded frame -> u8 RGBA8 (H, W, 4), or f32 RGBA (H, W, 4) in [0, 1] for 16-bit
    samples, (H, W, 3) where the file has no alpha (or dtype='f32': RGBA); dtype='u8'
    reduces 16 bits to 8, rounded."""
    if a.dtype == bool:
        a = a.astype(np.uint8) * 255
    if a.ndim == 3 and a.shape[2] > 4:
        raise ShapeError(f"path: {path!r} decodes to {a.shape}; expected an image (H, W[, C]) "
                         f"with C in 1..4")
    if a.dtype == np.uint16:
        if dtype == "u8":
            a = np.rint(a / 257.0).astype(np.uint8)
        else:
            # float images have no alpha (every channel is processed): RGB, or RGBA only
            # where the file has alpha
            a = a[..., None] if a.ndim == 2 else a
            alpha = a.shape[2] in (2, 4)
            out = np.empty(a.shape[:2] + (4 if alpha else 3,), np.float32)
            scaled = a.astype(np.float32) / np.float32(65535)  # exact: rint(x * 65535) == a
            out[..., :3] = scaled[..., :3] if a.shape[2] >= 3 else scaled[..., :1]
            if alpha:
                out[..., 3] = scaled[..., -1]
            return out
    if a.dtype != np.uint8:
        raise DtypeError(f"path: {path!r} decodes to {a.dtype}; wgc.image reads 8-bit and "
                         f"16-bit images (convert it first)")
    rgba = rgba8(a, f"path {path!r}")
    return (rgba.astype(np.float32) / np.float32(255)) if dtype == "f32" else rgba


def _frame_count(reader) -> int:
    return reader.properties(index=None).n_images or 1


def read_file(path, frame: int = 0, dtype: str | None = None) -> np.ndarray:
    """Decode one image (``frame`` of an animation: the first by default) on the CPU (no GPU
    involved): 8-bit files as uint8 RGBA8 (H, W, 4); 16-bit ones (grey PNG, TIFF) as float32
    RGB (H, W, 3) in [0, 1] (grey replicated; RGBA where the file has alpha), every 16-bit
    value kept (value / 65535). ``dtype`` 'u8' or
    'f32' asks for that form whatever the file holds (16 bits reduced to 8, rounded)."""
    path = _path(path)
    _check_dtype(dtype)
    if isinstance(frame, bool) or not isinstance(frame, int):
        raise ArgumentError(f"frame: expected an int, got {type(frame).__name__}")
    iio = _imageio()  # a missing extra is named, not reported as a file it cannot decode
    if not os.path.isfile(path):
        raise ArgumentError(f"path: {path!r} is not a file")
    _refuse_wide_colour(path, dtype)
    try:
        with iio.imopen(path, "r", plugin="pillow") as reader:
            n = _frame_count(reader)
            if not -n <= frame < n:
                raise ArgumentError(f"frame: {path!r} has {n} frame(s) (0..{n - 1}); got "
                                    f"{frame}")
            a = np.asarray(reader.read(index=frame % n))
    except WgComputeError:
        raise
    except Exception as e:  # every codec raises its own type
        raise _cannot_decode(path, e) from e
    return _pixels(a, path, dtype)


def _refuse_wide_colour(path: str, dtype) -> None:
    png = _png_depth(path)
    if png is not None and png[0] == 16 and png[1] != 0 and dtype != "u8":
        kind = {2: "RGB", 4: "grey + alpha", 6: "RGBA"}.get(png[1], "colour")
        raise DtypeError(f"path: {path!r} is a 16-bit {kind} PNG; the image codec (Pillow) "
                         f"reads only 16-bit grey PNGs with all their bits, so pass dtype='u8' "
                         f"to load it reduced to 8 bits, or convert it to 16-bit grey")


def read_frames(path, dtype: str | None = None) -> tuple[list[np.ndarray], dict]:
    """Every frame of an animated image (an animated GIF; a still image is one frame), each
    as read_file gives it, and what the file says about its timing: {"durations": [ms per
    frame], "loop": 0 for forever, else the count, or None}; write_frames takes it back."""
    path = _path(path)
    _check_dtype(dtype)
    iio = _imageio()
    if not os.path.isfile(path):
        raise ArgumentError(f"path: {path!r} is not a file")
    _refuse_wide_colour(path, dtype)
    try:
        with iio.imopen(path, "r", plugin="pillow") as reader:
            n = _frame_count(reader)
            frames = [np.asarray(reader.read(index=i)) for i in range(n)]
            metas = [reader.metadata(index=i) for i in range(n)] if n > 1 else [{}]
    except WgComputeError:
        raise
    except Exception as e:
        raise _cannot_decode(path, e) from e
    durations = [m["duration"] for m in metas] if all("duration" in m for m in metas) \
        and n > 1 else None
    info = {"durations": durations, "loop": metas[0].get("loop")}
    frames = [_pixels(a, path, dtype) for a in frames]
    if len({f.shape for f in frames}) > 1:
        raise ShapeError(f"path: {path!r} has frames of different sizes "
                         f"{sorted({f.shape[:2] for f in frames})}")
    return frames, info


def _dest(path, allowed=WRITE_EXTS) -> tuple[str, str]:
    path = _path(path)
    folder, name = os.path.split(os.path.abspath(path))
    ext = os.path.splitext(name)[1].lower()
    if ext not in allowed:
        raise ArgumentError(f"path: {path!r} needs an extension naming the format, one of "
                            f"{', '.join(allowed)}")
    if not os.path.isdir(folder):
        raise ArgumentError(f"path: folder {folder!r} does not exist")
    return path, ext


def _encodable(array: np.ndarray, ext: str, argument: str = "array") -> np.ndarray:
    """uint8 (H, W) or (H, W, 3|4) in the fewest channels, or uint16 grey (H, W)."""
    is_array = isinstance(array, np.ndarray)
    ok8 = is_array and array.dtype == np.uint8 and (
        array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4)))
    ok16 = is_array and array.dtype == np.uint16 and array.ndim == 2
    if not (ok8 or ok16):
        raise ArgumentError(f"{argument}: expected a uint8 (H, W) or (H, W, 3|4) numpy array, "
                            f"or uint16 (H, W) grey, got "
                            f"{getattr(array, 'dtype', type(array).__name__)} "
                            f"{getattr(array, 'shape', '')}")
    if ok16 and ext not in SIXTEEN_BIT_EXTS:
        raise ArgumentError(f"path: a 16-bit image needs a format that holds 16 bits, one of "
                            f"{', '.join(SIXTEEN_BIT_EXTS)}; {ext} holds 8 (convert to uint8 "
                            f"first, or save with bits=8)")
    if array.ndim == 3 and array.shape[-1] == 4:
        array = compact(array)
    if ext in _NO_ALPHA and array.ndim == 3 and array.shape[-1] == 4:
        array = array[..., :3]
    return np.ascontiguousarray(array)


def write_file(array: np.ndarray, path) -> str:
    """Encode uint8 (H, W) grey or (H, W, 3|4), or uint16 (H, W) grey (to PNG or TIFF, 16
    bits), to ``path`` atomically: a temporary file beside it, then os.replace, so a reader
    never sees half a file. RGBA is written in the fewest channels that load back the same
    (RGB when opaque, grey when also R = G = B); formats without alpha drop it."""
    path, ext = _dest(path)
    data = _encodable(array, ext)
    iio = _imageio()
    try:
        _atomic.write_atomically(path, lambda tmp: iio.imwrite(tmp, data, plugin="pillow",
                                                               extension=ext))
    except WgComputeError:
        raise
    except Exception as e:
        raise ArgumentError(f"path: cannot write {path!r} ({e})") from None
    return path


def write_frames(frames, path, durations=None, loop: int | None = 0) -> str:
    """Write uint8 frames (each as write_file takes, all one size) as an animated GIF,
    atomically. ``durations``: milliseconds per frame (one number for all, or a list; None:
    100), ``loop``: 0 repeats forever, n plays n + 1 times, None plays once."""
    path, ext = _dest(path, ANIMATION_EXTS)
    if isinstance(frames, np.ndarray) or not isinstance(frames, (list, tuple)) or not frames:
        raise ArgumentError(f"frames: expected a non-empty list of uint8 arrays, got "
                            f"{type(frames).__name__}")
    rgba = [as_rgba8(f, 4, f"frames[{i}]") if isinstance(f, np.ndarray) and f.ndim == 3 and
            f.shape[-1] == 4 else _encodable(f, ext, f"frames[{i}]")
            for i, f in enumerate(frames)]
    if any(f.dtype != np.uint8 for f in rgba):
        raise ArgumentError("frames: GIF holds 8 bits; expected uint8 frames")
    if len({f.shape[:2] for f in rgba}) > 1:
        raise ShapeError(f"frames: all frames must have one size, got "
                         f"{sorted({f.shape[:2] for f in rgba})}")
    stack = np.stack([rgba8(f, f"frames[{i}]") for i, f in enumerate(rgba)])
    if (stack[..., 3] == 255).all():
        stack = np.ascontiguousarray(stack[..., :3])
    if durations is None:
        durations = 100
    ds = [durations] * len(frames) if isinstance(durations, (int, float)) and \
        not isinstance(durations, bool) else durations
    if not isinstance(ds, (list, tuple)) or len(ds) != len(frames) or not all(
            isinstance(d, (int, float)) and not isinstance(d, bool) and d >= 0 for d in ds):
        raise ArgumentError(f"durations: expected milliseconds >= 0, one number or one per "
                            f"frame ({len(frames)}), got {durations!r}")
    if loop is not None and (isinstance(loop, bool) or not isinstance(loop, int) or loop < 0):
        raise ArgumentError(f"loop: expected an int >= 0 or None, got {loop!r}")
    kw = {"duration": [float(d) for d in ds]}
    if loop is not None:
        kw["loop"] = loop
    iio = _imageio()
    try:
        _atomic.write_atomically(path, lambda tmp: iio.imwrite(
            tmp, stack, plugin="pillow", extension=ext, is_batch=True, **kw))
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


def file_array(array: np.ndarray, bits: int = 8, argument: str = "array") -> np.ndarray:
    """What write_file takes for an image's contents read back (u8 RGBA8 or f32): uint8 as
    to_numpy gives it (``bits=8``), or uint16 grey (H, W) (``bits=16``: opaque grey images
    only, values clipped to [0, 1] and rounded to 16 bits)."""
    if bits not in (8, 16) or isinstance(bits, bool):
        raise ArgumentError(f"bits: expected 8 or 16, got {bits!r}")
    if bits == 8:
        return as_rgba8(array, 4, argument)
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"{argument}: expected a numpy array, got {type(array).__name__}")
    _check_image_array(array.shape, {np.dtype(np.uint8): "u8", np.dtype(np.float32): "f32"}
                       .get(array.dtype, str(array.dtype)), argument)
    a = array.astype(np.float32) / np.float32(255) if array.dtype == np.uint8 else array
    grey = a if a.ndim == 2 else a[..., 0]
    if a.ndim == 3 and a.shape[2] > 1:
        colour = a[..., :3] if a.shape[2] >= 3 else a[..., :1]
        opaque = a.shape[2] == 3 or bool((a[..., -1] >= 1.0).all())
        if not opaque or not (colour == grey[..., None]).all():
            raise ArgumentError(f"bits: 16 writes opaque grey images only (the codec, Pillow, "
                                f"writes no 16-bit colour or alpha); {argument} is "
                                f"{array.dtype} {array.shape} with colour or alpha: run the "
                                f"grayscale stage first, or save with bits=8")
    if np.isnan(grey).any():
        raise ArgumentError(f"{argument}: holds NaN, which has no 16-bit value")
    return np.clip(np.rint(grey.astype(np.float64) * 65535.0), 0, 65535).astype(np.uint16)
