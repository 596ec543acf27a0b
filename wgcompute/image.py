"""Images in and out of the GPU: load/save files (imageio) as RGBA8 (or 16-bit as f32)
buffers, animation frames, numpy conversions, image kernels with outputs sized from params,
and --pipeline text (files in image_files.py, kernels and stages in image_stages.py)."""

from __future__ import annotations

import os

import numpy as np

from .buffer import Buffer, check_buffer
from .buffer import from_numpy as _buffer_from_numpy
from .errors import ArgumentError
from .image_files import (  # noqa: F401 - what wgc.image has always offered
    ANIMATION_EXTS,
    INSTALL_HINT,
    LOAD_DTYPES,
    SIXTEEN_BIT_EXTS,
    WRITE_EXTS,
    _check_image_array,
    _dest,
    _path,
    as_rgba8,
    compact,
    file_array,
    has_imageio,
    read_file,
    read_frames,
    remove_stale_temps,
    rgba8,
    to_uint8,
    write_atomically,
    write_file,
    write_frames,
)
from .image_stages import (
    Stage,
    apply,
    image_stage_names,
    parse_pipeline,
    stage_help,
    submit_stages,
)

__all__ = ["load", "save", "load_frames", "save_frames", "read_frames", "write_frames",
           "from_numpy", "to_numpy", "to_uint8", "as_rgba8", "apply", "Stage",
           "parse_pipeline", "submit_stages", "stage_help", "image_stage_names", "read_file",
           "write_file", "file_array", "write_atomically", "remove_stale_temps", "has_imageio",
           "INSTALL_HINT"]


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


def load(path, label: str = "", *, frame: int = 0, dtype: str | None = None) -> Buffer:
    """Read an image file (PNG, JPEG, BMP, GIF, ... through imageio) into an image buffer:
    RGBA8, u8 (H, W, 4), one pixel per 32-bit word, grey replicated, missing alpha 255; a
    16-bit file as f32 (H, W, 3) in [0, 1] with every bit kept. ``frame`` picks one
    frame of an animated GIF (the first by default; load_frames gives them all); ``dtype``
    'u8' or 'f32' asks for that form whatever the file holds."""
    if not isinstance(label, str):
        raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
    path = _path(path)
    return _upload(read_file(path, frame, dtype), label or os.path.basename(path))


def load_frames(path, label: str = "", *, dtype: str | None = None) -> list[Buffer]:
    """Every frame of an animated GIF as image buffers (load's form), in order; a still
    image gives a list of one. read_frames gives the frames' durations and loop count."""
    if not isinstance(label, str):
        raise ArgumentError(f"label: expected a str, got {type(label).__name__}")
    path = _path(path)
    frames, _ = read_frames(path, dtype)
    name = label or os.path.basename(path)
    return [_upload(f, f"{name}[{i}]") for i, f in enumerate(frames)]


def _upload(array: np.ndarray, label: str) -> Buffer:
    """An image buffer from what read_file gives (u8 RGBA8, or f32 RGBA)."""
    if array.dtype == np.uint8:
        return _buffer_from_numpy(rgba8(array), label=label)
    _check_image_array(array.shape, "f32", "array")
    return _buffer_from_numpy(np.ascontiguousarray(array, np.float32), label=label)


def _to_file_array(buf: Buffer, bits: int) -> np.ndarray:
    _check_image_array(buf.shape, buf.dtype, "buf")
    return file_array(buf.to_numpy(), bits, "buf")


def save(buf: Buffer, path, *, bits: int = 8) -> str:
    """Write an image buffer to a file chosen by extension (blocks for the read-back).
    RGBA8 is written as is, as RGB when alpha is 255 everywhere, and as one grey channel
    when it is also grey (R = G = B): each loads back the same. f32 images (H, W[, 1|3|4])
    are clipped to [0, 1] and rounded to 8 bits, or with ``bits=16`` to 16 (PNG or TIFF,
    grey images: what load gives for a 16-bit file comes back with every bit). JPEG and
    BMP have no alpha: it is dropped. Returns the path."""
    check_buffer(buf, "buf")
    if bits not in (8, 16) or isinstance(bits, bool):
        raise ArgumentError(f"bits: expected 8 or 16, got {bits!r}")
    path, ext = _dest(path)
    if bits == 16 and ext not in SIXTEEN_BIT_EXTS:
        raise ArgumentError(f"bits: 16 needs a format that holds 16 bits, one of "
                            f"{', '.join(SIXTEEN_BIT_EXTS)}; {path!r} is {ext}")
    return write_file(_to_file_array(buf, bits), path)


def save_frames(bufs, path, durations=None, loop: int | None = 0) -> str:
    """Write image buffers (as load_frames gives them) as an animated GIF (see
    write_frames for ``durations`` and ``loop``; read_frames gives a file's own)."""
    if isinstance(bufs, Buffer) or not isinstance(bufs, (list, tuple)) or not bufs:
        raise ArgumentError(f"bufs: expected a non-empty list of image buffers, got "
                            f"{type(bufs).__name__}")
    for i, b in enumerate(bufs):
        check_buffer(b, f"bufs[{i}]")
    _dest(path, ANIMATION_EXTS)
    return write_frames([to_numpy(b) for b in bufs], path, durations, loop)
