"""In-place runs (out= one of the inputs): every kernel that allows it against numpy (image
kernels also against their own out-of-place result), the refusals of those where it is not
well defined, and a pipeline whose stages write their own input."""

import importlib

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels import registry

image_mod = importlib.import_module("wgcompute.kernels.image.image")
BuiltinKernel = importlib.import_module("wgcompute.kernels.core.base").BuiltinKernel
pytestmark = pytest.mark.computes("dt")  # kernels on f16/f64/s64 need adapter features

ALL = ["f32", "f64", "f16", "s32", "s64", "u32", "u8"]
N = 100_003  # several workgroups of 256 × 4 items, and a ragged end


def data(dt, rng, n=N, nonzero=False):
    npd = wgc.DTYPES[dt].numpy
    if dt in ("f32", "f64", "f16"):
        x = rng.uniform(-4, 4, n).astype(npd)
    elif dt in ("u32", "u8"):
        x = rng.integers(0, 200, n).astype(npd)
    else:
        x = rng.integers(-1000, 1000, n).astype(npd)
    if nonzero:
        x[x == 0] = 1
    return x


BINARY = {"add": np.add, "sub": np.subtract, "multiply": np.multiply}


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("alias", ["out=a", "out=b", "out=a=b"])
def test_binary_in_place(op, dt, alias, rng):
    a = data(dt, rng)
    b = a if alias == "out=a=b" else data(dt, rng)
    want = BINARY[op](a, b)
    ga = wgc.from_numpy(a)
    gb = ga if alias == "out=a=b" else wgc.from_numpy(b)
    out = gb if alias == "out=b" else ga
    assert getattr(wgc, op)(ga, gb, out) is out
    np.testing.assert_array_equal(out.to_numpy(), want)


@pytest.mark.parametrize("dt", ["f32", "s32", "u32", "u8"])
def test_divide_in_place(dt, rng):
    a, b = data(dt, rng), data(dt, rng, nonzero=True)
    want = (a / b).astype(a.dtype) if dt == "f32" else \
        (np.trunc(a.astype(np.float64) / b)).astype(a.dtype)
    gb = wgc.from_numpy(b)
    if dt == "f32":
        wgc.divide(wgc.from_numpy(a), gb, gb)
    else:  # the kernel's integer division (wgc.divide is true division: floats)
        wgc.run_kernel("elementwise_divide", [wgc.from_numpy(a), gb], gb)
    if dt == "f32":
        np.testing.assert_allclose(gb.to_numpy(), want, rtol=3e-7)
    else:
        np.testing.assert_array_equal(gb.to_numpy(), want)


@pytest.mark.parametrize("dt", ALL)
def test_scale_copy_and_fill_in_place(dt, rng):
    a = data(dt, rng)
    g = wgc.from_numpy(a)
    wgc.run_kernel("scale", [g], g, {"scalar": 3})
    np.testing.assert_array_equal(g.to_numpy(), a * a.dtype.type(3))
    wgc.run_kernel("copy", [g], g)
    np.testing.assert_array_equal(g.to_numpy(), a * a.dtype.type(3))
    wgc.run_kernel("fill", [], g, {"value": 7})
    np.testing.assert_array_equal(g.to_numpy(), np.full(N, 7, a.dtype))


@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "s32", "s64"])
def test_relu_in_place(dt, rng):
    a = data(dt, rng)
    g = wgc.from_numpy(a)
    assert wgc.relu(g, out=g) is g
    np.testing.assert_array_equal(g.to_numpy(), np.maximum(a, 0))
    if dt in ("f32", "f64"):
        g = wgc.from_numpy(a)
        wgc.relu(g, slope=0.25, out=g)
        np.testing.assert_array_equal(g.to_numpy(), np.where(a > 0, a, a * 0.25))


# -- image kernels --------------------------------------------------------------------------
def rgba(rng, h=37, w=53):
    return rng.integers(0, 256, (h, w, 4), dtype=np.uint8)


def unorm(x):
    return x.astype(np.float64) / 255.0


def to_u8(v):
    return np.clip(np.floor(np.clip(v, 0, 1) * 255.0 + 0.5), 0, 255).astype(np.uint8)


POINTWISE = {  # numpy on RGBA8 as unorm, alpha kept
    "invert": ({}, lambda v: 1.0 - v),
    "threshold": ({"level": 0.4}, lambda v: (v >= 0.4).astype(np.float64)),
    "brightness_contrast": ({"brightness": 0.1, "contrast": 1.5},
                            lambda v: (v - 0.5) * 1.5 + 0.5 + 0.1),
}


@pytest.mark.parametrize("name", list(POINTWISE))
def test_pointwise_image_kernels_in_place(name, rng):
    params, f = POINTWISE[name]
    im = rgba(rng)
    g = wgc.from_numpy(im)
    wgc.run_kernel(name, [g], g, params)
    want = im.copy()
    want[..., :3] = to_u8(f(unorm(im[..., :3])))
    got = g.to_numpy()
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # unorm rounding
    np.testing.assert_array_equal(got[..., 3], im[..., 3])
    f32 = rng.uniform(0, 1, (19, 23, 3)).astype(np.float32)
    gf = wgc.from_numpy(f32)
    wgc.run_kernel(name, [gf], gf, params)
    np.testing.assert_allclose(gf.to_numpy(), f(f32.astype(np.float64)), atol=1e-6)


def test_grayscale_in_place_rgba8_and_refused_for_f32(rng):
    im = rgba(rng)
    g = wgc.from_numpy(im)
    wgc.run_kernel("grayscale", [g], g)
    luma = unorm(im[..., :3]) @ np.array([0.299, 0.587, 0.114])
    got = g.to_numpy()
    assert np.abs(got[..., 0].astype(int) - to_u8(luma).astype(int)).max() <= 1
    np.testing.assert_array_equal(got[..., 0], got[..., 1])
    np.testing.assert_array_equal(got[..., 3], im[..., 3])
    f = wgc.from_numpy(rng.uniform(0, 1, (5, 6, 4)).astype(np.float32))
    with pytest.raises(wgc.ArgumentError, match="grayscale of an f32 image reads every "
                                                "channel"):
        wgc.run_kernel("grayscale", [f], f)


@pytest.mark.parametrize("name,params", [
    ("gaussian_blur", {"sigma": 1.5}), ("blur", {"radius": 2}),
    ("sharpen", {"amount": 0.8, "sigma": 1.2}),
])
@pytest.mark.parametrize("kind", ["rgba8", "f32"])
@pytest.mark.parametrize("banded", [False, True])
def test_separable_filters_in_place(name, params, kind, banded, rng, monkeypatch):
    """Their first pass reads the image into a temporary: in place gives exactly the
    out-of-place result, also when each launch binds only a band of rows."""
    if banded:
        monkeypatch.setattr(image_mod, "MAX_BINDING", 12288)  # bands of rows
    im = rgba(rng, 61, 47) if kind == "rgba8" else \
        rng.uniform(0, 1, (61, 47, 3)).astype(np.float32)
    want = wgc.run_kernel(name, [wgc.from_numpy(im)], None, params).to_numpy()
    g = wgc.from_numpy(im)
    assert wgc.run_kernel(name, [g], g, params) is g
    np.testing.assert_array_equal(g.to_numpy(), want)
    assert not np.array_equal(want, im)  # the filter did something


# -- refusals -------------------------------------------------------------------------------
REFUSED = {
    "transpose": "transpose writes each element of a to another place",
    "matmul": "matmul reads whole rows",
    "sum": "a reduction combines many elements", "max": "a reduction",
    "min": "a reduction", "mean": "a reduction", "argmax": "a reduction",
    "prod": "a reduction", "any": "a reduction", "all": "a reduction",
    "softmax": "softmax reads its whole row",
    "sobel": "it reads neighbouring pixels", "convolve2d": "it reads neighbouring pixels",
    "resize": "it reads neighbouring pixels", "preprocess": "it reads neighbouring pixels",
    # the neural-network operators (wgcompute.kernels.nn.nn, conv)
    "conv2d": "a convolution reads neighbouring pixels",
    "conv2d_residual": "a convolution reads neighbouring pixels",
    "conv_transpose2d": "a convolution reads neighbouring pixels",
    "gemm": "gemm reads whole rows",
    "nn_binary": "broadcasting reads elements other than the one written",
    "nn_pool": "pooling reads neighbouring elements",
    "nn_global_pool": "pooling reads neighbouring elements",
    "nn_softmax": "softmax reads its whole row",
    "nn_transpose": "transpose writes each element of x to another place",
    "nn_lrn": "LRN reads neighbouring channels",
    "nn_copy": "it writes rows at other offsets than it reads",
    "preprocess_batch": "it reads neighbouring pixels",
    # elementwise, but run in place nowhere (a model's plan never aliases): not tested so
    "nn_activation": "it is not known to give the same result in place",
    "nn_batchnorm": "it is not known to give the same result in place",
    "strided_copy": "strided_copy reads other elements than the one it writes",
    "astype": "astype writes another dtype than it reads",
}
# how many inputs each refused kernel takes beyond the first (the aliased one)
EXTRA_INPUTS = {"matmul": 1, "conv2d": 2, "conv2d_residual": 3, "conv_transpose2d": 2,
                "gemm": 2, "nn_binary": 1, "nn_batchnorm": 4}
ALLOWED = {"elementwise_add", "elementwise_sub", "elementwise_multiply", "elementwise_divide",
           "scale", "relu", "copy", "invert", "threshold", "brightness_contrast",
           "grayscale", "gaussian_blur", "blur", "sharpen"}


def test_every_kernel_is_tested_in_place_or_refused():
    """A kernel that allows in place is in ALLOWED (tested above); every other one with
    inputs is in REFUSED (tested below). A new kernel must join one of them."""
    allowed, refused = set(), set()
    for name in registry.names():
        k = registry.get(name)
        if not k.inputs or not isinstance(k, BuiltinKernel):
            continue  # fill, generate_gradient: nothing to alias; users' kernels refuse
        if not type(k).__module__.startswith("wgcompute."):
            continue  # defined outside the package (docs/guide/adding-an-op.md's example)
        (refused if k.not_in_place else allowed).add(name)
    assert allowed == ALLOWED
    assert refused == set(REFUSED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_in_place(name):
    sq = wgc.from_numpy(np.ones((8, 8), np.float32))
    img = wgc.from_numpy(np.ones((8, 8, 3), np.float32))
    inputs = {"matmul": [sq, sq], "convolve2d": [img, wgc.from_numpy(np.ones((3, 3),
                                                                           np.float32))]}
    inputs["argmax"] = [wgc.from_numpy(np.ones((8, 8), np.uint32))]  # argmax gives u32
    for truth in ("any", "all"):  # they give bool
        inputs[truth] = [wgc.from_numpy(np.ones((8, 8), np.bool_))]
    ins = inputs.get(name, [img if name in ("sobel", "resize", "preprocess") else sq])
    if name not in inputs and name in EXTRA_INPUTS:
        ins = ins + [wgc.from_numpy(np.ones(8, np.float32))] * EXTRA_INPUTS[name]
    params = {"resize": {"size": (8, 8)}}.get(name)
    before = ins[0].to_numpy()
    with pytest.raises(wgc.ArgumentError, match=rf"{name}: output is also input '.*?'; "
                                                rf"{REFUSED[name]}.*cannot be its input"):
        wgc.run_kernel(name, ins, ins[0], params)
    np.testing.assert_array_equal(ins[0].to_numpy(), before)


def test_custom_kernels_are_not_run_in_place():
    name = "in_place_custom_t"
    wgc.register_kernel(name, """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x < arrayLength(&out)) { out[g.x] = a[arrayLength(&a) - 1u - g.x]; }
}
""", replace=True)
    x = wgc.buffer([1.0, 2.0, 3.0])
    with pytest.raises(wgc.ArgumentError, match="not known to give the same result in place"):
        wgc.run_kernel(name, [x], x)


# -- pipelines ------------------------------------------------------------------------------
def test_pipeline_stages_write_their_own_input(rng):
    """One buffer through scale, relu, add-to-itself and a blur-free chain, every stage
    writing its input: one buffer instead of one per stage."""
    a = rng.uniform(-2, 2, 4099).astype(np.float32)
    g = wgc.from_numpy(a)
    bias = wgc.from_numpy(np.full(4099, 0.5, np.float32))
    p = (wgc.pipeline("in-place")
         .add(kernel="scale", inputs=[g], output=g, params={"scalar": 3.0})
         .add(kernel="relu", inputs=[g], output=g)
         .add(kernel="add", inputs=[g, bias], output=g)
         .add(kernel="multiply", inputs=[g, g], output=g))
    p.run()
    want = (np.maximum(a * np.float32(3), 0) + np.float32(0.5)) ** 2
    np.testing.assert_allclose(g.to_numpy(), want, rtol=1e-6)
    p.run()  # again, on its own output
    want = (np.maximum(want * np.float32(3), 0) + np.float32(0.5)) ** 2
    np.testing.assert_allclose(g.to_numpy(), want, rtol=1e-6)


def test_pipeline_image_stages_in_place(rng):
    im = rgba(rng, 40, 30)
    want = wgc.run_kernel("gaussian_blur", [wgc.from_numpy(im)], None, {"sigma": 1.0})
    want = wgc.run_kernel("invert", [want]).to_numpy()
    g = wgc.from_numpy(im)
    (wgc.pipeline()
     .add(kernel="gaussian_blur", inputs=[g], output=g, params={"sigma": 1.0})
     .add(kernel="invert", inputs=[g], output=g)).run()
    np.testing.assert_array_equal(g.to_numpy(), want)


def test_in_place_is_its_own_pipeline_key():
    """The in-place variant declares the aliased input read_write: a pipeline of its own,
    keyed by the aliasing, beside the out-of-place one."""
    x = wgc.buffer([1.0, -2.0])
    y = wgc.empty((2,))
    wgc.relu(x, out=y)
    wgc.relu(x, out=x)
    cache = wgc.current_device().pipelines
    keys = [k for k in cache if k.kernel == "relu" and k.dtypes == ("f32",)]
    assert {k.in_place for k in keys} == {(), (0,)}
    src = {k.in_place: c.source for k, c in cache.items() if k in keys}
    assert "var<storage, read> a" in src[()] and "var<storage, read_write> a" in src[(0,)]
