"""Reductions (sum, max, min, mean, argmax) and softmax against numpy: every dtype, last axis
and everything, on the subgroup path and the workgroup-memory path (other axes, tuples of
axes and keepdims: test_reduce_axes.py)."""

import numpy as np
import pytest

import wgcompute as wgc
from wgcompute.kernels.reduce import reduce as reduce_mod

DTYPES = ["f32", "f16", "f64", "s32", "s64", "u32", "u8"]
# (1,) and (7,) are full reductions; 70_001 spans several workgroups of the full path (their
# partials meet by compare-and-swap); (7, 9) of u8 packs four rows' results per output word
SHAPES = [(1,), (7,), (70_001,), (3, 5), (5, 8), (4, 1031), (7, 9), (2, 3, 64)]


@pytest.fixture(params=[True, False], ids=["subgroup", "workgroup-memory"])
def path(request, monkeypatch):
    if request.param and "subgroup" not in wgc.device_info()["features"]:
        pytest.skip("adapter has no subgroup feature")
    monkeypatch.setattr(reduce_mod, "use_subgroups", request.param)
    return request.param


def need(dt):
    feature = wgc.DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")


def make(rng, dt, shape):
    npd = wgc.DTYPES[dt].numpy
    if dt.startswith("f"):
        return rng.standard_normal(shape).astype(npd)
    if dt == "u8":
        return rng.integers(0, 256, shape).astype(npd)
    lo = 0 if dt.startswith("u") else -1000
    return rng.integers(lo, 1000, shape).astype(npd)


def reference(op, a, axis):
    if op == "sum":
        if a.dtype.kind == "f":
            return np.sum(a.astype(np.float64), axis=axis)
        return np.sum(a, axis=axis, dtype=np.uint32 if a.dtype == np.uint8 else a.dtype)
    if op == "mean":
        return np.mean(a.astype(np.float64), axis=axis)
    return {"max": np.max, "min": np.min, "argmax": np.argmax}[op](a, axis=axis)


@pytest.mark.parametrize("op", ["sum", "max", "min", "mean", "argmax"])
@pytest.mark.parametrize("dt", DTYPES)
def test_reduce_matches_numpy(rng, path, op, dt):
    need(dt)
    fn = getattr(wgc, f"reduce_{op}")
    for shape in SHAPES:
        a = make(rng, dt, shape)
        x = wgc.from_numpy(a)
        for axis in (-1, None):
            got = fn(x, axis=axis).to_numpy()
            want = np.asarray(reference(op, a, None if axis is None else -1))
            assert got.shape == want.shape, (shape, axis)
            if op in ("max", "min", "argmax") or (op == "sum" and dt[0] != "f"):
                np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=str(shape))
                continue
            # float sums: error bound of a sum of n terms in the accumulator's precision
            n = a.size if axis is None else shape[-1]
            eps = {"f64": 2.3e-16}.get(dt, 1.2e-7)  # f16 and integers accumulate in f32
            scale = np.sum(np.abs(a.astype(np.float64)), axis=None if axis is None else -1)
            if op == "mean":
                scale = scale / n
            tol = n * eps * scale + (np.abs(want) * 1e-3 if got.dtype == np.float16 else 0)
            assert np.all(np.abs(got.astype(np.float64) - want) <= tol), (shape, axis)


def test_output_dtypes_and_shapes():
    x = wgc.from_numpy(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    assert wgc.reduce_sum(x).dtype == "u32" and wgc.reduce_sum(x).shape == (2, 3)
    assert wgc.reduce_max(x).dtype == "u8"
    assert wgc.reduce_mean(x).dtype == "f32"
    assert wgc.reduce_argmax(x).dtype == "u32"
    assert wgc.reduce_sum(x, axis=None).shape == ()
    assert wgc.reduce_sum(x, axis=2).shape == (2, 3)  # the last axis by its number
    i = wgc.from_numpy(np.array([1, 2], np.int32))
    assert wgc.reduce_mean(i).dtype == "f32" and float(wgc.reduce_mean(i).to_numpy()) == 1.5


def test_sum_of_nothing_is_zero_and_max_of_nothing_is_an_error():
    e = wgc.empty((0,), "f32")
    assert float(wgc.reduce_sum(e, axis=None).to_numpy()) == 0.0
    rows = wgc.empty((3, 0), "s32")
    np.testing.assert_array_equal(wgc.reduce_sum(rows).to_numpy(), [0, 0, 0])
    for fn in (wgc.reduce_max, wgc.reduce_min, wgc.reduce_argmax):
        with pytest.raises(wgc.ShapeError, match="no elements"):
            fn(e, axis=None)
        with pytest.raises(wgc.ShapeError, match="no elements"):  # a (3, 0) last axis too
            fn(rows)
    assert np.isnan(float(wgc.reduce_mean(e, axis=None).to_numpy()))  # numpy: nan (and a warning)
    assert np.isnan(wgc.reduce_mean(rows).to_numpy()).all() and wgc.reduce_mean(rows).shape == (3,)
    assert wgc.reduce_sum(wgc.empty((0, 4), "f32")).shape == (0,)
    assert wgc.reduce_max(wgc.empty((0, 4), "f32")).shape == (0,)  # nothing to reduce, no error


def test_argmax_returns_the_first_of_equal_maxima(path):
    a = np.zeros((3, 1000), np.float32)
    a[0, [5, 700]] = 2.0
    a[1, [999, 3]] = 1.0
    a[2, :] = -1.0
    x = wgc.from_numpy(a)
    np.testing.assert_array_equal(wgc.reduce_argmax(x).to_numpy(), [5, 3, 0])
    assert int(wgc.reduce_argmax(x, axis=None).to_numpy()) == 5


def test_bad_axis_and_out_are_named():
    x = wgc.from_numpy(np.ones((2, 3), np.float32))
    with pytest.raises(wgc.ArgumentError, match="axis"):
        wgc.reduce_sum(x, axis=2)
    with pytest.raises(wgc.ArgumentError, match="axis"):
        wgc.reduce_sum(x, axis="last")
    with pytest.raises(wgc.ShapeError, match="out is"):
        wgc.reduce_sum(x, out=wgc.empty((3,), "f32"))
    with pytest.raises(wgc.DtypeError, match="out is s32"):
        wgc.reduce_sum(x, out=wgc.empty((2,), "s32"))
    with pytest.raises(wgc.DtypeError, match="not supported"):
        wgc.softmax(wgc.from_numpy(np.ones(4, np.int32)))
    with pytest.raises(wgc.ArgumentError, match="x"):
        wgc.reduce_sum([1, 2, 3])


def softmax_ref(a, axis):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_softmax_matches_numpy(rng, path, dt):
    need(dt)
    for shape in [(1,), (7,), (3, 5), (4, 1031), (300, 64), (2, 2, 33)]:
        a = (rng.standard_normal(shape) * 4).astype(wgc.DTYPES[dt].numpy)
        x = wgc.from_numpy(a)
        for axis in (-1, None):
            got = wgc.softmax(x, axis=axis).to_numpy()
            assert got.shape == shape and got.dtype == a.dtype
            want = softmax_ref(a, None if axis is None else -1)
            atol = 1e-3 if dt == "f16" else 1e-6
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3 if dt == "f16"
                                       else 1e-5, atol=atol, err_msg=f"{shape} axis={axis}")


def test_softmax_handles_minus_infinity_and_large_values():
    a = np.array([[-np.inf, 0.0, 1.0, -np.inf], [1000.0, 1000.0, -1000.0, 999.0]], np.float32)
    got = wgc.softmax(wgc.from_numpy(a)).to_numpy()
    with np.errstate(invalid="ignore"):
        want = softmax_ref(a, -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
