"""take, take_along_axis and nonzero of wgcompute.array_api, and Buffer's advanced indexing
(x[mask], x[int_array]) and item assignment (x[key] = value), against numpy: every dtype
(elements move as bits, 1- and 2-byte ones as lanes of words), index dtypes, negative
indices, indices out of range refused, empty and 0-d cases, more than one workgroup."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

DTS = tuple(d for d in ("f32", "f64", "f16", "s32", "s64", "u32", "u8", "bool", "c64")
            if d in DTYPES)
INDEX = ("s32", "s64", "u32", "u8")


def values(dt, shape, rng):
    npt = DTYPES[dt].numpy
    if DTYPES[dt].kind == "b":
        return rng.random(shape) < 0.5
    if DTYPES[dt].kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(npt)
    if DTYPES[dt].kind == "u":
        return rng.integers(0, 250, size=shape).astype(npt)
    return (rng.standard_normal(shape) * 100).astype(npt)


def up(a):
    return wgc.from_numpy(np.array(a))  # a C-contiguous copy, 0-d kept


@pytest.mark.parametrize("dt", DTS)
def test_take_dtypes(dt, rng):
    a = values(dt, (5, 7, 3), rng)
    for axis in (0, 1, 2, -1):
        n = a.shape[axis]
        idx = rng.integers(-n, n, size=11).astype(np.int32)
        got = xp.take(up(a), up(idx), axis=axis)
        assert got.dtype == dt
        np.testing.assert_array_equal(got.to_numpy(), np.take(a, idx, axis=axis))


@pytest.mark.computes("it")
@pytest.mark.parametrize("it", INDEX)
def test_take_index_dtypes(it, rng):
    a = rng.standard_normal(3000).astype(np.float32)  # > one workgroup of indices
    lo = 0 if DTYPES[it].kind == "u" else -200
    idx = rng.integers(lo, 200, size=2001).astype(DTYPES[it].numpy)
    got = xp.take(up(a), up(idx))
    np.testing.assert_array_equal(got.to_numpy(), a[idx.astype(np.int64)])


@pytest.mark.needs("s64")  # int64 indices
def test_take_refusals_and_edges(rng):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = up(a)
    for bad, value in (([0, 3, 1], 3), ([0, -4], -4)):
        with pytest.raises(wgc.IndexingError, match=f"index {value} .* axis 0 of size 3"):
            xp.take(x, up(np.array(bad, np.int32)), axis=0)
    with pytest.raises(wgc.IndexingError, match="index -9 .*element 1"):
        xp.take(x, up(np.array([0, -9], np.int64)), axis=1)
    for far in (2**40, -2**40, 2**32 + 1):  # past 32 bits: the high word is checked too
        with pytest.raises(wgc.IndexingError, match=f"index {far} "):
            xp.take(x, up(np.array([1, far], np.int64)), axis=1)
    with pytest.raises(wgc.ArgumentError, match="axis=None is allowed for 1-D x only"):
        xp.take(x, up(np.array([0], np.int32)))
    with pytest.raises(wgc.ShapeError, match="indices must be 1-D"):
        xp.take(x, up(np.zeros((1, 1), np.int32)), axis=0)
    with pytest.raises(wgc.IndexingError, match="integer array"):
        xp.take(x, up(np.zeros(2, np.float32)), axis=0)
    with pytest.raises(wgc.ShapeError, match="0-d"):
        xp.take(up(np.float32(1)), up(np.zeros(1, np.int32)))
    empty = xp.take(x, up(np.zeros(0, np.int32)), axis=1)
    assert empty.shape == (3, 0)
    got = xp.take(up(np.zeros((0, 4), np.float32)), up(np.array([1, 2], np.int32)), axis=1)
    assert got.shape == (0, 2)
    with pytest.raises(wgc.IndexingError, match="size 0"):
        xp.take(up(np.zeros((2, 0), np.float32)), up(np.array([0], np.int32)), axis=1)


@pytest.mark.needs("s64")  # int64 indices (numpy argsort)
@pytest.mark.parametrize("dt", DTS)
def test_take_along_axis(dt, rng):
    a = values(dt, (4, 6, 5), rng)
    for axis in (0, 1, -1):
        shape = list(a.shape)
        shape[axis] = 3
        n = a.shape[axis]
        idx = rng.integers(-n, n, size=shape).astype(np.int64)
        got = xp.take_along_axis(up(a), up(idx), axis=axis)
        np.testing.assert_array_equal(got.to_numpy(), np.take_along_axis(a, idx, axis))


def test_take_along_axis_broadcasts(rng):
    a = rng.standard_normal((4, 1, 5)).astype(np.float32)
    idx = rng.integers(0, 5, size=(1, 3, 2)).astype(np.int32)
    got = xp.take_along_axis(up(a), up(idx), axis=-1)
    np.testing.assert_array_equal(got.to_numpy(), np.take_along_axis(a, idx, -1))
    with pytest.raises(wgc.ShapeError, match="same number of dimensions"):
        xp.take_along_axis(up(a), up(np.zeros(2, np.int32)))
    with pytest.raises(wgc.IndexingError, match="index 5"):
        xp.take_along_axis(up(a), up(np.full((4, 1, 2), 5, np.int32)), axis=2)


@pytest.mark.parametrize("dt", DTS)
def test_nonzero(dt, rng):
    a = values(dt, (33, 70), rng)  # 2,310 elements: two tiles of the compaction
    if DTYPES[dt].kind != "b":
        a[rng.random(a.shape) < 0.6] = 0
    if DTYPES[dt].kind == "f":
        a[0, :3] = [-0.0, np.nan, np.inf]
    got = xp.nonzero(up(a))
    want = np.nonzero(a)
    assert len(got) == 2
    for g, w in zip(got, want):
        assert g.dtype == "s32"
        np.testing.assert_array_equal(g.to_numpy(), w)


def test_nonzero_shapes(rng):
    for shape in ((1,), (0,), (3, 0, 2), (100_000,), (2, 3, 4, 5)):
        a = (rng.random(shape) < 0.2).astype(np.int32)
        got = xp.nonzero(up(a))
        for g, w in zip(got, np.nonzero(a), strict=True):
            np.testing.assert_array_equal(g.to_numpy(), w)
    with pytest.raises(wgc.ShapeError, match="0-d"):
        xp.nonzero(up(np.int32(3)))


@pytest.mark.parametrize("dt", DTS)
def test_mask_getitem(dt, rng):
    a = values(dt, (6, 5, 3), rng)
    for k in (1, 2, 3):
        m = rng.random(a.shape[:k]) < 0.4
        got = up(a)[up(m)]
        assert got.dtype == dt
        np.testing.assert_array_equal(got.to_numpy(), a[m])


def test_mask_getitem_edges(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    x = up(a)
    for b in (True, False):  # a 0-d mask adds an axis of 1 or 0
        got = x[up(np.array(b))]
        assert got.shape == a[np.array(b)].shape
        np.testing.assert_array_equal(got.to_numpy(), a[np.array(b)])
    assert x[up(np.zeros(4, bool))].shape == (0, 3)
    assert x[up(np.zeros((4, 0), bool))].shape == (0,)  # the standard: a mask's sizes may be 0
    x[up(np.zeros((0, 3), bool))] = 1.0  # selects nothing
    np.testing.assert_array_equal(x.to_numpy(), a)
    big = rng.standard_normal(50_000).astype(np.float32)
    np.testing.assert_array_equal(up(big)[up(big > 0.5)].to_numpy(), big[big > 0.5])
    with pytest.raises(wgc.IndexingError, match="does not match the leading dimensions"):
        x[up(np.ones(3, bool))]
    with pytest.raises(wgc.IndexingError, match="more dimensions"):
        x[up(np.ones((4, 3, 1), bool))]
    with pytest.raises(wgc.IndexingError, match="sole index"):
        x[up(np.ones(4, bool)), 0]


def test_unaligned_index_views(rng):
    """Index arrays that are views off the binding alignment (copied for the kernels in the
    same pass): the copies' dispatches live until the pass is recorded."""
    a = rng.standard_normal((6, 4)).astype(np.float32)
    idx = up(np.array([0, 2, -1, 5], np.int32))
    for _ in range(3):
        np.testing.assert_array_equal(up(a)[idx[1]].to_numpy(), a[2])
        np.testing.assert_array_equal(xp.take(up(a), idx[1:3], axis=0).to_numpy(), a[[2, -1]])


def test_integer_array_getitem(rng):
    a = rng.standard_normal((6, 4)).astype(np.float32)
    idx = np.array([[5, -1], [0, 2]], np.int32)
    np.testing.assert_array_equal(up(a)[up(idx)].to_numpy(), a[idx])
    with pytest.raises(wgc.IndexingError, match="index 6"):
        up(a)[up(np.array([6], np.int32))]


@pytest.mark.parametrize("dt", DTS)
def test_setitem_basic(dt, rng):
    a = values(dt, (5, 6), rng)
    x = up(a)
    v = values(dt, (6,), rng)
    w = values(dt, (5, 1), rng)
    s = {"b": True, "c": 2.5 - 1j, "f": 2.5, "u": 7, "i": -7}[DTYPES[dt].kind]
    for key, value in (((1,), s), ((slice(None), slice(None, None, 2)), s),
                       ((slice(2, 4),), v), ((0, slice(None, None, -1)), v),
                       ((Ellipsis, slice(1, 3)), w), ((None, 4), v[None]), ((-1, -2), s),
                       ((slice(3, 3),), s)):
        x[key] = up(value) if isinstance(value, np.ndarray) else value
        a[key] = value
        np.testing.assert_array_equal(x.to_numpy(), a, err_msg=f"{dt} {key}")
    x[1:, 1:] = x[:-1, :-1]  # overlapping: read before written, as numpy does
    a[1:, 1:] = a[:-1, :-1].copy()
    np.testing.assert_array_equal(x.to_numpy(), a)


def test_setitem_views_and_values(rng):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = up(a)
    row = x[2]  # a view: assignment writes the base's memory
    row[1:3] = 0.5
    a[2, 1:3] = 0.5
    np.testing.assert_array_equal(x.to_numpy(), a)
    x[0] = up(np.arange(6, dtype=np.uint8))  # u8 values all fit f32
    a[0] = np.arange(6)
    np.testing.assert_array_equal(x.to_numpy(), a)
    x[()] = 1.0
    a[()] = 1.0
    np.testing.assert_array_equal(x.to_numpy(), a)
    z = up(np.float32(3))
    z[...] = 4.0
    assert z.to_numpy() == 4.0
    with pytest.raises(wgc.DtypeError, match="not an s32 integer"):
        up(np.zeros(3, np.int32))[0] = 1.5
    with pytest.raises(wgc.DtypeError, match="do not all fit"):
        up(np.zeros(3, np.int32))[:] = up(np.zeros(3, np.float32))
    with pytest.raises(wgc.ShapeError, match="does not broadcast"):
        x[0] = up(np.zeros(5, np.float32))
    with pytest.raises(wgc.ArgumentError, match="Python number"):
        x[0] = np.zeros(6, np.float32)
    with pytest.raises(wgc.IndexingError, match="out of bounds"):
        x[4] = 1.0


@pytest.mark.parametrize("dt", DTS)
def test_setitem_mask(dt, rng):
    a = values(dt, (7, 5), rng)
    x = up(a)
    m = rng.random(7) < 0.5
    v = values(dt, (5,), rng)
    x[up(m)] = up(v)
    a[m] = v
    np.testing.assert_array_equal(x.to_numpy(), a)
    m2 = rng.random((7, 5)) < 0.5
    s = {"b": False, "c": 1.0, "f": 1.0, "u": 3, "i": -3}[DTYPES[dt].kind]
    x[up(m2)] = s
    a[m2] = s
    np.testing.assert_array_equal(x.to_numpy(), a)
    vals = values(dt, (int(m2.sum()),), rng)
    x[up(m2)] = up(vals)
    a[m2] = vals
    np.testing.assert_array_equal(x.to_numpy(), a)


def test_setitem_integer_array(rng):
    a = rng.standard_normal((6, 3)).astype(np.float32)
    x = up(a)
    idx = np.array([4, -1, 0], np.int32)
    x[up(idx)] = 9.0
    a[idx] = 9.0
    np.testing.assert_array_equal(x.to_numpy(), a)
    vals = rng.standard_normal((3, 3)).astype(np.float32)
    x[up(idx)] = up(vals)
    a[idx] = vals
    np.testing.assert_array_equal(x.to_numpy(), a)
    before = x.to_numpy()
    with pytest.raises(wgc.IndexingError, match="index 6"):
        x[up(np.array([0, 6], np.int32))] = 1.0
    np.testing.assert_array_equal(x.to_numpy(), before)  # refused before anything is written
