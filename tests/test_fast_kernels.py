"""The vectorized elementwise kernels against numpy: every dtype, sizes around the vec4 and
per-invocation boundaries, and the chunking over the storage-binding limit."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels import get
from wgcompute.runtime import current_device as get_device


# The elementwise kernels themselves (wgc.add and the others are the array namespace's, with
# its promotion and true division; these files test the kernels under them)
def _kernel(name):
    def run(a, b, out=None):
        return wgc.run_kernel(f"elementwise_{name}", [a, b], out)
    return run


_kernel_add, _kernel_multiply, _kernel_divide = (_kernel(n) for n in ("add", "multiply",
                                                                      "divide"))


DTYPES = ["f32", "f16", "f64", "s32", "s64", "u32", "u8"]
# 4 elements per vec4, 16 per u8 vec, 4 items per invocation, 256 invocations per workgroup
SIZES = [0, 1, 3, 4, 5, 15, 17, 255, 1031, 4 * 4 * 256 + 7, 65_537]


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def make(rng, dt, n, nonzero=False):
    npd = wgc.DTYPES[dt].numpy
    if dt.startswith("f"):
        return rng.uniform(-4, 4, n).astype(npd)
    lo = 0 if dt.startswith("u") else -1000
    a = rng.integers(lo, 256 if dt == "u8" else 1000, n).astype(npd)
    if nonzero:
        a[a == 0] = 3
    return a


def close(got, want, dt):
    if dt == "f16":
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=2e-3, atol=2e-3)
    elif dt.startswith("f"):
        np.testing.assert_allclose(got, want, rtol=1e-6 if dt == "f32" else 1e-14, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", DTYPES)
def test_binary_ops_every_size(rng, dt):
    need(dt)
    for n in SIZES:
        a, b = make(rng, dt, n), make(rng, dt, n, nonzero=True)
        A, B = wgc.from_numpy(a), wgc.from_numpy(b)
        with np.errstate(all="ignore"):
            close(_kernel_add(A, B).to_numpy(), a + b, dt)
            close(wgc.sub(A, B).to_numpy(), a - b, dt)
            close(_kernel_multiply(A, B).to_numpy(), a * b, dt)
            if dt.startswith("f"):
                close(_kernel_divide(A, B).to_numpy(), a / b, dt)
            elif dt != "u8":  # integer division truncates toward zero, as in WGSL
                want = (np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b)).astype(a.dtype)
                close(_kernel_divide(A, B).to_numpy(), want, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_unary_ops_every_size(rng, dt):
    need(dt)
    for n in SIZES:
        a = make(rng, dt, n)
        A = wgc.from_numpy(a)
        factor = 3
        with np.errstate(all="ignore"):
            close(wgc.scale(A, factor).to_numpy(), (a * a.dtype.type(factor)).astype(a.dtype),
                  dt)
        if dt in ("f32", "f16", "f64", "s32", "s64"):
            close(wgc.relu(A).to_numpy(), np.maximum(a, 0), dt)
        if dt.startswith("f"):
            want = np.where(a > 0, a, a * a.dtype.type(0.25))
            close(wgc.relu(A, slope=0.25).to_numpy(), want, dt)


def test_u8_wraps_like_numpy(rng):
    a = rng.integers(0, 256, 1000).astype(np.uint8)
    b = rng.integers(0, 256, 1000).astype(np.uint8)
    A, B = wgc.from_numpy(a), wgc.from_numpy(b)
    np.testing.assert_array_equal(_kernel_add(A, B).to_numpy(), a + b)
    np.testing.assert_array_equal(wgc.sub(A, B).to_numpy(), a - b)


@pytest.mark.parametrize("dt", ["f32", "f16", "f64", "u8"])
def test_chunks_over_the_binding_limit(rng, dt, monkeypatch):
    """With a 4 KiB binding limit the kernel must split into aligned sub-range launches."""
    need(dt)
    dev = get_device()
    monkeypatch.setitem(dev.limits, "max-storage-buffer-binding-size", 4096)
    n = 5003
    a, b = make(rng, dt, n), make(rng, dt, n)
    A, B = wgc.from_numpy(a), wgc.from_numpy(b)
    out = wgc.empty(n, dt)
    launches = get("elementwise_add").launches([A, B], out, {}, dev)
    assert len(launches) > 1
    assert all(r[0] % dev.limit("min-storage-buffer-offset-alignment") == 0
               for launch in launches for r in launch.ranges)
    with np.errstate(all="ignore"):
        close(_kernel_add(A, B, out).to_numpy(), a + b, dt)


def test_multidimensional_shapes_keep_their_shape(rng):
    a = rng.standard_normal((3, 5, 7)).astype(np.float32)
    got = wgc.scale(wgc.from_numpy(a), 2.0).to_numpy()
    assert got.shape == (3, 5, 7)
    np.testing.assert_allclose(got, a * 2)


def test_mismatched_inputs_name_the_argument():
    a = wgc.empty(5)
    with pytest.raises(wgc.ShapeError, match="input 'b'"):
        _kernel_add(a, wgc.empty(6))
    with pytest.raises(wgc.DtypeError, match="input 'b'"):
        _kernel_add(a, wgc.empty(5, "s32"))
    with pytest.raises(wgc.DtypeError, match="slope"):
        wgc.relu(wgc.empty(5, "s32"), slope=0.5)


@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "s32", "s64", "u32"])
def test_transpose_matches_numpy(rng, dt):
    need(dt)
    for shape in [(1, 1), (3, 5), (33, 70), (64, 32), (100, 1), (0, 4)]:
        a = make(rng, dt, shape)
        got = wgc.transpose(wgc.from_numpy(a)).to_numpy()
        np.testing.assert_array_equal(got, a.T)


def test_transpose_errors_name_the_problem():
    with pytest.raises(wgc.ShapeError, match="2-D"):  # the tiled kernel itself
        wgc.run_kernel("transpose", [wgc.empty((2, 3, 4))])
    with pytest.raises(wgc.ShapeError, match="expected"):
        wgc.transpose(wgc.empty((2, 3)), wgc.empty((2, 3)))
    with pytest.raises(wgc.DtypeError, match="u8"):
        wgc.run_kernel("transpose", [wgc.empty((2, 3), "u8")])
    with pytest.raises(wgc.ArgumentError, match="not a permutation"):
        wgc.transpose(wgc.empty((2, 3, 4)), axes=(0, 0, 1))


@pytest.mark.parametrize("dt", ["f32", "f64", "f16", "s32", "s64", "u32", "u8"])
def test_transpose_any_axes_like_numpy(rng, dt):
    """wgc.transpose is numpy's: reversed axes by default (u8 and N-d through a strided
    copy), or the permutation given."""
    need(dt)
    for shape, axes in [((3, 5), None), ((2, 3, 4), None), ((2, 3, 4), (1, 0, 2)),
                        ((2, 3, 4), (-1, 0, 1)), ((4,), None), ((), None), ((0, 3), None)]:
        a = make(rng, dt, shape)
        got = wgc.transpose(wgc.from_numpy(a), axes=axes).to_numpy()
        np.testing.assert_array_equal(got, np.transpose(a, axes))


@pytest.mark.parametrize("dt,value", [("f32", 1.5), ("f16", -2.5), ("f64", 0.1), ("s32", -7),
                                      ("s64", -2**40), ("u32", 4_000_000_000), ("u8", 200)])
def test_fill_every_dtype(dt, value):
    need(dt)
    for n in [0, 1, 5, 17, 1000, 4099]:
        out = wgc.fill(wgc.empty(n, dt), value).to_numpy()
        np.testing.assert_array_equal(out, np.full(n, value, wgc.DTYPES[dt].numpy))
    with pytest.raises(wgc.ArgumentError, match="value"):
        wgc.fill(wgc.empty(3, "u8"), 300)
