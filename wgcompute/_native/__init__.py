"""The wall around wgpu's internals: the only code that touches wgpu-native's C API (``_ffi``,
``lib``), wgpu-py's private attributes and rendercanvas's privates. ``link(gpu_device)`` gives
the calls of one device: ``fast`` (wgpu-native directly) for the wgpu-py version it was written
for, else ``portable`` (wgpu-py's public API: slower, correct); device_info() says which."""

from __future__ import annotations

import logging
import os

import wgpu

from ._errors import NativeError

WRITTEN_FOR = "0.32."  # the wgpu-py release line whose internals `fast` uses

_choice = os.environ.get("WGCOMPUTE_NATIVE", "").strip().lower()
NOTE = ""  # why the portable backend is used, when it is
if _choice not in ("", "fast", "portable"):
    NOTE = f"WGCOMPUTE_NATIVE={_choice!r} is not 'fast' or 'portable'; "
    _choice = ""
if _choice == "portable":
    from . import portable as backend

    NOTE += "WGCOMPUTE_NATIVE=portable: wgpu-py's public API (slower)"
elif not wgpu.__version__.startswith(WRITTEN_FOR):
    from . import portable as backend

    NOTE += (f"wgpu {wgpu.__version__} is not the {WRITTEN_FOR}x wgcompute's fast path was "
             f"written for: using wgpu-py's public API (slower, correct)")
else:
    try:
        from . import _cdef

        with _cdef.cached():  # wgpu-py parses wgpu-native's C header as `fast` imports it
            from . import fast as backend
    except Exception as e:  # internals moved inside a 0.32.x release
        from . import portable as backend

        NOTE += f"wgpu-native internals unavailable ({e}): using wgpu-py's public API"

MODE = backend.MODE
ERRORS = (wgpu.GPUError, NativeError)  # what native calls raise: wrap these, never a user's


def link(gpu_device):
    """The native calls for one wgpu-py GPUDevice (see fast.Link)."""
    return backend.Link(gpu_device)


def surface_formats(link, context) -> int | None:
    """How many formats ``link``'s adapter can present to the window of a rendercanvas "wgpu"
    context: 0 when it cannot present there at all, None when unknown (an offscreen canvas,
    or the portable backend)."""
    if getattr(context, "_present_info", {}).get("method") != "screen":
        return None  # a bitmap context renders into a texture wgcompute reads back
    wgpu_context = getattr(context, "_wgpu_context", None)
    return None if wgpu_context is None else link.surface_formats(wgpu_context)


def process_canvas_events(canvas) -> None:
    """rendercanvas's own per-frame hook: polls the window system, emits resize events,
    flushes queued events (rendercanvas has no public call for it outside its loop)."""
    canvas._process_events()


# -- device loss ---------------------------------------------------------------------------------
# wgpu-py creates devices with a lost callback that only logs ("The WGPU device was lost ...")
# and keeps no state; the log record is the one signal there is. Which device it was, the
# runtime finds out by probing each of its devices.

class _LostHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.listeners: list = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:
            return
        if "device was lost" in text or text.startswith("DEVICE LOST"):
            for fn in list(self.listeners):
                try:
                    fn(text)
                except Exception:  # a listener must not break wgpu's logging
                    pass


_lost_handler: _LostHandler | None = None


def on_device_lost(fn) -> None:
    """Call ``fn(message)`` whenever wgpu reports a device lost (any device)."""
    global _lost_handler
    if _lost_handler is None:
        _lost_handler = _LostHandler()
        logging.getLogger("wgpu").addHandler(_lost_handler)
    _lost_handler.listeners.append(fn)


def is_lost_error(error: BaseException) -> bool:
    """Whether a wgpu error says the device is gone."""
    text = str(error).lower()
    return "device is lost" in text or "device lost" in text or "device is invalid" in text
