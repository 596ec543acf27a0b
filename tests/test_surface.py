"""Surfaces: an offscreen canvas on this adapter, and a real glfw window under Xvfb (started
here), show exactly the expected pixels; run_to_surface makes no device -> host transfer."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import wgpu

import wgcompute as wgc
from wgcompute import transfers

H, W = 23, 37  # odd sizes: no row is a multiple of 256 bytes


def pack(rgb_or_rgba: np.ndarray) -> np.ndarray:
    """Expected RGBA8 of an f32 image in [0, 1]: WGSL's pack4x8unorm rounding, alpha 255."""
    a = np.clip(rgb_or_rgba, 0, 1)
    out = np.floor(0.5 + 255 * a.astype(np.float64)).astype(np.uint8)
    if out.ndim == 2:
        out = np.repeat(out[..., None], 3, axis=2)
    if out.shape[2] == 3:
        out = np.concatenate([out, np.full(out.shape[:2] + (1,), 255, np.uint8)], axis=2)
    return out


def u8_rgba(img: np.ndarray) -> np.ndarray:
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    if img.shape[2] == 3:
        img = np.concatenate([img, np.full(img.shape[:2] + (1,), 255, np.uint8)], axis=2)
    return img


def nearest(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """Nearest-neighbour resample with the present shader's integer rule."""
    fh, fw = img.shape[:2]
    ys = np.minimum(np.arange(h) * fh // h, fh - 1)
    xs = np.minimum(np.arange(w) * fw // w, fw - 1)
    return img[ys][:, xs]


class TransferCounter:
    """Counts device -> host transfers: buffer maps for reading, queue reads, staging reads."""

    def __init__(self, monkeypatch):
        self.count = 0
        self.calls = []
        buf_cls = wgpu.backends.wgpu_native.GPUBuffer
        queue_cls = wgpu.backends.wgpu_native.GPUQueue
        for cls, name in ((buf_cls, "map_async"), (buf_cls, "map_sync")):
            monkeypatch.setattr(cls, name, self._wrap_map(getattr(cls, name), name))
        for cls, name in ((queue_cls, "read_buffer"), (queue_cls, "read_texture")):
            monkeypatch.setattr(cls, name, self._wrap(getattr(cls, name), name))
        monkeypatch.setattr(transfers, "download", self._wrap(transfers.download, "download"))

    def _wrap(self, fn, name):
        def wrapper(*a, **k):
            self.count += 1
            self.calls.append(name)
            return fn(*a, **k)
        return wrapper

    def _wrap_map(self, fn, name):
        def wrapper(buf, mode, *a, **k):
            m = str(mode).upper() if isinstance(mode, str) else mode
            if buf.label == "wgcompute-fence":  # the portable calls' fences: 4 bytes, no data
                return fn(buf, mode, *a, **k)
            if (isinstance(m, str) and "READ" in m) or (isinstance(m, int) and m & 1):
                self.count += 1
                self.calls.append(f"{name}({mode})")
            return fn(buf, mode, *a, **k)
        return wrapper


@pytest.fixture
def surface():
    s = wgc.create_surface(W, H, title="test", offscreen=True)
    yield s
    s.close()


def test_surface_module_not_imported_by_wgcompute():
    code = "import sys, wgcompute; print('rendercanvas' in sys.modules or 'glfw' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, XDG_RUNTIME_DIR="/tmp"))
    assert out.stdout.strip() == "False", out.stderr


def test_offscreen_shares_the_compute_device(surface):

    assert surface.offscreen
    assert surface.size == (W, H)
    assert surface._context.get_configuration()["device"] is wgc.current_device().gpu_device
    assert surface.format == "rgba8unorm"  # bytes pass unchanged (no sRGB encoding)


@pytest.mark.parametrize("kind", ["u8_rgba", "u8_rgb", "u8_gray", "f32_rgba", "f32_rgb",
                                  "f32_gray"])
@pytest.mark.parametrize("via_buffer", [False, True], ids=["numpy", "buffer"])
def test_offscreen_snapshot_equals_pixels(surface, rng, kind, via_buffer):
    dtype, layout = kind.split("_")
    shape = {"rgba": (H, W, 4), "rgb": (H, W, 3), "gray": (H, W)}[layout]
    if dtype == "u8":
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        expected = u8_rgba(img)
    else:  # values outside [0, 1] are clamped
        img = (rng.random(shape, dtype=np.float32) * 1.2 - 0.1).astype(np.float32)
        expected = pack(img)
    wgc.set_pixels(surface, wgc.from_numpy(img) if via_buffer else img)
    wgc.present(surface)
    snap = surface.snapshot()
    assert snap.shape == (H, W, 4) and snap.dtype == np.uint8
    np.testing.assert_array_equal(snap, expected)


def test_snapshot_before_present_is_black(surface):
    np.testing.assert_array_equal(surface.snapshot(), np.zeros((H, W, 4), np.uint8))


def test_snapshot_shows_last_present_not_later_pixels(surface, rng):
    # repeated: on wgpu's GL backend the next set_pixels overtook the present ~1 time in 40
    for _ in range(60):
        first = rng.integers(0, 256, (H, W, 4), dtype=np.uint8)
        surface.set_pixels(first)
        surface.present()
        surface.set_pixels(255 - first)  # not presented yet
        np.testing.assert_array_equal(surface.snapshot(), first)


def test_present_scales_to_the_surface_and_resize(surface, rng):
    img = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    surface.set_pixels(img)
    surface.present()
    np.testing.assert_array_equal(surface.snapshot(), nearest(img, H, W))
    surface.resize(64, 9)
    assert surface.size == (64, 9)
    surface.present()
    snap = surface.snapshot()
    assert snap.shape == (9, 64, 4)
    np.testing.assert_array_equal(snap, nearest(img, 9, 64))


def test_run_to_surface_makes_no_device_to_host_transfer(surface, rng, monkeypatch):
    a = wgc.from_numpy(rng.random((H, W, 4), dtype=np.float32) * 2 - 0.5)
    out = wgc.empty((H, W, 4), "f32")
    wgc.run_to_surface("relu", [a], out, surface).wait()  # warm: pipelines compiled
    counter = TransferCounter(monkeypatch)
    cmd = wgc.run_to_surface("scale", [a], out, surface, {"scalar": 0.5})
    wgc.present(surface)
    assert cmd.wait() is out
    assert surface.wait_idle()
    assert counter.count == 0, counter.calls
    snap = surface.snapshot()
    assert counter.count >= 1  # the counter sees a real read back
    monkeypatch.undo()
    np.testing.assert_array_equal(snap, pack(a.to_numpy() * 0.5))


def test_run_to_surface_user_kernel_writing_rgba8(surface):
    src = """
    struct P { w: u32, h: u32 }
    @group(0) @binding(0) var<storage, read_write> out: array<u32>;
    @group(0) @binding(1) var<uniform> p: P;
    @compute @workgroup_size(8, 8)
    fn main(@builtin(global_invocation_id) g: vec3<u32>) {
        if (g.x >= p.w || g.y >= p.h) { return; }
        out[g.y * p.w + g.x] = g.x | (g.y << 8u) | ((g.x ^ g.y) << 16u) | (255u << 24u);
    }
    """
    wgc.register_kernel("surface_test_rgba_pattern", src,
                        bindings=[("out", "read_write"), ("p", "uniform")],
                        params={"w": "u32", "h": "u32"}, dtypes=("u8",), replace=True,
                        grid=lambda i, o, p: ((p["w"] + 7) // 8, (p["h"] + 7) // 8, 1))
    out = wgc.empty((H, W, 4), "u8")
    wgc.run_to_surface("surface_test_rgba_pattern", [], out, surface, {"w": W, "h": H}).wait()
    y, x = np.mgrid[0:H, 0:W]
    expected = np.stack([x, y, x ^ y, np.full_like(x, 255)], axis=2).astype(np.uint8)
    np.testing.assert_array_equal(surface.snapshot(), expected)
    np.testing.assert_array_equal(out.to_numpy(), expected)


def test_run_to_surface_pipeline(surface, rng):
    a = wgc.from_numpy(rng.random((H, W, 3), dtype=np.float32) * 2 - 1)
    p = wgc.pipeline("surface-test")
    p.add(kernel="scale", inputs=[a], params={"scalar": 2.0})
    p.add(kernel="relu", inputs=[p.stages[0]["output"]])
    cmd = wgc.run_to_surface(p, None, None, surface)
    shown = cmd.wait()
    assert shown is p.stages[1]["output"]
    np.testing.assert_array_equal(surface.snapshot(), pack(np.maximum(a.to_numpy() * 2, 0)))


def test_close_with_commands_in_flight(rng):
    src = """
    struct P { n: u32, iters: u32 }
    @group(0) @binding(0) var<storage, read> a: array<f32>;
    @group(0) @binding(1) var<storage, read_write> out: array<f32>;
    @group(0) @binding(2) var<uniform> p: P;
    @compute @workgroup_size(64)
    fn main(@builtin(global_invocation_id) g: vec3<u32>) {
        if (g.x >= p.n) { return; }
        var x = a[g.x];
        for (var k = 0u; k < p.iters; k = k + 1u) { x = x * 0.5 + 0.25; }
        out[g.x] = x;
    }
    """
    wgc.register_kernel("surface_test_busy", src, workgroup_size=64, replace=True,
                        bindings=[("a", "read"), ("out", "read_write"), ("p", "uniform")],
                        params={"n": "u32", "iters": "u32"})
    s = wgc.create_surface(64, 64, offscreen=True)
    a = wgc.from_numpy(rng.random((64, 64), dtype=np.float32))
    out = wgc.empty((64, 64), "f32")
    cmds = [wgc.run_to_surface("surface_test_busy", [a], out, s, {"iters": 20000})
            for _ in range(3)]
    s.close()  # while the GPU still works on them
    s.close()
    assert s.closed
    for c in cmds:
        assert c.wait(timeout=120) is out
    np.testing.assert_array_equal(out.to_numpy(), np.full((64, 64), 0.5, np.float32))
    with pytest.raises(wgc.SurfaceError, match="closed"):
        s.present()


def test_context_manager_closes(rng):
    with wgc.create_surface(8, 8, offscreen=True) as s:
        s.set_pixels(np.zeros((8, 8, 4), np.uint8))
        s.present()
    assert s.closed
    with pytest.raises(wgc.SurfaceError, match="set_pixels: the surface is closed"):
        s.set_pixels(np.zeros((8, 8, 4), np.uint8))


def test_bad_arguments(surface, monkeypatch):
    with pytest.raises(wgc.ArgumentError, match="width"):
        wgc.create_surface(0, 5)
    with pytest.raises(wgc.ArgumentError, match="height"):
        wgc.create_surface(5, 2.5)
    with pytest.raises(wgc.ArgumentError, match="title"):
        wgc.create_surface(5, 5, title=3)
    with pytest.raises(wgc.ArgumentError, match="offscreen"):
        wgc.create_surface(5, 5, offscreen="yes")
    with pytest.raises(wgc.DtypeError, match="float64"):
        surface.set_pixels(np.zeros((4, 4, 4)))
    with pytest.raises(wgc.ShapeError, match=r"\(4, 4, 2\)"):
        surface.set_pixels(np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(wgc.ShapeError, match="no pixels"):
        surface.set_pixels(np.zeros((0, 4, 4), np.uint8))
    with pytest.raises(wgc.ArgumentError, match="numpy array or a wgc.Buffer"):
        surface.set_pixels([[1, 2], [3, 4]])
    with pytest.raises(wgc.DtypeError, match="s32"):
        surface.set_pixels(wgc.empty((4, 4), "s32"))
    with pytest.raises(wgc.ArgumentError, match="expected a wgc.Surface"):
        wgc.present("not a surface")
    with pytest.raises(wgc.ArgumentError, match="expected a wgc.Surface"):
        wgc.run_to_surface("relu", [wgc.empty((4, 4))], None, None)
    with pytest.raises(wgc.KernelNotFoundError):
        wgc.run_to_surface("no_such_kernel", [], None, surface)
    a = wgc.empty((4, 4))
    with pytest.raises(wgc.ShapeError, match="output"):
        wgc.run_to_surface("relu", [wgc.empty((4,))], None, surface)
    p = wgc.pipeline()
    p.add(kernel="relu", inputs=[a])
    with pytest.raises(wgc.ArgumentError, match="Pipeline brings its own"):
        wgc.run_to_surface(p, [a], None, surface)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(wgc.SurfaceError, match="no display"):
        wgc.create_surface(5, 5, offscreen=False)
    assert wgc.create_surface(5, 5).offscreen  # no display: offscreen by default


# -- a real window, under Xvfb -----------------------------------------------------------------

def start_xvfb():
    """Start Xvfb on a free display (it picks one: -displayfd); returns (process, ':N')."""
    binary = shutil.which("Xvfb")
    if binary is None:
        pytest.skip("the Xvfb binary is not installed (Debian: apt-get install xvfb; "
                    "`make test` installs it)")
    r, w = os.pipe()
    proc = subprocess.Popen([binary, "-displayfd", str(w), "-screen", "0", "640x480x24",
                             "-nolisten", "tcp"], pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    os.close(w)
    number = b""
    end = time.monotonic() + 20
    while not number.endswith(b"\n") and time.monotonic() < end:
        chunk = os.read(r, 16)
        if not chunk:
            break
        number += chunk
    os.close(r)
    if not number.strip():
        proc.kill()
        raise RuntimeError(f"Xvfb did not start: {proc.stderr.read().decode()[-500:]}")
    return proc, f":{int(number)}"


@pytest.fixture(scope="module")
def xvfb_display():
    proc, display = start_xvfb()
    yield display
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


WINDOW_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import wgcompute as wgc
    sys.path.insert(0, sys.argv[1])
    from test_surface import TransferCounter, nearest, pack

    class MP:  # a minimal monkeypatch for TransferCounter
        def setattr(self, obj, name, value):
            setattr(obj, name, value)

    rng = np.random.default_rng(7)
    res = {}
    s = wgc.create_surface(48, 32, title="wgcompute test")
    res["offscreen"] = s.offscreen
    res["format"] = s.format
    res["size"] = list(s.size)
    img = rng.integers(0, 256, (32, 48, 4), dtype=np.uint8)
    s.set_pixels(img)
    for _ in range(3):  # several frames through the swap chain
        s.present()
        s.poll_events()
    res["u8_equal"] = bool(np.array_equal(s.snapshot(), img))

    a = wgc.from_numpy(rng.random((32, 48, 3), dtype=np.float32))
    out = wgc.empty((32, 48, 3), "f32")
    wgc.run_to_surface("scale", [a], out, s, {"scalar": 0.5}).wait()
    counter = TransferCounter(MP())
    cmd = wgc.run_to_surface("scale", [a], out, s, {"scalar": 0.75})
    s.present()
    cmd.wait()
    s.wait_idle()
    res["transfers"] = counter.count
    snap = s.snapshot()
    res["transfers_with_snapshot"] = counter.count
    res["f32_equal"] = bool(np.array_equal(snap, pack(a.to_numpy() * 0.75)))

    small = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    s.set_pixels(small)
    s.resize(64, 40)
    s.present()
    snap = s.snapshot()
    res["resized"] = list(snap.shape)
    res["resized_equal"] = bool(np.array_equal(snap, nearest(small, 40, 64)))

    busy = wgc.empty((256, 256, 4), "f32")
    cmds = [wgc.run_to_surface("relu", [wgc.from_numpy(np.ones((256, 256, 4), np.float32))],
                               busy, s) for _ in range(4)]
    s.close()  # with commands in flight
    res["after_close"] = [str(c.wait(timeout=60).shape) for c in cmds][-1]
    res["closed"] = s.closed

    # the user closes the window (glfw's close button) while a frame is in flight
    import glfw
    s2 = wgc.create_surface(32, 32)
    cmd = wgc.run_to_surface("relu", [wgc.from_numpy(np.ones((64, 64), np.float32))], None, s2)
    glfw.set_window_should_close(s2._canvas._window, True)
    s2.poll_events()
    res["user_closed"] = s2.closed
    try:
        s2.present()
        res["present_after_user_close"] = "no error"
    except wgc.SurfaceError as e:
        res["present_after_user_close"] = str(e)
    s2.close()
    res["in_flight_result"] = float(cmd.wait(timeout=60).to_numpy().min())
    print("RESULT " + json.dumps(res))
""")


@pytest.mark.needs("window-surface")
@pytest.mark.slow
def test_glfw_window_under_xvfb(xvfb_display):
    env = dict(os.environ, DISPLAY=xvfb_display, XDG_RUNTIME_DIR="/tmp")
    env.pop("WAYLAND_DISPLAY", None)
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", WINDOW_SCRIPT, here], env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["offscreen"] is False
    assert res["format"] in ("bgra8unorm", "rgba8unorm")
    assert res["size"] == [48, 32]
    assert res["u8_equal"]
    assert res["transfers"] == 0
    assert res["transfers_with_snapshot"] >= 1
    assert res["f32_equal"]
    assert res["resized"] == [40, 64, 4]
    assert res["resized_equal"]
    assert res["after_close"] == "(256, 256, 4)"
    assert res["closed"]
    assert res["user_closed"]
    assert res["present_after_user_close"] == "present: the surface is closed"
    assert res["in_flight_result"] == 1.0


GL_WINDOW_SCRIPT = textwrap.dedent("""
    import wgcompute as wgc
    gl = wgc.device(backend="gl")
    try:
        wgc.create_surface(48, 32, offscreen=False, device=gl)
        print("RESULT created")
    except wgc.SurfaceError as e:
        print("RESULT", e)
    print("RESULT", wgc.relu(wgc.buffer([-1.0, 2.0], device=gl)).tolist())
""")


def test_a_window_the_adapter_cannot_present_to_is_a_surface_error(xvfb_display):
    """wgpu's GL backend lists no surface format for a glfw window, and configuring the
    surface anyway aborts the process inside wgpu-native: create_surface refuses first."""
    if not any(a.backend == "OpenGL" for a in wgc.devices()):
        pytest.skip("this machine has no OpenGL adapter (the adapter that cannot present)")
    env = dict(os.environ, DISPLAY=xvfb_display, XDG_RUNTIME_DIR="/tmp")
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.run([sys.executable, "-c", GL_WINDOW_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [x[len("RESULT "):] for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and len(lines) == 2, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    assert lines[0].startswith("create_surface: could not configure the canvas for ")
    assert "OpenGL adapter cannot present to this window" in lines[0]
    assert "offscreen=True" in lines[0]
    assert lines[1] == "[0.0, 2.0]"  # the device goes on computing


# -- the docs' snippets run ------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["docs/guide/surfaces.md", "docs/viewer.md"]


def snippets(doc: str) -> list[str]:
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


@pytest.mark.parametrize("doc", DOCS)
def test_doc_snippets_run(doc, monkeypatch):
    blocks = snippets(doc)
    assert blocks, f"{doc} has no python snippet"
    monkeypatch.chdir(ROOT)  # snippets name examples/data/... like a reader in the repo
    monkeypatch.delenv("DISPLAY", raising=False)  # offscreen here; the window is tested above
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    for i, code in enumerate(blocks):
        exec(compile(code, f"{doc} snippet {i}", "exec"), {"__name__": f"doc_snippet_{i}"})
