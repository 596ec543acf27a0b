"""The array namespace's manipulation functions against numpy: every dtype (one-byte ones
share u32 words), 0-d, empty, odd and larger-than-a-workgroup shapes, negative axes, and the
refusals of what the standard does not define."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

DTYPES_XP = ("float32", "float64", "int32", "int64", "uint8", "uint32", "bool", "complex64")
SHAPES = [(), (0,), (7,), (3, 5), (2, 3, 4), (1031,), (4, 0, 3)]


def need(name):
    f = DTYPES[xp._NAMES[name].name].feature
    if f and f not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {name}")


def values(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    npt = np.dtype(xp._NAMES[name].numpy)
    if npt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if npt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(npt)
    if npt.kind == "f":
        return rng.standard_normal(shape).astype(npt)
    return rng.integers(0, 100, shape).astype(npt)


def same(got, want):
    got = got.to_numpy()
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", DTYPES_XP)
def test_moves_every_dtype(name):
    """One region program moves 1-, 4- and 8-byte items: concat, flip, roll, permute."""
    need(name)
    a, b = values(name, (3, 5), 1), values(name, (3, 2), 2)
    xa, xb = xp.asarray(a), xp.asarray(b)
    same(xp.concat([xa, xb], axis=1), np.concatenate([a, b], axis=1))
    same(xp.flip(xa), np.flip(a))
    same(xp.roll(xa, (2, -1), axis=(1, 0)), np.roll(a, (2, -1), axis=(1, 0)))
    same(xp.permute_dims(xa, (1, 0)), a.T)
    same(xp.stack([xa, xa], axis=-1), np.stack([a, a], axis=-1))
    same(xp.tile(xb, (2, 3)), np.tile(b, (2, 3)))
    same(xp.repeat(xb, 3, axis=0), np.repeat(b, 3, axis=0))
    same(xp.broadcast_to(xp.asarray(a[:1]), (4, 5)), np.broadcast_to(a[:1], (4, 5)))
    # views at offsets no binding can start at (read from their base's memory)
    same(xp.flip(xa[1]), np.flip(a[1]))
    same(xp.concat([xa[2], xb[1], xa[1]]), np.concatenate([a[2], b[1], a[1]]))
    same(xp.tile(xb[1], (3,)), np.tile(b[1], 3))
    counts = np.array([1, 0, 3, 2, 1], np.int32)
    same(xp.repeat(xa[1], xp.asarray(counts)), np.repeat(a[1], counts))
    same(xp.repeat(xa, xp.asarray(counts), axis=1), np.repeat(a, counts, axis=1))


@pytest.mark.parametrize("shape", SHAPES)
def test_concat_and_stack(shape):
    a = values("float32", shape)
    x = xp.asarray(a)
    same(xp.concat([x, x, x], axis=None), np.concatenate([a, a, a], axis=None))
    if a.ndim:
        for axis in range(-a.ndim, a.ndim):
            b = values("float32", shape[:axis % a.ndim] + (3,) + shape[axis % a.ndim + 1:], 5)
            same(xp.concat([x, xp.asarray(b)], axis=axis), np.concatenate([a, b], axis=axis))
    for axis in range(-a.ndim - 1, a.ndim + 1):
        same(xp.stack([x, x], axis=axis), np.stack([a, a], axis=axis))
    if a.ndim:
        for axis in range(-a.ndim, a.ndim):
            got = xp.unstack(x, axis=axis)
            want = [np.take(a, i, axis=axis) for i in range(a.shape[axis])]
            assert len(got) == len(want)
            for g, w in zip(got, want):
                same(g, w)


def test_concat_promotes_and_refuses():
    a = np.arange(5, dtype=np.int32)
    b = np.arange(3, dtype=np.int64)
    u = np.arange(4, dtype=np.uint32)
    need("int64")
    same(xp.concat([xp.asarray(a), xp.asarray(b)]), np.concatenate([a, b]))
    same(xp.concat([xp.asarray(a), xp.asarray(u)]), np.concatenate([a, u]))
    with pytest.raises(wgc.DtypeError, match="no promoted dtype"):
        xp.concat([xp.asarray(a), xp.asarray(a.astype(np.float32))])
    with pytest.raises(wgc.ShapeError, match=r"arrays\[1\] is \(2, 3\)"):
        xp.concat([xp.zeros((2, 2)), xp.zeros((2, 3))], axis=0)
    with pytest.raises(wgc.ShapeError, match="0-d"):
        xp.concat([xp.asarray(1.0), xp.asarray(2.0)])
    with pytest.raises(wgc.ArgumentError, match="arrays"):
        xp.concat(xp.zeros(3))
    with pytest.raises(wgc.ArgumentError, match="axis: 2 is out of range"):
        xp.stack([xp.zeros(3)], axis=2)


@pytest.mark.parametrize("shape", SHAPES)
def test_flip_roll_permute(shape):
    a = values("int32", shape)
    x = xp.asarray(a)
    same(xp.flip(x), np.flip(a))
    same(xp.roll(x, 5), np.roll(a, 5))
    same(xp.roll(x, -1031), np.roll(a, -1031))
    for axis in range(-a.ndim, a.ndim):
        same(xp.flip(x, axis=axis), np.flip(a, axis=axis))
        same(xp.roll(x, 2, axis=axis), np.roll(a, 2, axis=axis))
    if a.ndim >= 2:
        same(xp.flip(x, axis=(0, -1)), np.flip(a, axis=(0, -1)))
        same(xp.roll(x, (1, 1, -4), axis=(0, -1, 0)), np.roll(a, (1, 1, -4), axis=(0, -1, 0)))
    perm = tuple(range(a.ndim))[::-1]
    same(xp.permute_dims(x, perm), np.transpose(a, perm))
    if a.ndim:
        same(xp.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1))
    if a.ndim == 3:
        same(xp.permute_dims(x, (1, 2, 0)), np.transpose(a, (1, 2, 0)))
        same(xp.moveaxis(x, (0, 1), (2, 0)), np.moveaxis(a, (0, 1), (2, 0)))


def test_permutation_refusals():
    x = xp.zeros((2, 3))
    with pytest.raises(wgc.ArgumentError, match="permutation of the 2 axes"):
        xp.permute_dims(x, (0, 0))
    with pytest.raises(wgc.ArgumentError, match="repeats an axis"):
        xp.moveaxis(x, (0, 0), (0, 1))
    with pytest.raises(wgc.ArgumentError, match="as many"):
        xp.moveaxis(x, (0, 1), (0,))
    with pytest.raises(wgc.ArgumentError, match="shift and axis"):
        xp.roll(x, (1, 2), axis=(0, 1, 0))


@pytest.mark.parametrize("shape", SHAPES)
def test_tile_and_repeat(shape):
    a = values("uint8", shape)
    x = xp.asarray(a)
    for reps in ((2,), (1, 3), (2, 0, 1), (3, 1, 1, 2)):
        same(xp.tile(x, reps), np.tile(a, reps))
    same(xp.repeat(x, 3), np.repeat(a, 3))
    same(xp.repeat(x, 0), np.repeat(a, 0))
    for axis in range(-a.ndim, a.ndim):
        same(xp.repeat(x, 2, axis=axis), np.repeat(a, 2, axis=axis))
        n = a.shape[axis]
        counts = np.arange(n, dtype=np.int32) % 3
        same(xp.repeat(x, xp.asarray(counts), axis=axis), np.repeat(a, counts, axis=axis))
        same(xp.repeat(x, xp.asarray(np.array([2], np.int64)), axis=axis),
             np.repeat(a, [2], axis=axis))


def test_repeat_refusals():
    x = xp.zeros((2, 3))
    with pytest.raises(wgc.ArgumentError, match="repeats: -1 is negative"):
        xp.repeat(x, -1)
    with pytest.raises(wgc.ShapeError, match="1-D array of 3 counts"):
        xp.repeat(x, xp.asarray([1, 2]), axis=1)
    with pytest.raises(wgc.DtypeError, match="integer array"):
        xp.repeat(x, xp.asarray([1.0, 2.0, 1.0]), axis=1)
    with pytest.raises(wgc.ArgumentError, match="repeats: -2 is negative"):
        xp.repeat(x, xp.asarray([1, -2, 1]), axis=1)


@pytest.mark.parametrize("shape", SHAPES)
def test_views_reshape_expand_squeeze(shape):
    a = values("float64" if "shader-f64" in wgc.device_info()["features"] else "float32",
               shape)
    x = xp.asarray(a)
    same(xp.reshape(x, (-1,)), a.reshape(-1))
    same(xp.reshape(x, (a.size, 1), copy=True), a.reshape(a.size, 1))
    for axis in range(-a.ndim - 1, a.ndim + 1):
        e = xp.expand_dims(x, axis=axis)
        same(e, np.expand_dims(a, axis))
        same(xp.squeeze(e, axis=axis), a)
    # a reshape is a view: no copy, the same memory
    assert xp.reshape(x, (-1,)).base is x
    with pytest.raises(IndexError, match="axis: 3 is out of range"):
        xp.expand_dims(xp.zeros((2, 1)), axis=3)
    with pytest.raises(wgc.IndexingError, match="axis: -4 is out of range"):
        xp.expand_dims(xp.zeros((2, 1)), axis=-4)
    with pytest.raises(wgc.ShapeError, match="size"):
        xp.squeeze(xp.zeros((2, 1)), axis=0)
    with pytest.raises(wgc.ArgumentError, match="axis"):
        xp.squeeze(xp.zeros((2, 1)), None)
    with pytest.raises(wgc.ShapeError):
        xp.reshape(xp.zeros((2, 3)), (4, 2))


@pytest.mark.parametrize("shapes", [[(3, 1), (1, 4)], [(), (5,)], [(2, 1, 3), (4, 1)],
                                    [(0, 1), (1, 7)], [(1031,), (1,)]])
def test_broadcast(shapes):
    arrs = [values("float32", s, i) for i, s in enumerate(shapes)]
    got = xp.broadcast_arrays(*[xp.asarray(a) for a in arrs])
    for g, w in zip(got, np.broadcast_arrays(*arrs)):
        same(g, np.ascontiguousarray(w))
    with pytest.raises(wgc.ShapeError, match="broadcast"):
        xp.broadcast_to(xp.zeros((3,)), (4,))
    with pytest.raises(wgc.ShapeError, match="broadcast"):
        xp.broadcast_to(xp.zeros((2, 3)), (3,))


def test_views_of_views_and_large():
    """Inputs that are views (a slice, a reshape) and outputs past one workgroup."""
    a = np.arange(3 * 700, dtype=np.float32).reshape(3, 700)
    x = xp.asarray(a)
    row = x[1]  # a view at an offset
    same(xp.flip(row), a[1][::-1])
    same(xp.concat([row, x[2]]), np.concatenate([a[1], a[2]]))
    same(xp.stack([x[0], x[2]], axis=1), np.stack([a[0], a[2]], axis=1))
    same(xp.roll(xp.reshape(x, (2100,)), 701), np.roll(a.reshape(-1), 701))
    b = np.arange(4 * 64, dtype=np.uint8).reshape(4, 64)
    y = xp.asarray(b)
    same(xp.flip(y[3]), b[3][::-1])  # at byte 192: gathered or read from the base
    c = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    z = xp.asarray(c)
    same(xp.concat([z[1], z[3]]), np.concatenate([c[1], c[3]]))  # bytes 256, 768: bound there


def test_copies_of_complex():
    """Copies that change nothing still copy, in every dtype (complex64 too)."""
    a = values("complex64", (3, 4))
    x = xp.asarray(a)
    for got in (xp.permute_dims(x, (0, 1)), xp.reshape(x, (12,), copy=True)):
        assert got is not x
        same(xp.reshape(got, (3, 4)), a)


def test_two_byte_items_move_as_lanes():
    """f16 (outside the standard, but a wgcompute dtype) moves as two 16-bit lanes of a u32
    word, written atomically lane by lane: odd sizes and offsets."""
    a = (np.arange(3 * 37) * 0.5 - 20).astype(np.float16).reshape(3, 37)
    x = wgc.from_numpy(a)
    same(xp.flip(x), np.flip(a))
    same(xp.roll(x, 5, axis=1), np.roll(a, 5, axis=1))
    same(xp.permute_dims(x, (1, 0)), a.T)
    same(xp.tile(x[1], (2, 3)), np.tile(a[1], (2, 3)))
    same(xp.repeat(x, 3, axis=1), np.repeat(a, 3, axis=1))
    same(xp.unstack(x, axis=1)[5], a[:, 5])
    counts = np.arange(37, dtype=np.int32) % 4
    same(xp.repeat(x, xp.asarray(counts), axis=1), np.repeat(a, counts, axis=1))
    same(xp.repeat(x[2], xp.asarray(counts)), np.repeat(a[2], counts))
