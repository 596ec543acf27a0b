"""The array namespace's statistical functions against numpy: sum, prod, mean, var, std, min
and max over None, ints, negative axes and tuples, with keepdims, on 0-d, empty, odd and
larger-than-a-workgroup shapes; the standard's result dtypes; empty reductions."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (1031,), (5, 2, 300)]


def need(name):
    f = DTYPES[xp._NAMES[name].name].feature
    if f and f not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {name}")


def axes_of(ndim):
    out = [None] + list(range(-ndim, ndim))
    if ndim >= 2:
        out += [(0, ndim - 1), tuple(range(ndim))]
    if ndim >= 3:
        out.append((0, 2))
    return out + [()]


def close(got, want, rtol, atol=0.0):
    got_np = got.to_numpy()
    assert got_np.shape == np.shape(want), (got_np.shape, np.shape(want))
    np.testing.assert_allclose(got_np, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_float_reductions(shape, name):
    need(name)
    rng = np.random.default_rng(len(shape))
    a = rng.uniform(0.5, 1.5, shape).astype(name)
    x = xp.asarray(a)
    p = rng.uniform(0.95, 1.05, shape).astype(name)  # products of thousands stay in range
    xp_p = xp.asarray(p)
    tol = 2e-5 if name == "float32" else 1e-12
    for axis in axes_of(a.ndim):
        for keepdims in (False, True):
            kw = {"axis": axis, "keepdims": keepdims}
            ref = a.astype(np.float64)
            for f in ("sum", "mean", "min", "max"):
                got = getattr(xp, f)(x, **kw)
                assert got.dtype == x.dtype
                close(got, getattr(np, f)(ref, **kw), tol * 10)
            close(xp.prod(xp_p, **kw), np.prod(p.astype(np.float64), **kw), tol * 50)
            for c in (0, 1, 0.5):
                n = ref.size if axis is None else int(np.prod(
                    [a.shape[d] for d in np.atleast_1d(np.array(axis, dtype=int))]))
                if n - c <= 0:
                    continue
                close(xp.var(x, correction=c, **kw), np.var(ref, ddof=c, **kw), tol * 10,
                      tol)
                close(xp.std(x, correction=c, **kw), np.std(ref, ddof=c, **kw), tol * 10,
                      tol)


@pytest.mark.parametrize("name, want", [("int32", "int32"), ("int64", "int64"),
                                        ("uint32", "uint32"), ("uint8", "uint32")])
def test_integer_sums_take_the_default_dtype(name, want):
    need(name)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 200, (4, 301)).astype(name)
    x = xp.asarray(a)
    for axis in (None, 0, 1, (0, 1)):
        got = xp.sum(x, axis=axis)
        assert got.dtype == xp._NAMES[want]
        np.testing.assert_array_equal(got.to_numpy(), np.sum(a, axis=axis, dtype=want))
        small = (a % 3).astype(name)
        got = xp.prod(xp.asarray(small[:, :9]), axis=axis)
        assert got.dtype == xp._NAMES[want]
        np.testing.assert_array_equal(got.to_numpy(),
                                      np.prod(small[:, :9], axis=axis, dtype=want))
    for f in ("min", "max"):
        got = getattr(xp, f)(x, axis=1)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.to_numpy(), getattr(np, f)(a, axis=1))


def test_dtype_argument_converts_first():
    need("float64")
    a = np.arange(-50, 51, dtype=np.int32).reshape(101, 1) * 3
    x = xp.asarray(a)
    got = xp.sum(x, dtype=xp.float64)
    assert got.dtype == xp.float64 and got.to_numpy() == np.sum(a, dtype=np.float64)
    got = xp.sum(x, axis=0, dtype=xp.int64)
    assert got.dtype == xp.int64
    np.testing.assert_array_equal(got.to_numpy(), np.sum(a, axis=0, dtype=np.int64))
    # int32 wraps around in its own dtype, as numpy's sum with dtype=int32
    big = np.full(5, 2**30, np.int32)
    np.testing.assert_array_equal(xp.sum(xp.asarray(big)).to_numpy(),
                                  np.sum(big, dtype=np.int32))


def test_empty_reductions():
    z = xp.asarray(np.zeros((0, 3), np.float32))
    np.testing.assert_array_equal(xp.sum(z, axis=0).to_numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(xp.prod(z, axis=0).to_numpy(), np.ones(3, np.float32))
    assert xp.sum(z).to_numpy() == 0 and xp.prod(z).to_numpy() == 1
    assert np.isnan(xp.mean(z, axis=0).to_numpy()).all()
    assert np.isnan(xp.var(z, axis=0).to_numpy()).all()
    assert xp.sum(z, axis=1).shape == (0,)
    assert xp.max(z, axis=1).shape == (0,)
    with pytest.raises(wgc.ShapeError, match="no elements"):
        xp.max(z, axis=0)
    with pytest.raises(wgc.ShapeError, match="no elements"):
        xp.min(z)
    iz = xp.asarray(np.zeros((0,), np.int32))
    assert xp.prod(iz).to_numpy() == 1 and xp.prod(iz).dtype == xp.int32


def test_var_nan_where_correction_leaves_nothing_and_nan_propagates():
    a = np.array([[1.0, 2.0, 4.0], [3.0, np.nan, 1.0]], np.float32)
    x = xp.asarray(a)
    assert np.isnan(xp.var(x, axis=1, correction=3).to_numpy()).all()
    assert np.isnan(xp.std(x, correction=7.5).to_numpy())
    got = xp.var(x, axis=1).to_numpy()
    assert np.isclose(got[0], np.var(a[0])) and np.isnan(got[1])
    for f in ("sum", "prod", "mean", "max", "min"):
        r = getattr(xp, f)(x, axis=1).to_numpy()
        assert np.isnan(r[1]) and np.isclose(r[0], getattr(np, f)(a[0])), f


def test_refusals_name_the_argument():
    i = xp.asarray(np.arange(6, dtype=np.int32))
    b = xp.asarray(np.array([True, False]))
    for f in (xp.mean, xp.var, xp.std):
        with pytest.raises(wgc.DtypeError, match="int32 array; expected a real floating"):
            f(i)
    for f in (xp.sum, xp.prod, xp.max, xp.min):
        with pytest.raises(wgc.DtypeError, match="bool array"):
            f(b)
    with pytest.raises(wgc.ArgumentError, match="axis: 1 is out of range"):
        xp.sum(i, axis=1)
    with pytest.raises(wgc.ArgumentError, match="repeats an axis"):
        xp.sum(i, axis=(0, -1))
    with pytest.raises(wgc.ArgumentError, match="keepdims"):
        xp.max(i, keepdims="yes")
    with pytest.raises(wgc.ArgumentError, match="correction"):
        xp.var(xp.asarray([1.0, 2.0]), correction=float("inf"))
    with pytest.raises(wgc.DtypeError, match="dtype"):
        xp.sum(i, dtype=xp.bool)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 4, 130), (0, 3), (2, 0)])
def test_complex_sum_and_prod(shape):
    rng = np.random.default_rng(7)
    a = (rng.uniform(0.9, 1.1, shape) * np.exp(1j * rng.uniform(-0.2, 0.2, shape))
         ).astype(np.complex64)
    x = xp.asarray(a)
    ref = a.astype(np.complex128)
    for axis in axes_of(a.ndim):
        for keepdims in (False, True):
            for f in ("sum", "prod"):
                got = getattr(xp, f)(x, axis=axis, keepdims=keepdims)
                assert got.dtype == xp.complex64
                close(got, getattr(np, f)(ref, axis=axis, keepdims=keepdims), 1e-4, 1e-5)
    with pytest.raises(wgc.DtypeError, match="into float32"):
        xp.sum(x, dtype=xp.float32)
    for f in (xp.max, xp.min, xp.mean, xp.var):
        with pytest.raises(wgc.DtypeError, match="complex64 array"):
            f(x)


@pytest.fixture(params=[True, False], ids=["subgroup", "workgroup-memory"])
def path(request, monkeypatch):
    from wgcompute.kernels.reduce import reduce as reduce_mod

    if request.param and "subgroup" not in wgc.device_info()["features"]:
        pytest.skip("adapter has no subgroup feature")
    monkeypatch.setattr(reduce_mod, "use_subgroups", request.param)
    return request.param


@pytest.mark.parametrize("dt", ["f32", "f16", "f64", "s32", "s64", "u32", "u8"])
def test_prod_kernel_every_mode(dt, path):
    """The prod reduction kernel itself, on both of its paths: everything (partials, then one
    workgroup), rows, columns (in one and in two steps), gathered axes; u8 multiplies into
    u32, the others in their own dtype (integers wrap around)."""
    feature = DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"adapter lacks {feature} for {dt}")
    rng = np.random.default_rng(11)
    npt = DTYPES[dt].numpy
    out_dt = np.uint32 if dt == "u8" else npt
    for shape, axis in [((70_001,), None), ((7, 9), -1), ((4, 1031), 1), ((1031, 3), 0),
                        ((2048, 2), 0), ((3, 5, 4), (0, 2)), ((5,), 0)]:
        if DTYPES[dt].is_float:
            a = rng.uniform(0.99, 1.01, shape).astype(npt)
        else:
            a = rng.choice(np.array([1, 1, 1, 3, 255], npt), shape)
        got = wgc.run_kernel("prod", [wgc.from_numpy(a)], None, {"axis": axis})
        want = np.prod(a.astype(np.float64 if DTYPES[dt].is_float else out_dt), axis=axis)
        assert got.dtype == np.dtype(out_dt)
        if DTYPES[dt].is_float:
            rtol = {"f16": 2e-2, "f32": 1e-4, "f64": 1e-12}[dt]
            np.testing.assert_allclose(got.to_numpy().astype(np.float64), want, rtol=rtol)
        else:
            np.testing.assert_array_equal(got.to_numpy(), want.astype(out_dt))
