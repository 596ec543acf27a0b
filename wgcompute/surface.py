"""Surfaces: show GPU buffers in a glfw window or an offscreen canvas on the device that holds
them, with no trip through the CPU. The only module that imports rendercanvas (and glfw),
lazily."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import wgpu

from . import _native
from .buffer import Buffer, check_buffer, empty, from_numpy
from .commands import Command, bound, prepare_output, submit_work
from .errors import (
    ArgumentError,
    DeviceError,
    DtypeError,
    ShapeError,
    SurfaceError,
    WgComputeError,
)
from .kernels import registry
from .pipeline import Pipeline
from .runtime import Device, resolve
from .surface_programs import _TO_RGBA8, _present_pipeline, image_layout

# Non-sRGB formats first: the bytes of an RGBA8 buffer must reach the screen unchanged (an
# sRGB target would re-encode them). The preferred format is the last resort.
_FORMATS = ("rgba8unorm", "bgra8unorm")
_SHOWN_FORMAT = "rgba8unorm"
_CLOSE_WAIT_S = 10.0  # how long close() waits for this surface's last GPU work
_EVENT_TYPES = ("key_down", "key_up", "char", "pointer_down", "pointer_up", "wheel", "resize",
                "close")


def has_display() -> bool:
    """True where a window can open: on Linux/BSD an X11 or Wayland display is set."""
    if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


# -- Surface ---------------------------------------------------------------------------------

class Surface:
    """A window (glfw, through rendercanvas) or an offscreen canvas showing GPU buffers.

    ``set_pixels`` (or ``run_to_surface``) fills the surface's frame on the GPU; ``present``
    draws the frame to the screen (scaled to the surface's current size); ``snapshot``
    reads back what the last ``present`` drew. Compute and surface share one device, so
    a kernel's output reaches the screen without leaving the GPU. ``close()`` (or leaving
    a ``with`` block) waits for this surface's own GPU work, then releases the canvas
    context and the canvas; the device stays (it closes the surface when it closes)."""

    def __init__(self, width: int, height: int, title: str = "wgcompute",
                 offscreen: bool | None = None, device: Device | None = None):
        self._device = resolve(device)
        self._offscreen = (not has_display()) if offscreen is None else bool(offscreen)
        self._closed = False
        self._lock = threading.RLock()
        self._events: list[dict] = []
        self._frame: Buffer | None = None
        self._bind_group = None
        self._bound_frame_id = None
        self._uniform_values = None
        self._shown = None  # window: a copy of what the last present drew, for snapshot()
        self._presented = False
        self._last_cmd: Command | None = None
        self._draw_error: BaseException | None = None
        self._canvas = self._make_canvas(int(width), int(height), title)
        try:
            self._context = self._canvas.get_context("wgpu")
            self._format = self._configure()
        except Exception as e:
            self._canvas.close()
            raise SurfaceError(f"create_surface: could not configure the canvas for "
                               f"{self._device.name}: {e}") from e
        self._uniform = self._device.gpu_device.create_buffer(
            label="surface-present-params", size=16,
            usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self._device.adopt(self)
        self._canvas.add_event_handler(self._on_event, *_EVENT_TYPES)
        self._canvas.request_draw(self._noop_draw if self._offscreen else self._draw)
        if not self._offscreen:
            self._wait_for_size(int(width), int(height))

    # -- construction ------------------------------------------------------------------------
    def _make_canvas(self, width: int, height: int, title: str):
        if self._offscreen:
            from rendercanvas.offscreen import RenderCanvas

            canvas = RenderCanvas(size=(width, height), title=title, update_mode="manual")
            canvas.set_physical_size(width, height)
            return canvas
        if not has_display():
            raise SurfaceError("create_surface: offscreen=False but there is no display "
                               "(DISPLAY and WAYLAND_DISPLAY are unset); run under a desktop "
                               "or Xvfb, or pass offscreen=True")
        try:
            from rendercanvas.glfw import RenderCanvas
        except ImportError as e:
            raise SurfaceError(f"create_surface: a window needs glfw ({e}); install the "
                               f"`glfw` Python package and the library (Debian: "
                               f"apt-get install libglfw3), or pass offscreen=True") from e
        try:
            return RenderCanvas(size=(width, height), title=title, update_mode="manual",
                                vsync=False)
        except Exception as e:
            raise SurfaceError(f"create_surface: glfw could not open a window: {e}") from e

    def _configure(self) -> str:
        """Configure the context with the first format it accepts; returns the format."""
        dev = self._device
        if _native.surface_formats(dev.link, self._context) == 0:
            # configuring anyway would abort the process inside wgpu-native
            raise SurfaceError(f"its {dev.backend} adapter cannot present to this window (wgpu "
                               f"lists no surface format of it for the window); open the "
                               f"surface on a device of another backend, or pass offscreen=True")
        preferred = self._context.get_preferred_format(self._device.adapter)
        candidates = [f for f in _FORMATS if f != preferred] + [preferred]
        for i, fmt in enumerate(candidates):
            try:
                self._context.configure(device=self._device.gpu_device, format=fmt,
                                        usage=wgpu.TextureUsage.RENDER_ATTACHMENT)
                return fmt
            except ValueError:  # "unsupported texture format": try the next one
                if i == len(candidates) - 1:
                    raise
        raise AssertionError("unreachable")

    def _wait_for_size(self, width: int, height: int, timeout: float = 2.0) -> None:
        """glfw applies a window size asynchronously: pump events until it has."""
        end = time.perf_counter() + timeout
        while self.size != (width, height) and time.perf_counter() < end:
            self._pump()
            time.sleep(0.005)

    # -- state -------------------------------------------------------------------------------
    @property
    def offscreen(self) -> bool:
        return self._offscreen

    @property
    def closed(self) -> bool:
        """True once close() ran or the user closed the window."""
        return self._closed or self._canvas.get_closed()

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the surface in physical pixels."""
        w, h = self._canvas.get_physical_size()
        return int(w), int(h)

    @property
    def width(self) -> int:
        return self.size[0]

    @property
    def height(self) -> int:
        return self.size[1]

    @property
    def format(self) -> str:
        """The texture format the surface presents in (never an sRGB one when avoidable)."""
        return self._format

    @property
    def device(self) -> Device:
        return self._device

    @property
    def frame_shape(self) -> tuple[int, int] | None:
        """(height, width) of the image the surface shows (scaled to its size), or None."""
        return self._frame.shape if self._frame is not None else None

    def __repr__(self) -> str:
        kind = "offscreen" if self._offscreen else "window"
        state = " closed" if self.closed else ""
        w, h = self._canvas.get_physical_size() if not self._closed else (0, 0)
        return f"<wgc.Surface {kind} {w}x{h} {self._format}{state}>"

    def _check_open(self, where: str) -> None:
        if self.closed:
            raise SurfaceError(f"{where}: the surface is closed")

    # -- filling the frame ------------------------------------------------------------------
    def _frame_for(self, h: int, w: int) -> Buffer:
        """The frame buffer, (re)allocated for an h×w image."""
        if self._frame is not None and self._frame.shape == (h, w):
            return self._frame
        limit = self._device.limit("max-storage-buffer-binding-size")
        if h * w * 4 > limit:
            raise ShapeError(f"surface: an image of {h}x{w} pixels needs {h * w * 4} bytes of "
                             f"frame; this adapter binds at most {limit} ({self._device.name})")
        old, self._frame = self._frame, empty((h, w), "u32", label="surface-frame",
                                              device=self._device)
        if old is not None:
            old.free()  # deferred by the buffer itself while a command still uses it
        return self._frame

    def _recorder(self, src: Buffer, frame: Buffer):
        """A function(encoder) recording src -> frame on the GPU."""
        h, w, c = image_layout(src.shape, src.dtype, "src")
        limit = self._device.limit("max-storage-buffer-binding-size")
        if src.nbytes > limit and not (src.dtype == "u8" and c == 4):
            raise ShapeError(f"surface: a {src.dtype} {src.shape} image is {src.nbytes} bytes; "
                             f"converting it binds it whole, and this adapter binds at most "
                             f"{limit} ({self._device.name})")
        if src.dtype == "u8" and c == 4:  # already RGBA8 bytes: a plain copy
            return lambda enc: enc.copy_buffer_to_buffer(src.gpu_buffer, 0, frame.gpu_buffer,
                                                         0, h * w * 4)
        d = bound(_TO_RGBA8, [src], frame, None)

        def record(enc):
            cpass = enc.begin_compute_pass()
            d.encode(cpass)
            cpass.end()

        return record

    def set_pixels(self, data) -> Command | None:
        """Set the image to show: a numpy array or a Buffer, (H, W) or (H, W, C) with C 1, 3
        or 4, u8 (0..255) or f32 (0..1, clamped). Buffers are converted on the GPU; numpy
        RGBA u8 is uploaded as is. Shown at the next present() (scaled to the surface).
        Returns the GPU command filling the frame (None for a direct upload)."""
        self._check_open("set_pixels")
        with self._lock:
            if isinstance(data, Buffer):
                check_buffer(data, "data")
                self._same_device(data, "data")
                h, w, _ = image_layout(data.shape, data.dtype, "data")
                frame = self._frame_for(h, w)
                record = self._recorder(data, frame)
                return self._submit("surface-set-pixels", record, [data, frame])
            if not isinstance(data, np.ndarray):
                raise ArgumentError(f"data: expected a numpy array or a wgc.Buffer, got "
                                    f"{type(data).__name__}")
            if data.dtype == np.uint8:
                dtype = "u8"
            elif data.dtype == np.float32:
                dtype = "f32"
            else:
                raise DtypeError(f"data: images are uint8 (0..255) or float32 (0..1), got "
                                 f"{data.dtype}; convert explicitly, e.g. .astype(np.float32)")
            h, w, c = image_layout(data.shape, dtype, "data")
            if dtype == "u8" and c == 4:
                words = np.ascontiguousarray(data).reshape(h, w * 4).view("<u4")
                self._frame_for(h, w).write(words)
                return None
            tmp = from_numpy(np.ascontiguousarray(data), label="surface-pixels",
                             device=self._device)
            try:
                return self.set_pixels(tmp)
            finally:
                tmp.free()  # deferred until the conversion has run

    def _same_device(self, buf: Buffer, argument: str) -> None:
        if buf._dev is not self._device:
            raise DeviceError(f"{argument}: {buf!r} is on {buf._dev.label}, the surface on "
                              f"{self._device.label} (copy with buf.to(device))")

    def _submit(self, label: str, record, buffers, result=None) -> Command:
        cmd = submit_work(label, self._device, record, buffers, result, full=True)
        self._last_cmd = cmd
        return cmd

    # -- presenting ----------------------------------------------------------------------------
    def _bind(self, frame: Buffer):
        if self._bound_frame_id != frame._id:
            _, bgl = _present_pipeline(self._device, self._target_formats())
            self._bind_group = self._device.gpu_device.create_bind_group(
                label="surface-present", layout=bgl, entries=[
                    {"binding": 0, "resource": {"buffer": frame.gpu_buffer}},
                    {"binding": 1, "resource": {"buffer": self._uniform}}])
            self._bound_frame_id = frame._id
        return self._bind_group

    def _target_formats(self) -> tuple[str, ...]:
        return (self._format,) if self._offscreen else (self._format, _SHOWN_FORMAT)

    def _blit(self, texture, shown) -> None:
        """Record and submit one render pass: frame -> texture (and the snapshot copy)."""
        tw, th = texture.size[0], texture.size[1]
        frame = self._frame
        if frame is None:
            frame = self._frame_for(th, tw)  # nothing set yet: transparent black
        fh, fw = frame.shape
        values = (fw, fh, tw, th)
        if values != self._uniform_values:
            self._device.queue.write_buffer(self._uniform, 0, np.array(values, "<u4"))
            self._uniform_values = values
        pipeline, _ = _present_pipeline(self._device, self._target_formats())
        bind_group = self._bind(frame)
        targets = [texture] + ([shown] if shown is not None else [])

        def record(enc):
            rp = enc.begin_render_pass(label="surface-present", color_attachments=[
                {"view": t.create_view(), "load_op": "clear", "store_op": "store",
                 "clear_value": (0.0, 0.0, 0.0, 1.0)} for t in targets])
            rp.set_pipeline(pipeline)
            rp.set_bind_group(0, bind_group)
            rp.draw(3)
            rp.end()

        cmd = self._submit("surface-present", record, [frame])
        if self._device.backend == "OpenGL":
            # wgpu's GL backend lets a later copy into the frame overtake this pass's reads of
            # it (measured on llvmpipe: 8 of 300 snapshots showed pixels set after present)
            cmd.wait()
        if cmd.error is not None:
            raise SurfaceError(f"present: the GPU refused the present pass: {cmd.error}") \
                from cmd.error

    def _draw(self) -> None:
        """rendercanvas' draw callback (window): runs inside present() and on resizes."""
        with self._lock:
            try:
                texture = self._context.get_current_texture()
                w, h = texture.size[0], texture.size[1]
                if self._shown is None or self._shown.size[:2] != (w, h):
                    if self._shown is not None:
                        self._shown.destroy()  # wgpu keeps it for work already submitted
                    self._shown = self._device.gpu_device.create_texture(
                        label="surface-shown", size=(w, h, 1), format=_SHOWN_FORMAT,
                        usage=wgpu.TextureUsage.RENDER_ATTACHMENT | wgpu.TextureUsage.COPY_SRC)
                self._blit(texture, self._shown)
            except BaseException as e:  # rendercanvas only logs draw errors: present() raises
                self._draw_error = e
                raise

    def _noop_draw(self) -> None:
        """Offscreen: the canvas texture already holds the frame; drawing reads it back."""

    def present(self) -> None:
        """Draw the frame to the surface (scaled to its current size). The only GPU work is
        one render pass from the frame buffer; offscreen, the canvas texture keeps it for
        snapshot(). Returns without waiting for the GPU."""
        self._check_open("present")
        with self._lock:
            if self._offscreen:
                self._blit(self._context.get_current_texture(), None)
            else:
                self._draw_error = None
                self._canvas.force_draw()
                if self._draw_error is not None:
                    err, self._draw_error = self._draw_error, None
                    if isinstance(err, WgComputeError):
                        raise err
                    raise SurfaceError(f"present: drawing failed: {err}") from err
            self._presented = True

    def snapshot(self) -> np.ndarray:
        """What the last present() drew, as a new (height, width, 4) uint8 RGBA array
        (zeros before the first present). Blocks: this is a read back from the GPU."""
        self._check_open("snapshot")
        with self._lock:
            if not self._presented:
                w, h = self.size
                return np.zeros((h, w, 4), np.uint8)
            if self._offscreen:
                image = self._canvas.draw()  # rendercanvas downloads its texture
                if image is None:
                    raise SurfaceError("snapshot: the offscreen canvas returned no image")
                return np.array(image, dtype=np.uint8, copy=True)
            return self._read_shown()

    def _read_shown(self) -> np.ndarray:
        tex = self._shown
        w, h = tex.size[0], tex.size[1]
        stride = (w * 4 + 255) // 256 * 256  # WebGPU: bytes_per_row is a multiple of 256
        tmp = empty((h, stride), "u8", label="surface-snapshot", device=self._device)
        try:
            def record(enc):
                enc.copy_texture_to_buffer(
                    {"texture": tex, "mip_level": 0, "origin": (0, 0, 0)},
                    {"buffer": tmp.gpu_buffer, "offset": 0, "bytes_per_row": stride,
                     "rows_per_image": h}, (w, h, 1))

            self._submit("surface-snapshot", record, [tmp])
            rows = tmp.to_numpy()
        finally:
            tmp.free()
        return np.ascontiguousarray(rows[:, :w * 4].reshape(h, w, 4))

    # -- window management ---------------------------------------------------------------------
    def _on_event(self, event: dict) -> None:
        self._events.append(dict(event))

    def _pump(self) -> None:
        _native.process_canvas_events(self._canvas)

    def poll_events(self) -> list[dict]:
        """Process window events now and return those since the last call (rendercanvas
        event dicts: ``{"event_type": "key_down", "key": "s", "modifiers": (...)}``, resize,
        close, pointer events). Call it once per frame so a window stays responsive."""
        if self._closed:
            return []
        self._pump()
        events, self._events = self._events, []
        return events

    def set_title(self, title: str) -> None:
        if not isinstance(title, str):
            raise ArgumentError(f"title: expected a str, got {type(title).__name__}")
        self._check_open("set_title")
        self._canvas.set_title(title)

    def resize(self, width: int, height: int) -> None:
        """Resize the surface (a window asks the window system; offscreen is immediate)."""
        width, height = _check_size(width, height, "resize", self._device)
        self._check_open("resize")
        if self._offscreen:
            self._canvas.set_physical_size(width, height)
            self._pump()  # lets the context see the new size
        else:
            self._canvas.set_logical_size(width, height)
            self._wait_for_size(width, height)

    def wait_idle(self, timeout: float | None = _CLOSE_WAIT_S) -> bool:
        """Block until this surface's last submitted GPU work is done (True if it is)."""
        cmd = self._last_cmd
        if cmd is None or cmd.done():
            return True
        try:
            cmd.wait(timeout)
        except WgComputeError as e:
            return not isinstance(e, TimeoutError)
        return True

    def close(self) -> None:
        """Release the canvas context, then the canvas (a window closes). Waits (at most
        10 s) for this surface's own GPU work first; commands of others stay valid and
        finish. Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._device.alive:
                self.wait_idle()
            try:
                self._canvas.remove_event_handler(self._on_event, *_EVENT_TYPES)
            except Exception:  # the canvas closed itself (window closed by the user)
                pass
            try:
                self._context.unconfigure()
            except Exception:
                pass
            self._canvas.close()
            if self._shown is not None:
                self._shown.destroy()
                self._shown = None
            if self._frame is not None:
                self._frame.free()
                self._frame = None
            self._bind_group = None
            try:
                self._uniform.destroy()
            except Exception:  # noqa: BLE001 - the device is gone
                pass

    def __enter__(self) -> Surface:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


# -- the functional API ----------------------------------------------------------------------

def _check_size(width, height, where: str, device: Device) -> tuple[int, int]:
    limit = device.gpu_device.limits["max-texture-dimension-2d"]
    for name, v in (("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= limit:
            raise ArgumentError(f"{where}: {name} must be an int from 1 to {limit}, got {v!r}")
    return int(width), int(height)


def create_surface(width: int, height: int, title: str = "wgcompute",
                   offscreen: bool | None = None, device: Device | None = None) -> Surface:
    """A new Surface on ``device`` (default: the current device): a glfw window, or an
    offscreen canvas when there is no display or ``offscreen=True``."""
    dev = resolve(device)
    width, height = _check_size(width, height, "create_surface", dev)
    if not isinstance(title, str):
        raise ArgumentError(f"title: expected a str, got {type(title).__name__}")
    if offscreen is not None and not isinstance(offscreen, bool):
        raise ArgumentError(f"offscreen: expected True, False or None, got {offscreen!r}")
    return Surface(width, height, title, offscreen, dev)


def check_surface(surface, argument: str = "surface") -> Surface:
    if not isinstance(surface, Surface):
        raise ArgumentError(f"{argument}: expected a wgc.Surface, got {type(surface).__name__}")
    return surface


def set_pixels(surface: Surface, data) -> Command | None:
    return check_surface(surface).set_pixels(data)


def present(surface: Surface) -> None:
    check_surface(surface).present()


def run_to_surface(kernel, inputs, output, surface: Surface, params=None, *,
                   present: bool = True) -> Command:
    """Run a kernel (or a whole Pipeline) and show its output on ``surface`` without
    reading it back: the kernel, the conversion into the surface's frame and (with
    ``present=True``) the present pass all stay on the GPU. The kernel and the conversion
    are one submission. Returns that Command (its result: the output buffer).

    ``kernel`` may be a wgc.Pipeline: then ``inputs`` and ``params`` must be empty, and
    ``output`` (default: the last stage's output) is the buffer shown."""
    surface = check_surface(surface)
    if not isinstance(present, bool):
        raise ArgumentError(f"present: expected True or False, got {present!r}")
    surface._check_open("run_to_surface")
    if isinstance(kernel, Pipeline):
        if inputs or params:
            raise ArgumentError("run_to_surface: a Pipeline brings its own inputs and params; "
                                "pass inputs=None and params=None")
        pipe = kernel
        pipe._check_open()
        pipe._check_buffers()
        if output is None:
            outs = [s["output"] for s in pipe.stages if s.get("output") is not None]
            if not outs:
                raise ArgumentError("run_to_surface: the pipeline has no stage with an "
                                    "output; pass output=")
            output = outs[-1]
        check_buffer(output, "output")
        if pipe.device is not surface.device:
            raise DeviceError(f"run_to_surface: the pipeline is on {pipe.device.label}, the "
                              f"surface on {surface.device.label}")
        label = f"{pipe.label}->surface"
        buffers = pipe.buffers()
        record_work = pipe.encode
    else:
        k = registry.get(kernel)
        if inputs is None:
            inputs = []
        if not isinstance(inputs, (list, tuple)):
            raise ArgumentError(f"{k.name}: inputs must be a list of buffers, got "
                                f"{type(inputs).__name__}")
        output = prepare_output(k, list(inputs), output, params)
        d = bound(k, list(inputs), output, params)
        surface._same_device(output, "output")
        label = f"{k.name}->surface"
        buffers = list(inputs)

        def record_work(enc):
            if d.launches:
                cpass = enc.begin_compute_pass()
                d.encode(cpass)
                cpass.end()

    h, w, _ = image_layout(output.shape, output.dtype, "output")
    with surface._lock:
        frame = surface._frame_for(h, w)
        record_show = surface._recorder(output, frame)

        def record(enc):
            record_work(enc)
            record_show(enc)

        cmd = surface._submit(label, record, buffers + [output, frame], output)
        if present:
            surface.present()
    return cmd
