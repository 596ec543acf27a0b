"""Images as people have them: animated GIFs (a frame, every frame, processed back into an
animation with its timing), 16-bit PNGs (every bit kept through load, the pipeline and save),
outputs in their input's format, corrupt files named as such, the stages' params in
`process --help`, and throughput that never reads 0.0. References: PIL and imageio decoding
the same files, numpy."""

from __future__ import annotations

import os

import imageio.v3 as iio
import numpy as np
import pytest
from PIL import Image

import wgcompute as wgc
from wgcompute.cli import build_parser, main

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                    "data")
PALETTE = np.array([[0, 0, 0], [255, 255, 255], [200, 40, 10], [10, 120, 240]], np.uint8)


def pil_frames(path) -> list[np.ndarray]:
    out = []
    with Image.open(path) as im:
        for i in range(getattr(im, "n_frames", 1)):
            im.seek(i)
            out.append(np.asarray(im.convert("RGBA")))
    return out


@pytest.fixture
def anim(tmp_path):
    """A 3-frame GIF of four colours (GIF's palette holds them exactly), with its timing."""
    rng = np.random.default_rng(5)
    frames = [Image.fromarray(PALETTE[rng.integers(0, 4, (6, 5))]) for _ in range(3)]
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=[50, 70, 90],
                   loop=2)
    return path


def test_animated_gif_load_picks_a_frame(anim):
    want = pil_frames(anim)
    assert len(want) == 3
    assert np.array_equal(wgc.image.to_numpy(wgc.image.load(anim)), want[0])  # the first
    for i in (1, 2, -1):
        assert np.array_equal(wgc.image.to_numpy(wgc.image.load(anim, frame=i)), want[i])
    with pytest.raises(wgc.ArgumentError, match=r"frame: .*anim\.gif.* has 3 frame\(s\)"):
        wgc.image.load(anim, frame=3)
    with pytest.raises(wgc.ArgumentError, match="frame: expected an int"):
        wgc.image.load(anim, frame="1")


def test_animated_gif_every_frame_and_its_timing(anim, tmp_path):
    want = pil_frames(anim)
    bufs = wgc.image.load_frames(anim)
    assert [wgc.image.to_numpy(b).tolist() for b in bufs] == [w.tolist() for w in want]
    frames, timing = wgc.image.read_frames(anim)
    assert timing == {"durations": [50, 70, 90], "loop": 2}
    out = wgc.image.save_frames([wgc.image.apply("invert", b) for b in bufs],
                                tmp_path / "inv.gif", timing["durations"], timing["loop"])
    got = pil_frames(out)
    assert len(got) == 3
    for g, w in zip(got, want):
        assert np.array_equal(g[..., :3], 255 - w[..., :3])
    with Image.open(out) as im:
        durations = []
        for i in range(im.n_frames):
            im.seek(i)
            durations.append(im.info["duration"])
        assert durations == [50, 70, 90] and im.info["loop"] == 2
    with pytest.raises(wgc.ArgumentError, match="one of .gif"):
        wgc.image.save_frames(bufs, tmp_path / "x.png")


def test_process_keeps_animation_and_format(anim, tmp_path, capsys):
    src = anim.parent
    Image.fromarray(PALETTE[[[0, 1], [2, 3]]]).save(src / "still.gif")
    out = tmp_path / "out"
    rc = main(["process", str(src), "-o", str(out), "--pipeline", "invert", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["anim.gif", "still.gif"]  # .gif stays .gif
    want, got = pil_frames(anim), pil_frames(out / "anim.gif")
    assert len(got) == 3
    for g, w in zip(got, want):
        assert np.array_equal(g[..., :3], 255 - w[..., :3])
    meta = [iio.immeta(out / "anim.gif", index=i, plugin="pillow") for i in range(3)]
    assert [m["duration"] for m in meta] == [50, 70, 90] and meta[0]["loop"] == 2
    still = pil_frames(out / "still.gif")
    assert len(still) == 1 and np.array_equal(still[0][..., :3], 255 - PALETTE[[[0, 1], [2, 3]]])
    rc = main(["process", str(anim), "-o", str(tmp_path / "png"), "--pipeline", "invert",
               "--ext", "png", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "animation of 3 frames" in err and "frame=" in err, err


def test_16_bit_grey_png_keeps_every_bit(tmp_path):
    rng = np.random.default_rng(1)
    v = rng.integers(0, 65536, (7, 9), dtype=np.uint16)
    v[0, :4] = (0, 1, 65534, 65535)
    path = tmp_path / "deep.png"
    iio.imwrite(path, v, plugin="pillow")
    assert Image.open(path).mode == "I;16"  # a real 16-bit file
    buf = wgc.image.load(path)
    assert buf.dtype == "f32" and buf.shape == (7, 9, 3)
    a = buf.to_numpy()
    assert np.array_equal(np.rint(a[..., 0].astype(np.float64) * 65535).astype(np.uint16), v)
    assert (a[..., 0] == a[..., 1]).all() and (a[..., 0] == a[..., 2]).all()
    back = wgc.image.save(buf, tmp_path / "back.png", bits=16)
    assert np.array_equal(iio.imread(back, plugin="pillow"), v)
    inv = wgc.image.save(wgc.image.apply("invert", buf), tmp_path / "inv.png", bits=16)
    assert np.array_equal(iio.imread(inv, plugin="pillow"), 65535 - v)
    u8 = wgc.image.load(path, dtype="u8")
    assert u8.dtype == "u8" and np.array_equal(u8.to_numpy()[..., 0],
                                               np.rint(v / 257.0).astype(np.uint8))
    with pytest.raises(wgc.ArgumentError, match=r"bits: 16 needs .*\.png"):
        wgc.image.save(buf, tmp_path / "x.jpg", bits=16)
    colour = wgc.image.from_numpy(np.array([[[255, 0, 0]]], np.uint8))
    with pytest.raises(wgc.ArgumentError, match="grey images only"):
        wgc.image.save(colour, tmp_path / "c.png", bits=16)
    with pytest.raises(wgc.ArgumentError, match="dtype: expected"):
        wgc.image.load(path, dtype="u16")


def test_process_writes_16_bit_back(tmp_path, capsys):
    v = np.arange(0, 65536, 331, dtype=np.uint16)[:192].reshape(12, 16)
    src = tmp_path / "in"
    src.mkdir()
    iio.imwrite(src / "deep.png", v, plugin="pillow")
    rc = main(["process", str(src), "-o", str(tmp_path / "out"), "--pipeline",
               "invert | grayscale", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    got = iio.imread(tmp_path / "out" / "deep.png", plugin="pillow")
    assert got.dtype == np.uint16
    assert np.abs(got.astype(int) - (65535 - v.astype(int))).max() <= 1  # luma in f32


def test_16_bit_colour_png_is_refused_not_truncated(tmp_path):
    """The codec (Pillow) reads a 16-bit RGB PNG as 8-bit without a word: refused, unless
    8 bits are asked for."""
    import zlib

    v = (np.arange(2 * 3 * 3, dtype=np.uint16).reshape(2, 3, 3) * 3001 + 7)
    raw = b"".join(b"\0" + row.astype(">u2").tobytes() for row in v)

    def chunk(kind, data):
        return (len(data).to_bytes(4, "big") + kind + data
                + zlib.crc32(kind + data).to_bytes(4, "big"))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", (3).to_bytes(4, "big") + (2).to_bytes(4, "big")
                                         + bytes([16, 2, 0, 0, 0]))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    path = tmp_path / "rgb16.png"
    path.write_bytes(png)
    with pytest.raises(wgc.DtypeError, match=r"rgb16\.png.* 16-bit RGB PNG.*dtype='u8'"):
        wgc.image.load(path)
    got = wgc.image.to_numpy(wgc.image.load(path, dtype="u8"))[..., :3].astype(int)
    assert np.abs(got - (v >> 8)).max() <= 1


@pytest.mark.parametrize("damage", ["truncated", "junk", "empty"])
def test_corrupt_files_are_named_as_such(tmp_path, damage):
    good = open(os.path.join(DATA, "chelsea.png"), "rb").read()
    data = {"truncated": good[:len(good) // 2], "junk": b"definitely not a png",
            "empty": b""}[damage]
    path = tmp_path / f"{damage}.png"
    path.write_bytes(data)
    with pytest.raises(wgc.ArgumentError) as info:
        wgc.image.load(path)
    msg = str(info.value)
    assert repr(str(path)) in msg and "not a readable image" in msg and "corrupt" in msg
    assert "unknown error" not in msg and "can not handle" not in msg
    assert info.value.__cause__ is not None
    if damage == "truncated":
        assert "truncated" in msg.split("not an image file:")[-1]


def test_process_help_lists_every_stage_with_its_params():
    from wgcompute.kernels import registry
    from wgcompute.kernels.core.base import REQUIRED

    sub = next(a for a in build_parser()._subparsers._group_actions)
    text = sub.choices["process"].format_help()
    for name in wgc.image.image_stage_names():
        params = registry.get(name).params
        assert f"  {name}" in text, name
        for p in params:
            if p.default is not REQUIRED and p.default is not None:
                assert f"{p.name}={p.default!r}" in text, (name, p.name)
            assert f"{p.name}: " in text
    assert "gaussian_blur(radius=None, sigma=1.0, mode='clamp')" in text
    assert "resize(size)" in text and "weights=" in text


def test_rates_never_read_zero():
    from wgcompute.cli.process import rate

    assert rate(1, 23.6) == "0.0424 images/s, 23.6 s/image"
    assert rate(3, 0.25) == "12 images/s"
    assert rate(5000, 2.0) == "2,500 images/s"
    assert rate(0, 1.0) == "0 images/s"
    assert "0.0 " not in rate(1, 1000.0)
