"""cumulative_sum and cumulative_prod of wgcompute.array_api against numpy (np.cumsum /
np.cumprod in the result's dtype), and the scan kernels under them: every real dtype, 0-d
refused, empty axes, odd lengths, rows of one tile, many short rows, long rows of several
tiles (three steps), every axis, include_initial and dtype."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.commands import run_kernel
from wgcompute.dtypes import DTYPES
from wgcompute.kernels.scan.scan import SCANS, tile

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

REAL = tuple(d for d in ("f32", "f64", "f16", "s32", "s64", "u32", "u8", "bool")
             if d in DTYPES)


def need(*dts):
    have = wgc.device_info()["features"]
    for dt in dts:
        f = DTYPES[dt].feature
        if f and f not in have:
            pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def values(dt, shape, rng, op="sum"):
    npt = DTYPES[dt].numpy
    if DTYPES[dt].kind == "b":
        return rng.random(shape) < 0.5
    if op == "prod":  # products that stay exact (floats) or wrap the same way (integers)
        if DTYPES[dt].is_float:  # (f16: no 2s, whose products pass its range)
            pool = [1.0, -1.0] if dt == "f16" else [1.0, -1.0, 2.0, 0.5]
            return rng.choice(pool, size=shape).astype(npt)
        return rng.choice([1, 3, 1, 1, 2], size=shape).astype(npt)
    if DTYPES[dt].is_float:
        return rng.integers(-8, 8, size=shape).astype(npt)  # sums exact in every order
    if DTYPES[dt].kind == "u":
        return rng.integers(0, 200, size=shape).astype(npt)
    return rng.integers(-1000, 1000, size=shape).astype(npt)


def expected(op, a, axis, out_dt, include_initial):
    fn = np.cumsum if op == "sum" else np.cumprod
    if a.dtype == np.float16:  # accumulated in f32, as wgcompute does
        r = fn(a.astype(np.float32), axis=axis).astype(np.float16)
    else:
        r = fn(a, axis=axis, dtype=DTYPES[out_dt].numpy)
    if include_initial:
        pad = [(0, 0)] * a.ndim
        pad[axis] = (1, 0)
        r = np.pad(r, pad, constant_values=0 if op == "sum" else 1)
    return r


def default_out(dt):
    return {"bool": "s32", "u8": "u32"}.get(dt, dt)


FN = {"sum": xp.cumulative_sum, "prod": xp.cumulative_prod}


@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("dt", REAL)
def test_dtypes_1d(op, dt, rng):
    need(dt, default_out(dt))
    for n in (1, 7, 1000, tile(dt) + 3):
        a = values(dt, (n,), rng, op)
        for inc in (False, True):
            got = FN[op](wgc.from_numpy(a), include_initial=inc)
            want = expected(op, a, 0, default_out(dt), inc)
            assert got.dtype == default_out(dt)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.to_numpy(), want, err_msg=f"{dt} n={n} {inc}")


@pytest.mark.parametrize("shape,axis", [((3, 4), 0), ((3, 4), 1), ((3, 4), -1),
                                        ((2, 3, 5), 1), ((2, 3, 5), -3), ((4, 1, 3), 1),
                                        ((2, 0, 3), 1), ((2, 0, 3), 0), ((0,), 0),
                                        ((3000, 3), 0), ((2, 9000), 1), ((4000, 5), 1)])
@pytest.mark.parametrize("op", ["sum", "prod"])
def test_axes_and_shapes(shape, axis, op, rng):
    a = values("s32", shape, rng, op)
    for inc in (False, True):
        got = FN[op](xp.asarray(a), axis=axis, include_initial=inc)
        want = expected(op, a, axis % len(shape), "s32", inc)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.to_numpy(), want)


def test_floats_against_numpy(rng):
    """Scans of random floats: a different order of additions than numpy's, so close."""
    a = rng.standard_normal((5, 10_000)).astype(np.float32)
    got = xp.cumulative_sum(xp.asarray(a), axis=1).to_numpy()
    np.testing.assert_allclose(got, np.cumsum(a.astype(np.float64), axis=1), rtol=1e-4,
                               atol=1e-3)
    b = np.array([1.0, np.nan, 2.0, np.inf, -np.inf, 3.0], np.float32)
    np.testing.assert_array_equal(xp.cumulative_sum(xp.asarray(b)).to_numpy(), np.cumsum(b))
    np.testing.assert_array_equal(xp.cumulative_prod(xp.asarray(b)).to_numpy(), np.cumprod(b))


def test_integers_wrap(rng):
    a = np.full(5000, 2**30, np.int32)
    np.testing.assert_array_equal(xp.cumulative_sum(xp.asarray(a)).to_numpy(),
                                  np.cumsum(a, dtype=np.int32))
    need("s64")
    b = np.full(70, 3, np.int64)
    np.testing.assert_array_equal(xp.cumulative_prod(xp.asarray(b)).to_numpy(), np.cumprod(b))


def test_dtype_argument(rng):
    a = rng.integers(0, 255, 3000).astype(np.uint8)
    got = xp.cumulative_sum(xp.asarray(a), dtype=xp.int32)
    assert got.dtype == "s32"
    np.testing.assert_array_equal(got.to_numpy(), np.cumsum(a, dtype=np.int32))
    f = rng.integers(-3, 3, 100).astype(np.float32)
    need("f64")
    got = xp.cumulative_sum(xp.asarray(f), dtype=xp.float64)
    assert got.dtype == "f64"
    np.testing.assert_array_equal(got.to_numpy(), np.cumsum(f, dtype=np.float64))
    h = np.array([1.5, -2.7, 300.0], np.float32)  # converted as numpy does: truncated
    got = xp.cumulative_sum(xp.asarray(h), dtype=xp.int32)
    np.testing.assert_array_equal(got.to_numpy(), np.cumsum(h, dtype=np.int32))
    w = rng.integers(0, 255, 5000).astype(np.uint8)  # a u8 result wraps in its byte
    got = xp.cumulative_sum(xp.asarray(w), dtype=xp.uint8, include_initial=True)
    assert got.dtype == "u8"
    np.testing.assert_array_equal(got.to_numpy(),
                                  np.concatenate([[0], np.cumsum(w, dtype=np.uint8)]))


def test_refusals():
    x2 = xp.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(wgc.ArgumentError, match="axis=None is allowed for 1-D x only"):
        xp.cumulative_sum(x2)
    with pytest.raises(wgc.ShapeError, match="0-d"):
        xp.cumulative_prod(xp.asarray(np.float32(1)))
    with pytest.raises(wgc.ArgumentError, match="axis: 2 is out of range"):
        xp.cumulative_sum(x2, axis=2)
    with pytest.raises(wgc.ArgumentError, match="include_initial"):
        xp.cumulative_sum(x2, axis=0, include_initial="yes")
    if "bool" in DTYPES:
        with pytest.raises(wgc.DtypeError, match="bool"):
            xp.cumulative_sum(x2, axis=0, dtype=xp.bool)


@pytest.mark.parametrize("rows,n", [(1, 1), (5, 0), (2000, 0), (5000, 3), (1500, 16),
                                    (2048, 17), (3000, 2100), (3, 70_000), (1, 600_000)])
def test_kernel_batches(rows, n, rng):
    """The scan kernel over (rows, n): an invocation per row (many rows of a few elements),
    a workgroup per row (one tile, or many rows of a few tiles) or three steps."""
    a = rng.integers(-4, 4, (rows, n)).astype(np.int32)
    x = wgc.from_numpy(a)
    for inc in (False, True):
        got = run_kernel(SCANS["sum"], [x], None, {"include_initial": inc}).to_numpy()
        np.testing.assert_array_equal(got, expected("sum", a, 1, "s32", inc))


def test_kernel_checks():
    x = wgc.from_numpy(np.ones((2, 3), np.float32))
    with pytest.raises(wgc.ShapeError, match="out is \\(2, 3\\), expected \\(2, 4\\)"):
        run_kernel(SCANS["sum"], [x], wgc.empty((2, 3), "f32"), {"include_initial": True})
    with pytest.raises(wgc.DtypeError, match="out is s32"):
        run_kernel(SCANS["prod"], [x], wgc.empty((2, 3), "s32"))
    with pytest.raises(wgc.ShapeError, match="must be 2-D"):
        run_kernel(SCANS["sum"], [wgc.from_numpy(np.ones(3, np.float32))])


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_complex(op, rng):
    n = tile("c64") * 2 + 5  # three steps
    parts = rng.choice([1.0, -1.0, 0.0, 0.5], size=(2, n))
    a = (parts[0] + 1j * parts[1]).astype(np.complex64)
    if op == "prod":
        a = rng.choice(np.array([1, -1, 1j, -1j], np.complex64), n)  # exact products
    got = FN[op](wgc.from_numpy(a), include_initial=True).to_numpy()
    want = expected(op, a, 0, "c64", True)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
