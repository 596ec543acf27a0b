"""view(): open a surface (a window, or offscreen for --frames), run the viewer on it, and
tear down in order (viewer buffers, then the surface)."""

from __future__ import annotations

import wgcompute as wgc

from .app import Viewer, help_text, load_image, parse_key_script

MAX_WINDOW = (1280, 800)


def _window_size(h: int, w: int) -> tuple[int, int]:
    """The image's size, shrunk (aspect kept) to fit MAX_WINDOW; present scales to it."""
    f = min(1.0, MAX_WINDOW[0] / w, MAX_WINDOW[1] / h)
    return max(1, round(w * f)), max(1, round(h * f))


def view(image: str | None = None, frames: int | None = None, out: str | None = None,
         keys: str = "", size: tuple[int, int] = (640, 400), quiet: bool = False) -> list[str]:
    """Run the viewer. With ``frames``, render that many frames on an offscreen surface
    (PNG files in ``out``, if given) and return their paths; otherwise open a window until
    it is closed (or q / Escape). ``keys`` scripts key presses: "FRAME:KEYS,...".
    The pattern's clock runs at 1/30 s per frame when frames are counted."""
    script = parse_key_script(keys)
    if frames is not None and (isinstance(frames, bool) or not isinstance(frames, int)
                               or frames < 1):
        raise wgc.ArgumentError(f"frames: expected a positive int, got {frames!r}")
    src = load_image(image) if image else None
    h, w = src.shape[:2] if src is not None else (size[1], size[0])
    headless = frames is not None
    sw, sh = (w, h) if headless else _window_size(h, w)
    surface = wgc.create_surface(sw, sh, title="wgcompute viewer",
                                 offscreen=True if headless else None)
    if surface.offscreen and not headless:
        surface.close()
        raise wgc.SurfaceError("view: there is no display to open a window on (DISPLAY and "
                               "WAYLAND_DISPLAY are unset); render headless with --frames N "
                               "--out DIR, or run under a desktop or Xvfb")
    viewer = None
    try:
        viewer = Viewer(surface, src, size=(w, h), screenshot_dir=out or ".",
                        fixed_dt=1 / 30 if headless else None)
        if viewer.missing and not quiet:
            print(f"wgcompute view: kernels not available, stages skipped: "
                  f"{', '.join(viewer.missing)}")
        if headless:
            paths = viewer.run_frames(frames, out, script)
            if not quiet:
                gpu = viewer.stats.gpu
                print(f"wgcompute view: {viewer.frames} frames of {w}x{h}, "
                      f"{viewer.state.describe()}; GPU {gpu:.1f} ms/frame"
                      + (f"; PNGs in {out}" if out else ""))
            return paths
        if not quiet:
            print("wgcompute view: keys\n" + help_text())
        viewer.run_window(script=script)
        return []
    finally:
        if viewer is not None:
            viewer.close()
        surface.close()
