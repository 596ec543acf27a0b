"""The array namespace's index-made arrays against numpy: arange and linspace (computed on the
GPU in the result's dtype), eye, tril, triu over stacks of matrices and every dtype,
meshgrid, from_dlpack; and the refusals of what the standard leaves undefined."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

ALL_XP = ("float32", "float64", "int32", "int64", "uint8", "uint32", "bool", "complex64")


def need(name):
    f = DTYPES[xp._NAMES[name].name].feature
    if f and f not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {name}")


def same(got, want):
    got = got.to_numpy()
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("args", [(10,), (0,), (-3,), (2, 11), (11, 2, -3), (5, 5),
                                  (-7, 1031, 2), (0, 3000, 7), (100, -100, -1)])
@pytest.mark.parametrize("name", ["int32", "int64", "float32", "float64"])
def test_arange_integers(args, name):
    need(name)
    same(xp.arange(*args, dtype=xp._NAMES[name]), np.arange(*args, dtype=name))
    if name == "int32":
        same(xp.arange(*args), np.arange(*args, dtype=np.int32))  # the default integer


@pytest.mark.parametrize("name", ["uint8", "uint32"])
def test_arange_unsigned_counts_down(name):
    same(xp.arange(200, 3, -7, dtype=xp._NAMES[name]), np.arange(200, 3, -7, dtype=name))
    same(xp.arange(0, 250, 3, dtype=xp._NAMES[name]), np.arange(0, 250, 3, dtype=name))


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.1), (1, 2, 0.1), (-2.5, 3.0, 0.25),
                                  (5.0,), (3.0, -1.0, -0.3), (0, 1031 * 0.5, 0.5),
                                  (1e-3, 1.0, 1e-3)])
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_arange_floats_as_numpy(args, name):
    """Floats as numpy computes them: start + i·(the first step as stored in the dtype)."""
    need(name)
    want = np.arange(*args, dtype=name)
    got = xp.arange(*args, dtype=xp._NAMES[name])
    assert got.shape == want.shape
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-6 if name == "float32" else
                               1e-15, atol=1e-6 if name == "float32" else 1e-15)
    if name == "float32":
        assert xp.arange(*args).dtype == xp.float32  # a float argument: the default float


def test_arange_refusals():
    with pytest.raises(wgc.ArgumentError, match="step: 0"):
        xp.arange(0, 5, 0)
    with pytest.raises(wgc.ArgumentError, match="outside uint8"):
        xp.arange(250, 260, dtype=xp.uint8)
    with pytest.raises(wgc.ArgumentError, match="outside int32"):
        xp.arange(2**31 - 2, 2**31 + 3)
    with pytest.raises(wgc.DtypeError, match="into int32"):
        xp.arange(0.5, 3, dtype=xp.int32)
    with pytest.raises(wgc.DtypeError, match="real numbers"):
        xp.arange(3, dtype=xp.bool)
    with pytest.raises(wgc.ArgumentError, match="stop"):
        xp.arange(0, float("inf"))
    with pytest.raises(wgc.ArgumentError, match="start"):
        xp.arange(True)


@pytest.mark.parametrize("num", [0, 1, 2, 7, 1031])
@pytest.mark.parametrize("endpoint", [True, False])
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_linspace(num, endpoint, name):
    need(name)
    for start, stop in ((0, 1), (-3.5, 2.25), (10, -10)):
        want = np.linspace(start, stop, num, endpoint=endpoint, dtype=name)
        got = xp.linspace(start, stop, num, endpoint=endpoint, dtype=xp._NAMES[name])
        assert got.dtype == xp._NAMES[name] and got.shape == want.shape
        g = got.to_numpy()
        np.testing.assert_allclose(g, want, rtol=0, atol=4 * np.finfo(name).eps *
                                   max(abs(start), abs(stop)))
        if endpoint and num > 1:
            assert g[-1] == want[-1]  # stop exactly
        if num:
            assert g[0] == want[0]
    with pytest.raises(wgc.DtypeError, match="real floating"):
        xp.linspace(0, 1, 5, dtype=xp.int32)
    with pytest.raises(wgc.ArgumentError, match="num"):
        xp.linspace(0, 1, -1)


@pytest.mark.parametrize("name", ALL_XP)
def test_eye_tril_triu_every_dtype(name):
    need(name)
    npt = xp._NAMES[name].numpy
    for rows, cols in ((1, 1), (5, 7), (7, 5), (3, 0), (40, 33)):
        for k in (0, 1, -2, 9, -50):
            same(xp.eye(rows, cols, k=k, dtype=xp._NAMES[name]), np.eye(rows, cols, k,
                                                                        dtype=npt))
    rng = np.random.default_rng(1)
    a = (rng.integers(1, 100, (2, 3, 5, 7)) % 2 if name == "bool" else
         rng.integers(1, 100, (2, 3, 5, 7))).astype(npt)
    x = xp.asarray(a)
    for k in (0, 2, -1, 7, -9):
        same(xp.tril(x, k=k), np.tril(a, k))
        same(xp.triu(x, k=k), np.triu(a, k))
        same(xp.triu(x[1, 2], k=k), np.triu(a[1, 2], k))  # a view at an offset


def test_eye_defaults_and_refusals():
    same(xp.eye(3), np.eye(3, dtype=np.float32))
    same(xp.eye(1031, 2), np.eye(1031, 2, dtype=np.float32))
    for k in (2**70, -2**70):  # any diagonal: past the matrix, nothing is on it
        same(xp.eye(4, 3, k=k), np.zeros((4, 3), np.float32))
        same(xp.tril(xp.ones((2, 3), dtype=xp.float32), k=k),
             np.full((2, 3), float(k > 0), np.float32))
    with pytest.raises(wgc.ShapeError, match="at least two dimensions"):
        xp.tril(xp.zeros(3))
    with pytest.raises(wgc.ArgumentError, match="n_rows"):
        xp.eye(-1)
    with pytest.raises(wgc.ArgumentError, match="k"):
        xp.eye(3, k=1.5)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid(indexing):
    vs = [np.arange(3, dtype=np.float32), np.arange(5, dtype=np.float32) * 2,
          np.arange(2, dtype=np.float32) - 7]
    for n in range(1, 4):
        got = xp.meshgrid(*[xp.asarray(v) for v in vs[:n]], indexing=indexing)
        want = np.meshgrid(*vs[:n], indexing=indexing)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, np.ascontiguousarray(w))
    assert xp.meshgrid() == []
    with pytest.raises(wgc.DtypeError, match="one dtype"):
        xp.meshgrid(xp.asarray(vs[0]), xp.asarray([1, 2]))
    with pytest.raises(wgc.ArgumentError, match="indexing"):
        xp.meshgrid(xp.asarray(vs[0]), indexing="yx")
    with pytest.raises(wgc.ShapeError, match="1-D"):
        xp.meshgrid(xp.zeros((2, 2)))


def test_from_dlpack():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    same(xp.from_dlpack(a), a)
    x = xp.asarray(a)
    assert xp.from_dlpack(x) is x
    same(xp.from_dlpack(x, copy=True), a)
    with pytest.raises(wgc.ArgumentError, match="copy: False"):
        xp.from_dlpack(a, copy=False)
    with pytest.raises(wgc.ArgumentError, match="__dlpack__"):
        xp.from_dlpack([1, 2])
