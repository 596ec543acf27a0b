"""The demo viewer, headless: 30 frames with a scripted key sequence on a real photograph; its
PNGs equal the same pipeline run through compute and read back. Also writes docs/images/."""

import os
import shutil
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.viewer import KEYS, ViewerState, apply_key, parse_key_script, view

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHOTO = os.path.join(ROOT, "examples", "data", "chelsea.png")
DOCS_IMAGES = os.path.join(ROOT, "docs", "images")

# Before frame N, press these keys (the default state is gaussian blur r=3, sigma=1.5).
SCRIPT = "3:2,6:RR,9:],12:A,15:34,18:5,20:BB,22:C,24:4,25:1,27:s"
# What the frames must show, written out by hand from the key table (not by the viewer).
BLUR = ("gaussian_blur", {"radius": 5, "sigma": 1.875})
SHARPEN = ("sharpen", {"amount": 1.25, "radius": 5, "sigma": 1.875})
EXPECTED = {
    2: [("gaussian_blur", {"radius": 3, "sigma": 1.5})],
    14: [BLUR, SHARPEN],
    19: [BLUR, SHARPEN, ("grayscale", {}), ("sobel", {}),
         ("brightness_contrast", {"brightness": 0.0, "contrast": 1.0})],
    29: [SHARPEN, ("grayscale", {}),
         ("brightness_contrast", {"brightness": 0.1, "contrast": 1.1})],
}


def rgba(path: str) -> np.ndarray:
    a = iio.imread(path)
    if a.shape[2] == 3:
        a = np.concatenate([a, np.full(a.shape[:2] + (1,), 255, np.uint8)], axis=2)
    return a


def compute(image: np.ndarray, stages) -> np.ndarray:
    """The same stages through run_kernel, one at a time, read back."""
    cur = wgc.from_numpy(image)
    for name, params in stages:
        cur = wgc.run_kernel(name, [cur], None, params)
    return cur.to_numpy()


def test_help_lists_every_key():
    out = subprocess.run([sys.executable, "-m", "wgcompute.cli", "view", "--help"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, XDG_RUNTIME_DIR="/tmp"))
    assert out.returncode == 0, out.stderr
    for key, what in KEYS.items():
        assert key in out.stdout and what in out.stdout
    assert "--frames" in out.stdout and "--out" in out.stdout


def test_keys_change_the_state():
    s = ViewerState()
    assert [k for k, _ in s.stages()] == ["gaussian_blur"]
    for k in "2345":
        s = apply_key(s, k)
    assert [k for k, _ in s.stages()] == ["gaussian_blur", "sharpen", "grayscale", "sobel",
                                          "brightness_contrast"]
    s = apply_key(apply_key(apply_key(s, "R"), "]"), "a")
    assert (s.radius, s.sigma, s.amount) == (4, 1.875, 0.75)
    assert apply_key(s, "0") == ViewerState()
    assert apply_key(s, "x") == s
    for _ in range(40):
        s = apply_key(s, "r")
    assert s.radius == 1  # clamped
    assert parse_key_script("3:2,6:RR,9:_") == {3: ["2"], 6: ["R", "R"], 9: [" "]}
    with pytest.raises(wgc.ArgumentError, match="FRAME:KEYS"):
        parse_key_script("2")


def test_viewer_frames_match_compute(tmp_path):
    if not all(k in wgc.kernels() for k, _ in EXPECTED[19]):
        pytest.fail(f"the viewer's image kernels are not registered: {wgc.kernels()}")
    paths = view(PHOTO, frames=30, out=str(tmp_path), keys=SCRIPT, quiet=True)
    assert len(paths) == 30
    image = rgba(PHOTO)
    for frame, stages in EXPECTED.items():
        got = wgc.image.read_file(paths[frame])
        assert got.shape == image.shape
        np.testing.assert_array_equal(got, compute(image, stages), err_msg=f"frame {frame}")
    assert not np.array_equal(wgc.image.read_file(paths[29]), image)
    # `s` before frame 27 saved what frame 26 showed
    shots = [p for p in os.listdir(tmp_path) if p.startswith("wgcompute-view-")]
    assert len(shots) == 1
    np.testing.assert_array_equal(wgc.image.read_file(tmp_path / shots[0]),
                                  wgc.image.read_file(paths[26]))
    # the docs show these frames, as a Vulkan run makes them (wgpu's GL backend rounds ~0.02%
    # of the edge frame's pixels differently, by up to 2 of 255: a GL run leaves them be)
    if wgc.device_info()["backend"] == "Vulkan":
        os.makedirs(DOCS_IMAGES, exist_ok=True)
        shutil.copyfile(paths[14], os.path.join(DOCS_IMAGES, "viewer.png"))
        shutil.copyfile(paths[19], os.path.join(DOCS_IMAGES, "viewer-edges.png"))


def test_pattern_animates_and_matches_compute(tmp_path):
    w, h = 96, 64
    paths = view(None, frames=3, out=str(tmp_path), size=(w, h), keys="1:1", quiet=True)
    frames = [wgc.image.read_file(p) for p in paths]
    assert not np.array_equal(frames[1], frames[2])  # the pattern moves
    t = 0.0
    for _ in range(3):
        t += 1 / 30
    pattern = wgc.run_kernel("viewer_pattern", [], wgc.empty((h, w, 4), "u8"),
                             {"w": w, "h": h, "t": t}).to_numpy()
    np.testing.assert_array_equal(frames[2], pattern)  # blur toggled off before frame 1
    assert (pattern[..., 3] == 255).all() and pattern[..., :3].std() > 20


def test_cli_frames_and_errors(tmp_path, capsys, monkeypatch):
    from wgcompute.cli import main

    assert main(["view", "--frames", "2", "--size", "40x30", "--out", str(tmp_path)]) == 0
    assert sorted(os.listdir(tmp_path)) == ["frame_0000.png", "frame_0001.png"]
    assert wgc.image.read_file(tmp_path / "frame_0001.png").shape == (30, 40, 4)
    assert main(["view", str(tmp_path / "missing.png"), "--frames", "1"]) == 1
    assert "missing.png" in capsys.readouterr().err
    assert main(["view", "--frames", "1", "--keys", "oops"]) == 1
    assert "FRAME:KEYS" in capsys.readouterr().err
    assert main(["view", "--frames", "0"]) == 1
    assert "frames: expected a positive int" in capsys.readouterr().err
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert main(["view"]) == 1  # no display, no --frames: an error, not an invisible loop
    assert "--frames N" in capsys.readouterr().err


@pytest.mark.needs("window-surface")
def test_window_loop_under_xvfb(tmp_path):
    from test_surface import start_xvfb

    proc, display = start_xvfb()
    try:
        env = dict(os.environ, DISPLAY=display, XDG_RUNTIME_DIR="/tmp")
        env.pop("WAYLAND_DISPLAY", None)
        out = subprocess.run([sys.executable, "-m", "wgcompute.cli", "view", "--size", "64x48",
                              "--keys", "2:4,4:s,6:q", "--out", str(tmp_path)], env=env,
                             capture_output=True, text=True, timeout=120)
    finally:
        proc.terminate()
        proc.wait(10)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "keys" in out.stdout
    shots = list(tmp_path.glob("wgcompute-view-*.png"))
    assert len(shots) == 1, out.stdout
    shot = wgc.image.read_file(shots[0])
    assert shot.shape == (48, 64, 4)
    assert shot[..., :3].std() > 5  # blurred edges of the pattern, not an empty window


def test_title_shows_fps_and_gpu_ms():
    import re
    import time

    from wgcompute.viewer import Viewer

    with wgc.create_surface(32, 24, offscreen=True) as s:
        v = Viewer(s, None, size=(32, 24), fixed_dt=1 / 30)
        cmds = [v.frame() for _ in range(4)]
        for c in cmds:
            c.wait()
        end = time.monotonic() + 5
        while len(v.stats.gpu_ms) < 4 and time.monotonic() < end:
            time.sleep(0.01)  # done-callbacks run on the thread that saw the fence
        title = v.title()
        v.close()
    assert len(v.stats.gpu_ms) == 4 and v.stats.gpu > 0 and v.stats.fps > 0
    assert re.search(r"\| blur r=3 s=1\.50 \| \d+ FPS, GPU \d+\.\d ms/frame$", title), title
