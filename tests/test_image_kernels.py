"""Image kernels against independent references: scipy.ndimage (filters, borders), explicit
BT.601 weights, OpenCV / PIL (bilinear resize, half-pixel centers), numpy (colour ops).

Tolerances: f32 images within 2e-5 absolute (f32 arithmetic, weights from f32 exp);
RGBA8 images within 1 level of the float64 reference rounded to nearest."""

import numpy as np
import pytest
from scipy import ndimage

import wgcompute as wgc
from wgcompute.kernels import bind
from wgcompute.kernels.image import image

SCIPY_MODE = {"clamp": "nearest", "reflect": "reflect", "zero": "constant"}
SIZES = [(1, 1), (1, 9), (9, 1), (37, 53)]
F32_ATOL = 2e-5


def rgba(rng, h, w):
    return rng.integers(0, 256, (h, w, 4), dtype=np.uint8)


def floats(rng, h, w, c=3):
    shape = (h, w) if c is None else (h, w, c)
    return rng.random(shape, dtype=np.float32)


def run(name, arr, params=None, out=None, extra=()):
    buf = wgc.from_numpy(arr)
    inputs = [buf] + [wgc.from_numpy(np.asarray(e, dtype=np.float32)) for e in extra]
    if out is None:  # run_kernel's out=None cannot see params such as resize's size
        out = wgc.empty(*wgc.kernel_info(name).output_spec(inputs, params or {}))
    return wgc.run_kernel(name, inputs, out, params).to_numpy()


def per_channel(fn, x):
    """Apply a 2-D reference to each channel of (H, W[, C])."""
    if x.ndim == 2:
        return fn(x)
    return np.stack([fn(x[..., c]) for c in range(x.shape[2])], axis=-1)


def check_u8(got, ref_unorm, keep_alpha_of=None):
    want = np.clip(np.round(ref_unorm * 255.0), 0, 255)
    if keep_alpha_of is not None:
        want[..., 3] = keep_alpha_of[..., 3]
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1, f"max difference {diff.max()} levels"


# -- separable filters ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["clamp", "reflect", "zero"])
@pytest.mark.parametrize("size", SIZES)
def test_gaussian_blur_matches_scipy(rng, mode, size):
    h, w = size
    for radius, sigma in ((3, 1.5), (2, 0.8)):
        params = {"radius": radius, "sigma": sigma, "mode": mode}
        ref = lambda x, s=sigma, r=radius: ndimage.gaussian_filter(x, s, radius=r,
                                                                   mode=SCIPY_MODE[mode])
        x = floats(rng, h, w)
        got = run("gaussian_blur", x, params)
        np.testing.assert_allclose(got, per_channel(ref, x.astype(np.float64)), atol=F32_ATOL)
        u = rgba(rng, h, w)
        check_u8(run("gaussian_blur", u, params), per_channel(ref, u / 255.0))


def test_gaussian_radius_defaults_to_scipy_truncation(rng):
    x = floats(rng, 40, 41, None)
    got = run("gaussian_blur", x, {"sigma": 2.0})  # radius None: round(4 sigma) = 8
    np.testing.assert_allclose(got, ndimage.gaussian_filter(x.astype(np.float64), 2.0,
                                                            mode="nearest"), atol=F32_ATOL)


def test_radius_larger_than_image_reflects_repeatedly(rng):
    x = floats(rng, 5, 4, 2)
    got = run("gaussian_blur", x, {"radius": 11, "sigma": 4.0, "mode": "reflect"})
    ref = per_channel(lambda c: ndimage.gaussian_filter(c, 4.0, radius=11, mode="reflect"),
                      x.astype(np.float64))
    np.testing.assert_allclose(got, ref, atol=F32_ATOL)


@pytest.mark.parametrize("mode", ["clamp", "reflect", "zero"])
def test_box_blur_matches_uniform_filter(rng, mode):
    for r in (0, 1, 3):
        ref = lambda x, r=r: ndimage.uniform_filter(x, 2 * r + 1, mode=SCIPY_MODE[mode])
        x = floats(rng, 23, 31, 1)
        np.testing.assert_allclose(run("blur", x, {"radius": r, "mode": mode}),
                                   per_channel(ref, x.astype(np.float64)), atol=F32_ATOL)
        u = rgba(rng, 23, 31)
        check_u8(run("blur", u, {"radius": r, "mode": mode}), per_channel(ref, u / 255.0))


@pytest.mark.parametrize("size", SIZES)
def test_sharpen_is_unsharp_mask(rng, size):
    h, w = size
    params = {"amount": 0.7, "radius": 2, "sigma": 1.0}

    def ref(x):
        return x + 0.7 * (x - per_channel(lambda c: ndimage.gaussian_filter(
            c, 1.0, radius=2, mode="nearest"), x))

    x = floats(rng, h, w)
    np.testing.assert_allclose(run("sharpen", x, params), ref(x.astype(np.float64)),
                               atol=F32_ATOL)
    u = rgba(rng, h, w)
    check_u8(run("sharpen", u, params), ref(u / 255.0), keep_alpha_of=u)


# -- 2-D filters ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["clamp", "reflect", "zero"])
def test_convolve2d_matches_scipy_convolve(rng, mode):
    k = rng.standard_normal((3, 5)).astype(np.float32)
    ref = lambda x: ndimage.convolve(x, k.astype(np.float64), mode=SCIPY_MODE[mode])
    x = floats(rng, 19, 26)
    got = run("convolve2d", x, {"mode": mode}, extra=[k])
    np.testing.assert_allclose(got, per_channel(ref, x.astype(np.float64)), atol=1e-4)
    u = rgba(rng, 19, 26)
    box = np.full((3, 3), 1 / 9, np.float32)
    got = run("convolve2d", u, {"mode": mode}, extra=[box])
    check_u8(got, per_channel(lambda c: ndimage.convolve(c, box.astype(np.float64),
                                                         mode=SCIPY_MODE[mode]), u / 255.0),
             keep_alpha_of=u)


@pytest.mark.parametrize("size", SIZES)
def test_sobel_is_hypot_of_scipy_sobel(rng, size):
    h, w = size

    def ref(c):
        return np.hypot(ndimage.sobel(c, axis=0, mode="nearest"),
                        ndimage.sobel(c, axis=1, mode="nearest"))

    x = floats(rng, h, w)
    np.testing.assert_allclose(run("sobel", x), per_channel(ref, x.astype(np.float64)),
                               atol=1e-4)
    u = rgba(rng, h, w)
    check_u8(run("sobel", u, {"scale": 0.25}), 0.25 * per_channel(ref, u / 255.0),
             keep_alpha_of=u)


# -- colour ops ---------------------------------------------------------------------------------
def test_grayscale_bt601(rng):
    wts = np.array([0.299, 0.587, 0.114])
    u = rgba(rng, 13, 17)
    luma = (u[..., :3] / 255.0) @ wts
    check_u8(run("grayscale", u), np.stack([luma] * 3 + [u[..., 3] / 255.0], -1))
    x = floats(rng, 13, 17, 3)
    np.testing.assert_allclose(run("grayscale", x), x.astype(np.float64) @ wts, atol=1e-6)
    x4 = floats(rng, 5, 6, 4)
    out = wgc.empty(x4.shape, "f32")
    got = run("grayscale", x4, out=out)
    l4 = x4[..., :3].astype(np.float64) @ wts
    np.testing.assert_allclose(got, np.stack([l4] * 3 + [x4[..., 3]], -1), atol=1e-6)


def test_invert_brightness_contrast_threshold(rng):
    u = rgba(rng, 11, 7)
    x = floats(rng, 11, 7, 2) * 2 - 0.5
    f = u / 255.0
    check_u8(run("invert", u), 1.0 - f, keep_alpha_of=u)
    np.testing.assert_allclose(run("invert", x), 1.0 - x, atol=1e-6)
    bc = {"brightness": 0.1, "contrast": 1.5}
    check_u8(run("brightness_contrast", u, bc), (f - 0.5) * 1.5 + 0.6, keep_alpha_of=u)
    np.testing.assert_allclose(run("brightness_contrast", x, bc), (x - 0.5) * 1.5 + 0.6,
                               atol=1e-6)
    want = np.where(u >= 128, 255, 0)
    want[..., 3] = u[..., 3]
    assert np.array_equal(run("threshold", u, {"level": 0.5}), want)
    assert np.array_equal(run("threshold", x, {"level": 0.25}),
                          (x >= np.float32(0.25)).astype(np.float32))


@pytest.mark.parametrize("direction", ["horizontal", "vertical", "diagonal", "radial"])
def test_generate_gradient(direction):
    h, w = 9, 16
    fy, fx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    t = {"horizontal": fx, "vertical": fy, "diagonal": (fx + fy) / 2,
         "radial": np.minimum(1, np.hypot(fx - 0.5, fy - 0.5) / np.hypot(0.5, 0.5))}[direction]
    params = {"direction": direction, "start": 0.2, "end": 0.9}
    out = wgc.run_kernel("generate_gradient", [], wgc.empty((h, w, 2), "f32"), params)
    np.testing.assert_allclose(out.to_numpy(), np.stack([0.2 + 0.7 * t] * 2, -1), atol=1e-6)
    out = wgc.run_kernel("generate_gradient", [], wgc.empty((h, w, 4), "u8"), params)
    check_u8(out.to_numpy(), np.stack([0.2 + 0.7 * t] * 3 + [np.ones_like(t)], -1))
    one = wgc.run_kernel("generate_gradient", [], wgc.empty((1, 1), "f32"), params)
    assert one.to_numpy()[0, 0] == pytest.approx(0.2 if direction != "radial" else 0.9)


# -- resize and preprocess ----------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [((20, 30), (7, 11)), ((7, 11), (20, 33)), ((1, 5), (3, 9)),
                                     ((16, 16), (16, 16))])
def test_resize_matches_opencv_half_pixel(rng, src, dst):
    cv2 = pytest.importorskip("cv2", reason="OpenCV is the reference for bilinear resize")
    x = floats(rng, *src, 3)
    got = run("resize", x, {"size": dst})
    want = cv2.resize(x, (dst[1], dst[0]), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(got, want.reshape(got.shape), atol=1e-5)
    u = rgba(rng, *src)
    got = run("resize", u, {"size": dst})
    want = cv2.resize(u, (dst[1], dst[0]), interpolation=cv2.INTER_LINEAR)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_resize_upscale_matches_pil_bilinear(rng):
    from PIL import Image

    x = floats(rng, 9, 14, None)
    got = run("resize", x, {"size": (31, 40)})
    want = np.asarray(Image.fromarray(x, mode="F").resize((40, 31), Image.BILINEAR))
    np.testing.assert_allclose(got, want, atol=1e-5)
    u = rgba(rng, 9, 14)
    got = run("resize", u, {"size": (31, 40)})
    want = np.asarray(Image.fromarray(u[..., :3]).resize((40, 31), Image.BILINEAR))
    assert np.abs(got[..., :3].astype(int) - want.astype(int)).max() <= 1


def test_resize_size_from_output_and_errors(rng):
    u = wgc.from_numpy(rgba(rng, 8, 8))
    out = wgc.run_kernel("resize", [u], wgc.empty((4, 6, 4), "u8"))
    assert out.shape == (4, 6, 4)
    with pytest.raises(wgc.ArgumentError, match="size"):
        wgc.kernel_info("resize").output_spec([u], {})  # out=None and no size
    with pytest.raises(wgc.ShapeError, match="expected u8"):
        wgc.run_kernel("resize", [u], wgc.empty((4, 6, 4), "u8"), {"size": (5, 6)})


def test_preprocess_resize_normalize_chw(rng):
    cv2 = pytest.importorskip("cv2", reason="OpenCV is the reference for bilinear resize")
    u = rgba(rng, 30, 41)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    buf = wgc.from_numpy(u)
    out = wgc.empty((3, 12, 16), "f32")
    got = wgc.run_kernel("preprocess", [buf], out,
                         {"size": (12, 16), "mean": mean, "std": std}).to_numpy()
    small = cv2.resize((u[..., :3] / 255.0).astype(np.float32), (16, 12),
                       interpolation=cv2.INTER_LINEAR)
    want = ((small - np.array(mean)) / np.array(std)).transpose(2, 0, 1)
    np.testing.assert_allclose(got, want, atol=1e-4)
    x = floats(rng, 6, 5, None)
    got = wgc.run_kernel("preprocess", [wgc.from_numpy(x)], wgc.empty((1, 6, 5), "f32"),
                         {"mean": 0.5, "std": 2.0}).to_numpy()
    np.testing.assert_allclose(got[0], (x - 0.5) / 2.0, atol=1e-6)


# -- row-band chunking (the path 8192×8192 RGBA takes on a 128 MiB binding limit) ---------
def test_row_bands_match_unchunked(rng, monkeypatch):
    """Every kernel, with the binding limit lowered to 8 KiB so each launch binds a band of
    a few rows (plus halo) at an offset: results equal the single-launch results."""
    u = rgba(rng, 67, 45)
    x = floats(rng, 67, 45, 3)
    k = rng.standard_normal((5, 3)).astype(np.float32)
    cases = [("gaussian_blur", {"radius": 4, "sigma": 2.0, "mode": "reflect"}, ()),
             ("blur", {"radius": 2, "mode": "zero"}, ()), ("sharpen", {"amount": 0.5}, ()),
             ("sobel", {}, ()), ("convolve2d", {}, [k]), ("grayscale", {}, ()),
             ("invert", {}, ()), ("resize", {"size": (29, 50)}, ()),
             ("resize", {"size": (131, 20)}, ())]
    want = [[run(n, a, p, extra=e) for a in (u, x)] for n, p, e in cases]
    pre = wgc.run_kernel("preprocess", [wgc.from_numpy(u)], wgc.empty((3, 20, 30), "f32"),
                         {"size": (20, 30)}).to_numpy()
    monkeypatch.setattr(image, "MAX_BINDING", 8192)
    src = wgc.from_numpy(u)
    d = bind(wgc.kernel_info("gaussian_blur"), [src], wgc.empty(u.shape, "u8"),
             {"radius": 4, "sigma": 2.0})
    assert len(d.launches) > 10 and all(launch.ranges for launch in d.launches)
    for (n, p, e), ws in zip(cases, want, strict=True):
        for a, w in zip((u, x), ws, strict=True):
            got = run(n, a, dict(p), extra=e)
            np.testing.assert_array_equal(got, w, err_msg=f"{n} on {a.dtype}")
    got = wgc.run_kernel("preprocess", [wgc.from_numpy(u)], wgc.empty((3, 20, 30), "f32"),
                         {"size": (20, 30)}).to_numpy()
    np.testing.assert_array_equal(got, pre)


def test_band_too_small_for_one_row_is_a_clear_error(rng, monkeypatch):
    monkeypatch.setattr(image, "MAX_BINDING", 64)
    with pytest.raises(wgc.ShapeError, match="one output row"):
        run("gaussian_blur", rgba(rng, 4, 100), {"radius": 1})


# -- empty images, multi-pass binding, errors -------------------------------------------------
def test_empty_images_run_nothing():
    for shape, dt in (((0, 5, 4), "u8"), ((3, 0), "f32")):
        buf = wgc.empty(shape, dt)
        assert wgc.run_kernel("gaussian_blur", [buf]).shape == shape
        assert wgc.run_kernel("sobel", [buf]).shape == shape


def test_multipass_in_a_pipeline_and_set_params(rng):
    """gaussian_blur's two passes run as one pipeline stage; set_params(sigma=...) rewrites
    the uploaded weights in place (no new temporaries) and the next run uses them."""
    x = floats(rng, 20, 24, None)
    src, out = wgc.from_numpy(x), wgc.empty(x.shape, "f32")
    p = wgc.pipeline("blur").add(kernel="gaussian_blur", inputs=[src], output=out,
                                 params={"radius": 3, "sigma": 1.0})
    p.run()
    ref = lambda s: ndimage.gaussian_filter(x.astype(np.float64), s, radius=3, mode="nearest")
    np.testing.assert_allclose(out.to_numpy(), ref(1.0), atol=F32_ATOL)
    d = p._stages[0].dispatch
    temps = list(d.temps)
    p.set_params(0, sigma=2.5)
    assert d.temps == temps
    p.run()
    np.testing.assert_allclose(out.to_numpy(), ref(2.5), atol=F32_ATOL)
    with pytest.raises(wgc.PipelineError, match="change the passes"):
        p.set_params(0, radius=4)  # 9 weights instead of 7: a new stage is needed


@pytest.mark.parametrize("name,params,err,match", [
    ("gaussian_blur", {"mode": "wrap"}, wgc.ArgumentError, "param 'mode'"),
    ("gaussian_blur", {"radius": -1}, wgc.ArgumentError, "param 'radius'"),
    ("gaussian_blur", {"radius": 2.5}, wgc.ArgumentError, "param 'radius'"),
    ("gaussian_blur", {"radius": 500}, wgc.ArgumentError, "0..127"),
    ("gaussian_blur", {"sigma": 0}, wgc.ArgumentError, "param 'sigma'"),
    ("sharpen", {"amount": float("nan")}, wgc.ArgumentError, "param 'amount'"),
    ("blur", {"sigma": 1.0}, wgc.ArgumentError, "unknown param"),
    ("resize", {"size": (0, 3)}, wgc.ArgumentError, "param 'size'"),
    ("generate_gradient", {"direction": "up"}, wgc.ArgumentError, "param 'direction'"),
])
def test_bad_params_name_the_param(name, params, err, match):
    src = wgc.empty((4, 4, 4), "u8")
    with pytest.raises(err, match=match):
        wgc.run_kernel(name, [] if name == "generate_gradient" else [src],
                       wgc.empty((4, 4, 4), "u8"), params)


def test_bad_images_are_rejected():
    with pytest.raises(wgc.ShapeError, match=r"\(H, W, 4\)"):
        wgc.run_kernel("gaussian_blur", [wgc.empty((4, 4, 3), "u8")])
    with pytest.raises(wgc.DtypeError, match="images are"):
        wgc.run_kernel("invert", [wgc.empty((4, 4), "s32")], wgc.empty((4, 4), "f32"))
    with pytest.raises(wgc.ShapeError, match="expected"):
        wgc.run_kernel("invert", [wgc.empty((4, 4), "f32")], wgc.empty((4, 5), "f32"))
    with pytest.raises(wgc.ShapeError, match="odd"):
        wgc.run_kernel("convolve2d", [wgc.empty((4, 4), "f32"), wgc.empty((2, 3), "f32")])
    with pytest.raises(wgc.ShapeError, match=r"\(H, W, 3\) or"):
        wgc.run_kernel("grayscale", [wgc.empty((4, 4), "f32")])
    with pytest.raises(wgc.ArgumentError, match="needs an output"):
        wgc.run_kernel("generate_gradient", [])


@pytest.mark.skipif(not wgc.is_gpu(), reason="8192x8192 RGBA takes about 40 s on lavapipe "
                    "(the banded path is covered above at a small size); runs on GPUs")
def test_8192_rgba_in_bands_of_a_128_mib_binding(monkeypatch):
    """The issue's 8192×8192 RGBA image, with lavapipe's 128 MiB binding limit imposed so
    the row bands are used on any adapter; rows around every band edge against scipy."""
    n = 8192
    monkeypatch.setattr(image, "MAX_BINDING", 128 << 20)
    img = np.random.default_rng(5).integers(0, 256, (n, n, 4), dtype=np.uint8)
    src, out = wgc.from_numpy(img), wgc.empty((n, n, 4), "u8")
    d = bind(wgc.kernel_info("gaussian_blur"), [src], out, {"radius": 2, "sigma": 1.0})
    assert all(len(part.launches) > 1 for part in d.parts)
    got = wgc.run_kernel("gaussian_blur", [src], out, {"radius": 2, "sigma": 1.0}).to_numpy()
    for y0 in (0, 1020, 2040, 4090, 6140, n - 24):
        lo = max(0, y0 - 8)
        crop = img[lo:y0 + 32].astype(np.float64) / 255
        ref = per_channel(lambda c: ndimage.gaussian_filter(c, 1.0, radius=2, mode="nearest"),
                          crop)
        skip = 0 if y0 == 0 else 4  # rows next to the crop's own edge are not the image's
        want = np.round(ref[y0 - lo + skip:y0 - lo + 24] * 255)
        diff = np.abs(got[y0 + skip:y0 + 24].astype(int) - want)
        assert diff.max() <= 1, f"rows {y0}..{y0 + 24}: {diff.max()} levels"
