"""wgc.image: files (decoded independently with PIL for comparison), numpy conversions,
atomic writes, and the errors of each boundary."""

import os

import numpy as np
import pytest
from PIL import Image

import wgcompute as wgc

DATA = os.path.join(os.path.dirname(__file__), "..", "examples", "data")
PHOTOS = ["chelsea.png", "coffee.jpg", "astronaut.jpg"]


@pytest.mark.parametrize("name", PHOTOS)
def test_bundled_photos_load_as_rgba8(name):
    path = os.path.join(DATA, name)
    buf = wgc.image.load(path)
    want = np.asarray(Image.open(path).convert("RGBA"))
    assert buf.dtype == "u8" and buf.shape == want.shape
    assert np.array_equal(wgc.image.to_numpy(buf), want)


def test_bundled_photos_have_licences():
    text = open(os.path.join(DATA, "LICENSES.md"), encoding="utf-8").read()
    for name in PHOTOS:
        assert f"`{name}`" in text
    assert sorted(f for f in os.listdir(DATA) if f != "LICENSES.md") == sorted(PHOTOS)


def test_numpy_conversions(rng):
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    a = wgc.image.to_numpy(wgc.image.from_numpy(rgb))
    assert np.array_equal(a[..., :3], rgb) and (a[..., 3] == 255).all()
    assert np.array_equal(wgc.image.to_numpy(wgc.image.from_numpy(rgb), channels=3), rgb)
    grey = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    g = wgc.image.to_numpy(wgc.image.from_numpy(grey))
    assert all(np.array_equal(g[..., c], grey) for c in range(3))
    la = rng.integers(0, 256, (4, 6, 2), dtype=np.uint8)
    g = wgc.image.to_numpy(wgc.image.from_numpy(la))
    assert np.array_equal(g[..., 0], la[..., 0]) and np.array_equal(g[..., 3], la[..., 1])
    rgba = rng.integers(0, 256, (1, 1, 4), dtype=np.uint8)
    assert np.array_equal(wgc.image.to_numpy(wgc.image.from_numpy(rgba)), rgba)
    f = np.array([[-0.2, 0.0, 0.5, 1.0 / 255 * 0.49, 1.7]], np.float32)
    assert wgc.image.to_numpy(wgc.from_numpy(f))[0, :, 0].tolist() == [0, 0, 128, 0, 255]


def test_save_load_round_trip_png(tmp_path, rng):
    a = rng.integers(0, 256, (9, 13, 4), dtype=np.uint8)
    path = wgc.image.save(wgc.image.from_numpy(a), tmp_path / "x.png")
    assert np.array_equal(np.asarray(Image.open(path)), a)
    assert np.array_equal(wgc.image.load(path).to_numpy(), a)
    a[..., 3] = 255  # opaque: written as RGB, loads back identical
    wgc.image.save(wgc.image.from_numpy(a), tmp_path / "y.png")
    assert Image.open(tmp_path / "y.png").mode == "RGB"
    assert np.array_equal(wgc.image.load(tmp_path / "y.png").to_numpy(), a)
    assert sorted(os.listdir(tmp_path)) == ["x.png", "y.png"]  # no temporaries left


def test_save_float_and_jpeg(tmp_path, rng):
    f = rng.random((6, 8), dtype=np.float32)
    wgc.image.save(wgc.from_numpy(f), tmp_path / "f.png")
    got = np.asarray(Image.open(tmp_path / "f.png").convert("L"))
    assert np.array_equal(got, np.clip(np.rint(f.astype(np.float64) * 255), 0, 255))
    a = rng.integers(0, 256, (16, 16, 4), dtype=np.uint8)
    wgc.image.save(wgc.image.from_numpy(a), tmp_path / "a.jpg")  # JPEG: alpha dropped
    im = Image.open(tmp_path / "a.jpg")
    assert im.mode == "RGB" and im.size == (16, 16)


def test_failed_write_leaves_nothing(tmp_path):
    buf = wgc.image.from_numpy(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(wgc.ArgumentError, match="needs an extension"):
        wgc.image.save(buf, tmp_path / "x.notaformat")
    with pytest.raises(wgc.ArgumentError, match="needs an extension"):
        wgc.image.save(buf, tmp_path / "noext")
    os.mkdir(tmp_path / "taken.png")  # the rename fails: the temporary must go too
    with pytest.raises(wgc.ArgumentError, match="cannot write"):
        wgc.image.save(buf, tmp_path / "taken.png")
    os.rmdir(tmp_path / "taken.png")
    with pytest.raises(wgc.ArgumentError, match="does not exist"):
        wgc.image.save(buf, tmp_path / "missing" / "x.png")
    assert os.listdir(tmp_path) == []


def test_errors_name_the_argument(tmp_path):
    with pytest.raises(wgc.ArgumentError, match="is not a file"):
        wgc.image.load(tmp_path / "nope.png")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(wgc.ArgumentError, match="cannot decode"):
        wgc.image.load(tmp_path / "bad.png")
    import imageio.v3 as iio

    iio.imwrite(tmp_path / "deep.tif", np.full((3, 3), 0.5, np.float32), plugin="pillow")
    with pytest.raises(wgc.DtypeError, match="8-bit and 16-bit"):  # 32-bit float samples
        wgc.image.load(tmp_path / "deep.tif")
    with pytest.raises(wgc.DtypeError, match="uint8"):
        wgc.image.from_numpy(np.zeros((2, 2, 3), np.float32))
    with pytest.raises(wgc.ShapeError, match="C in 1..4"):
        wgc.image.from_numpy(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(wgc.ArgumentError, match="numpy array"):
        wgc.image.from_numpy([[1, 2]])
    with pytest.raises(wgc.ShapeError, match="RGBA8"):
        wgc.image.to_numpy(wgc.empty((2, 3), "u8"))
    with pytest.raises(wgc.ArgumentError, match="channels"):
        wgc.image.to_numpy(wgc.empty((2, 3, 4), "u8"), channels=2)
    with pytest.raises(wgc.DtypeError, match="images are"):
        wgc.image.save(wgc.empty((2, 3), "s32"), tmp_path / "s.png")


def test_apply_sizes_outputs_and_takes_extra_inputs(rng):
    u = rng.integers(0, 256, (6, 9, 4), dtype=np.uint8)
    img = wgc.image.from_numpy(u)
    assert wgc.image.apply("resize", img, size=(3, 4)).shape == (3, 4, 4)
    ident = wgc.from_numpy(np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], np.float32))
    assert np.array_equal(wgc.image.apply("convolve2d", img, ident, mode="zero").to_numpy(), u)
    out = wgc.empty(u.shape, "u8")
    assert wgc.image.apply("invert", img, out=out) is out
    assert np.array_equal(out.to_numpy()[..., :3], 255 - u[..., :3])
    with pytest.raises(wgc.KernelNotFoundError, match="invert"):
        wgc.image.apply("invrt", img)


# -- GIF: pillow gives every GIF a frame axis ------------------------------------------------
def test_single_frame_gif_loads(tmp_path, rng):
    rgb = rng.integers(0, 256, (9, 7, 3), dtype=np.uint8)
    path = tmp_path / "one.gif"
    Image.fromarray(rgb).save(path)  # quantized to a palette: compare with PIL's own decode
    want = np.asarray(Image.open(path).convert("RGBA"))
    buf = wgc.image.load(path)
    assert buf.shape == (9, 7, 4)
    assert np.array_equal(wgc.image.to_numpy(buf), want)


def test_animated_gif_frame_out_of_range_names_the_frame_count(tmp_path, rng):
    frames = [Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)) for _ in range(3)]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50, loop=0)
    with pytest.raises(wgc.ArgumentError, match=r"frame: .*anim\.gif.* has 3 frame\(s\)"):
        wgc.image.load(path, frame=3)
