"""The viewer's state, key handling and frame loop: a live gaussian blur -> sharpen ->
grayscale -> edges -> brightness/contrast pipeline shown through wgc.run_to_surface."""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

import wgcompute as wgc

# key -> what it does (the CLI's --help prints this table)
KEYS = {
    "1": "toggle gaussian blur",
    "2": "toggle sharpen (unsharp mask)",
    "3": "toggle grayscale",
    "4": "toggle edges (sobel)",
    "5": "toggle brightness/contrast",
    "r / R": "blur and sharpen radius - / +",
    "[ / ]": "sigma - / + (x 1.25)",
    "a / A": "sharpen amount - / + 0.25",
    "b / B": "brightness - / + 0.05",
    "c / C": "contrast - / + 0.1",
    "space": "pause / resume the animated pattern",
    "0": "reset every setting",
    "s": "save a screenshot PNG",
    "h": "print this key list",
    "q / Escape": "quit",
}

STAGES = ("gaussian_blur", "sharpen", "grayscale", "sobel", "brightness_contrast")
MAX_RADIUS = 15


def help_text() -> str:
    width = max(len(k) for k in KEYS)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in KEYS.items())


@dataclass(frozen=True)
class ViewerState:
    """Everything a frame depends on besides the source image (and the pattern's time)."""

    blur: bool = True
    sharpen: bool = False
    gray: bool = False
    edges: bool = False
    levels: bool = False  # brightness/contrast
    radius: int = 3
    sigma: float = 1.5
    amount: float = 1.0
    brightness: float = 0.0
    contrast: float = 1.0
    paused: bool = False

    def stages(self) -> list[tuple[str, dict]]:
        """(kernel name, params) of each enabled stage, in pipeline order."""
        out = []
        if self.blur:
            out.append(("gaussian_blur", {"radius": self.radius, "sigma": self.sigma}))
        if self.sharpen:
            out.append(("sharpen", {"amount": self.amount, "radius": self.radius,
                                    "sigma": self.sigma}))
        if self.gray:
            out.append(("grayscale", {}))
        if self.edges:
            out.append(("sobel", {}))
        if self.levels:
            out.append(("brightness_contrast", {"brightness": self.brightness,
                                                "contrast": self.contrast}))
        return out

    def describe(self) -> str:
        names = {"gaussian_blur": f"blur r={self.radius} s={self.sigma:.2f}",
                 "sharpen": f"sharpen {self.amount:.2f}", "grayscale": "gray",
                 "sobel": "edges",
                 "brightness_contrast": f"b={self.brightness:+.2f} c={self.contrast:.1f}"}
        return " > ".join(names[k] for k, _ in self.stages()) or "original"


def apply_key(state: ViewerState, key: str) -> ViewerState:
    """The state after one key press (unknown keys change nothing)."""
    s = state
    toggles = {"1": "blur", "2": "sharpen", "3": "gray", "4": "edges", "5": "levels"}
    if key in toggles:
        name = toggles[key]
        return replace(s, **{name: not getattr(s, name)})
    if key in ("r", "R"):
        return replace(s, radius=min(MAX_RADIUS, max(1, s.radius + (1 if key == "R" else -1))))
    if key in ("[", "]"):
        sigma = s.sigma * 1.25 if key == "]" else s.sigma / 1.25
        return replace(s, sigma=round(min(20.0, max(0.25, sigma)), 4))
    if key in ("a", "A"):
        return replace(s, amount=round(max(0.0, s.amount + (0.25 if key == "A" else -0.25)), 4))
    if key in ("b", "B"):
        return replace(s, brightness=round(s.brightness + (0.05 if key == "B" else -0.05), 4))
    if key in ("c", "C"):
        return replace(s, contrast=round(max(0.0, s.contrast + (0.1 if key == "C" else -0.1)),
                                          4))
    if key in (" ", "space"):
        return replace(s, paused=not s.paused)
    if key == "0":
        return ViewerState()
    return s


def parse_key_script(spec: str) -> dict[int, list[str]]:
    """``"3:2,6:RR,9:]"`` -> {3: ["2"], 6: ["R", "R"], 9: ["]"]}: keys pressed before frame N."""
    script: dict[int, list[str]] = {}
    if not spec:
        return script
    for part in spec.split(","):
        frame, sep, keys = part.partition(":")
        if not sep or not frame.strip().isdigit() or not keys:
            raise wgc.ArgumentError(f"--keys: {part!r} is not FRAME:KEYS (e.g. 3:2 or 6:RR)")
        script.setdefault(int(frame), []).extend(" " if k == "_" else k for k in keys)
    return script


PATTERN_WGSL = """
struct P { w: u32, h: u32, t: f32 }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> p: P;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x >= p.w || g.y >= p.h) {
        return;
    }
    let uv = vec2<f32>(f32(g.x) / f32(p.w), f32(g.y) / f32(p.h));
    let centre = vec2<f32>(0.5 + 0.25 * cos(0.7 * p.t), 0.5 + 0.25 * sin(p.t));
    let ring = 0.5 + 0.5 * sin(40.0 * length(uv - centre) - 3.0 * p.t);
    let checker = f32(((g.x / 32u) + (g.y / 32u)) & 1u);
    let rgb = vec3<f32>(ring, 0.5 + 0.5 * sin(6.2832 * uv.x + p.t),
                        0.5 + 0.5 * cos(6.2832 * uv.y - p.t)) * (0.7 + 0.3 * checker);
    out[g.y * p.w + g.x] = pack4x8unorm(vec4<f32>(rgb, 1.0));
}
"""


def pattern_kernel() -> str:
    """Register (once) the animated test pattern: u8 (H, W, 4) RGBA from params w, h, t."""
    if "viewer_pattern" not in wgc.kernels():
        wgc.register_kernel(
            "viewer_pattern", PATTERN_WGSL, bindings=[("out", "read_write"), ("p", "uniform")],
            params={"w": "u32", "h": "u32", "t": "f32"}, dtypes=("u8",),
            grid=lambda inputs, out, p: (math.ceil(p["w"] / 8), math.ceil(p["h"] / 8), 1))
    return "viewer_pattern"


def load_image(path: str) -> wgc.Buffer:
    """An image file as a u8 (H, W, 4) RGBA buffer (grey and RGB get alpha 255)."""
    return wgc.image.load(path, dtype="u8")  # the viewer draws RGBA8, whatever the file holds


def save_png(rgba: np.ndarray, path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    return wgc.image.write_file(rgba, path)  # atomic: never a half-written PNG


@dataclass
class Stats:
    """FPS from wall time between frames; GPU ms from each frame's submit to its fence."""

    frame_times: deque = field(default_factory=lambda: deque(maxlen=60))
    gpu_ms: deque = field(default_factory=lambda: deque(maxlen=60))
    last: float | None = None

    def tick(self) -> None:
        now = time.perf_counter()
        if self.last is not None:
            self.frame_times.append(now - self.last)
        self.last = now

    @property
    def fps(self) -> float:
        total = sum(self.frame_times)
        return len(self.frame_times) / total if total > 0 else 0.0

    @property
    def gpu(self) -> float:
        return sum(self.gpu_ms) / len(self.gpu_ms) if self.gpu_ms else 0.0


class Viewer:
    """The demo viewer on one surface. ``frame()`` renders one frame (source -> enabled
    stages -> surface, one submission plus the present pass); ``key()`` applies a key."""

    def __init__(self, surface, image: wgc.Buffer | None = None, size=(640, 400),
                 screenshot_dir: str = ".", state: ViewerState | None = None,
                 fixed_dt: float | None = None):
        self.surface = surface
        self.state = state or ViewerState()
        self.available = set(wgc.kernels())
        self.missing = [k for k in STAGES if k not in self.available]
        if image is not None:
            if image.dtype != "u8" or image.ndim != 3 or image.shape[2] != 4:
                raise wgc.ShapeError(f"image: expected a u8 (H, W, 4) RGBA buffer, got "
                                     f"{image.dtype} {image.shape}")
            self.source = image
            self.pattern = None
        else:
            w, h = size
            self.source = wgc.empty((h, w, 4), "u8", label="viewer-pattern")
            self.pattern = pattern_kernel()
        h, w = self.source.shape[:2]
        self.buffers = [wgc.empty((h, w, 4), "u8", label=f"viewer-{i}") for i in range(2)]
        self.screenshot_dir = screenshot_dir
        self.fixed_dt = fixed_dt
        self.t = 0.0
        self.frames = 0
        self.stats = Stats()
        self.quit = False
        self.messages: list[str] = []
        self._pipeline = None
        self._built_for = None
        self._shown = None

    # -- the pipeline --------------------------------------------------------------------------
    def _build(self) -> None:
        key = self.state.stages()
        p = wgc.pipeline("viewer")
        if self.pattern is not None:
            h, w = self.source.shape[:2]
            p.add(kernel=self.pattern, inputs=[], output=self.source,
                  params={"w": w, "h": h, "t": self.t})
        cur = self.source
        for i, (name, params) in enumerate(s for s in key if s[0] in self.available):
            out = self.buffers[i % 2]
            p.add(kernel=name, inputs=[cur], output=out, params=params)
            cur = out
        if self._pipeline is not None:
            self._pipeline.free()
        self._pipeline, self._shown, self._built_for = p, cur, key

    def frame(self) -> wgc.Command:
        """Render and present one frame; returns its Command (not waited for)."""
        if self._built_for != self.state.stages():
            self._build()
        if self.pattern is not None and not self.state.paused:
            self.t += self.fixed_dt if self.fixed_dt is not None else \
                (time.perf_counter() - self.stats.last if self.stats.last else 0.0)
        if self.pattern is not None:
            self._pipeline.set_params(0, t=float(self.t))
        start = time.perf_counter()
        cmd = wgc.run_to_surface(self._pipeline, None, self._shown, self.surface)
        cmd.add_done_callback(lambda _c: self.stats.gpu_ms.append(
            1000 * (time.perf_counter() - start)))
        self.stats.tick()
        self.frames += 1
        return cmd

    def title(self) -> str:
        extra = f" (missing kernels: {', '.join(self.missing)})" if self.missing else ""
        return (f"wgcompute viewer | {self.state.describe()} | {self.stats.fps:.0f} FPS, "
                f"GPU {self.stats.gpu:.1f} ms/frame{extra}")

    # -- keys ----------------------------------------------------------------------------------
    def key(self, key: str) -> None:
        if key in ("q", "Escape"):
            self.quit = True
        elif key == "s":
            self.screenshot()
        elif key == "h":
            self.messages.append(help_text())
        else:
            self.state = apply_key(self.state, key)

    def screenshot(self, path: str | None = None) -> str:
        """Save what the surface shows now as a PNG; returns the path."""
        if path is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = os.path.join(self.screenshot_dir,
                                f"wgcompute-view-{stamp}-{self.frames:05d}.png")
        save_png(self.surface.snapshot(), path)
        self.messages.append(f"saved {path}")
        return path

    # -- loops ---------------------------------------------------------------------------------
    def run_frames(self, n: int, out_dir: str | None, script: dict | None = None) -> list[str]:
        """Render n frames (keys of ``script`` pressed before their frame); with out_dir,
        save each as out_dir/frame_NNNN.png. Returns the paths written."""
        script = script or {}
        paths = []
        for i in range(n):
            for k in script.get(i, ()):
                self.key(k)
            if self.quit:
                break
            self.frame()
            if out_dir is not None:
                paths.append(save_png(self.surface.snapshot(),
                                      os.path.join(out_dir, f"frame_{i:04d}.png")))
        return paths

    def run_window(self, max_fps: float = 60.0, script: dict | None = None) -> None:
        """The interactive loop: until the window closes or q / Escape."""
        script = script or {}
        next_title = 0.0
        while not self.surface.closed and not self.quit:
            for k in script.get(self.frames, ()):
                self.key(k)
            for ev in self.surface.poll_events():
                if ev.get("event_type") == "key_down":
                    self.key(ev.get("key", ""))
            if self.surface.closed or self.quit:
                break
            t0 = time.perf_counter()
            self.frame()
            if t0 >= next_title:
                self.surface.set_title(self.title())
                next_title = t0 + 0.5
            for m in self.messages:
                print(m)
            self.messages.clear()
            spare = 1.0 / max_fps - (time.perf_counter() - t0)
            if spare > 0:
                time.sleep(spare)

    def close(self) -> None:
        if self._pipeline is not None:
            self._pipeline.free()
            self._pipeline = None
        for b in self.buffers:
            b.free()
