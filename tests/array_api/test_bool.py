"""The bool dtype end to end, against numpy: buffers of it (four per u32 word, as u8), its
conversions, comparisons that give it, the logical ops and operators on it, the any/all
reductions, sum of it, and where(condition, x1, x2)."""

import operator

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES, dtype
from wgcompute.kernels.elementwise.where import WHERE

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

NUMERIC = ("f32", "f64", "f16", "s32", "s64", "u32", "u8")
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (1031,)]


def need(*dts):
    have = wgc.device_info()["features"]
    for dt in dts:
        f = DTYPES[dt].feature
        if f and f not in have:
            pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def _values(dt, shape, rng):
    """Values of dtype ``dt``: zeros and ones often; floats with -0.0, nan, ±inf."""
    npt = DTYPES[dt].numpy
    n = int(np.prod(shape))
    if DTYPES[dt].is_float:
        pool = np.array([0.0, -0.0, 1.0, -1.0, 0.25, 2.5, np.nan, np.inf, -np.inf, 1e-30])
    elif DTYPES[dt].kind == "b":
        pool = np.array([False, True])
    else:
        pool = np.array([0, 0, 1, 2, 7, np.iinfo(npt).max])
    return rng.choice(pool, n).astype(npt).reshape(shape)


def test_the_bool_dtype():
    b = DTYPES["bool"]
    assert b.kind == "b" and b.packed and b.itemsize == 1 and not b.is_float
    assert b.numpy == np.bool_ and dtype(np.bool_) is b and dtype("bool") is b
    assert b == "bool" and b == np.bool_ and b != "u8"
    assert xp.bool is b


@pytest.mark.parametrize("shape", SHAPES)
def test_bool_buffers_round_trip(shape, rng):
    a = np.asarray(rng.random(shape) < 0.5)
    buf = wgc.from_numpy(a)
    assert buf.dtype == "bool"
    got = buf.to_numpy()
    assert got.dtype == np.bool_ and np.array_equal(got, a)
    assert np.array_equal(buf.copy().to_numpy(), a)
    if a.size == 1:
        v = buf.reshape(()).item()
        assert v is bool(a.reshape(()))
    if a.ndim >= 2:
        assert np.array_equal(buf[1].to_numpy(), a[1])  # a view
        assert np.array_equal(buf[:, 1:].to_numpy(), a[:, 1:])  # a strided copy
        assert np.array_equal(buf[::-1, ::2].to_numpy(), a[::-1, ::2])
        assert np.array_equal(buf.transpose().to_numpy(), a.transpose())
        assert np.array_equal(buf.reshape(-1).to_numpy(), a.reshape(-1))


def test_bool_buffers_from_lists_and_refusals():
    buf = wgc.buffer([[True, False, 1], [0, 1.0, np.True_]], dtype="bool")
    assert buf.to_numpy().tolist() == [[True, False, True], [False, True, True]]
    with pytest.raises(wgc.DtypeError, match=r"data: 1 value\(s\) such as 2 are not 0 or 1"):
        wgc.buffer([True, 2], dtype="bool")
    with pytest.raises(wgc.DtypeError, match="not 0 or 1"):
        wgc.buffer(np.array([0.5, 1.0]), dtype="bool")
    with pytest.raises(wgc.DtypeError, match="not 0 or 1"):
        wgc.buffer([float("nan")], dtype="bool")
    assert wgc.buffer(b"\x01\x00\x01", dtype="bool").tolist() == [True, False, True]
    with pytest.raises(wgc.DtypeError, match=r"data: 1 value\(s\) such as 2 are not 0 or 1"):
        wgc.buffer(b"\x01\x02", dtype="bool")  # raw bytes too


def test_fill_bool():
    buf = wgc.empty((5, 3), "bool")
    wgc.fill(buf, True)
    assert buf.to_numpy().all() and buf.to_numpy().dtype == np.bool_
    wgc.fill(buf, 0)
    assert not buf.to_numpy().any()
    with pytest.raises(wgc.ArgumentError, match=r"bool buffer must be True or False.*got 2"):
        wgc.fill(buf, 2)


@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape", [(0,), (7,), (1031,)])
def test_astype_to_and_from_bool(dt, shape, rng):
    """To bool: x != 0 (nan is True, -0.0 False), with no check; from bool: 0 and 1."""
    need(dt)
    a = _values(dt, shape, rng)
    b = wgc.from_numpy(a).astype("bool")
    assert b.dtype == "bool"
    np.testing.assert_array_equal(b.to_numpy(), a.astype(np.bool_))
    m = rng.random(shape) < 0.5
    back = wgc.from_numpy(m).astype(dt)
    assert back.dtype == dt
    np.testing.assert_array_equal(back.to_numpy(), m.astype(DTYPES[dt].numpy))


def test_astype_bool_refuses_rounding():
    with pytest.raises(wgc.ArgumentError, match="rounding='round' applies to float -> integer"):
        wgc.from_numpy(np.ones(3, np.float32)).astype("bool", rounding="round")


_CMP = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
        "eq": operator.eq, "ne": operator.ne}


@pytest.mark.parametrize("dt", NUMERIC)
def test_comparisons_give_bool(dt, rng):
    """Buffer with buffer (same shapes and broadcast), with a scalar on either side."""
    need(dt)
    a = _values(dt, (5, 7), rng)
    b = _values(dt, (5, 7), rng)
    row = _values(dt, (7,), rng)
    ba, bb, br = (wgc.from_numpy(v) for v in (a, b, row))
    s = DTYPES[dt].numpy.type(1)
    with np.errstate(invalid="ignore"):
        for name, op in _CMP.items():
            for got, want in ((op(ba, bb), op(a, b)), (op(ba, br), op(a, row)),
                              (op(ba, 1), op(a, s)), (op(1, ba), op(s, a))):
                assert got.dtype == "bool", name
                np.testing.assert_array_equal(got.to_numpy(), want, err_msg=name)


def test_bool_equality_and_logical_operators(rng):
    a = rng.random((3, 1030)) < 0.5
    b = rng.random((3, 1030)) < 0.5
    r = rng.random(1030) < 0.5
    ba, bb, br = (wgc.from_numpy(v) for v in (a, b, r))
    cases = [(ba == bb, a == b), (ba != bb, a != b), (ba == br, a == r), (ba != True, ~a),  # noqa: E712
             (ba & bb, a & b), (ba | bb, a | b), (ba ^ bb, a ^ b), (~ba, ~a),
             (ba & br, a & r), (br | ba, r | a), (ba ^ True, ~a), (False | ba, a),
             (True & ba, a)]
    for got, want in cases:
        assert got.dtype == "bool"
        np.testing.assert_array_equal(got.to_numpy(), want)


def test_logical_operators_refuse_other_dtypes():
    f = wgc.from_numpy(np.ones(3, np.float32))
    t = wgc.from_numpy(np.ones(3, np.bool_))
    with pytest.raises(wgc.DtypeError, match="f32"):
        f & f  # noqa: B018
    with pytest.raises(wgc.DtypeError, match="f32"):
        ~f  # noqa: B018
    with pytest.raises(wgc.DtypeError, match="bool and f32"):
        t | f  # noqa: B018
    with pytest.raises(wgc.DtypeError, match="2 is not a bool"):
        t & 2  # noqa: B018


def test_arithmetic_on_bool_is_refused():
    t = wgc.from_numpy(np.ones(3, np.bool_))
    with pytest.raises(wgc.DtypeError, match="bool"):
        t + t  # noqa: B018
    with pytest.raises(wgc.DtypeError, match="bool"):
        t < t  # noqa: B015
    with pytest.raises(wgc.DtypeError, match="bool"):
        -t  # noqa: B018


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "logical_not"])
def test_logical_rows(name, rng):
    from wgcompute.kernels.elementwise.arrayops import array_op
    from wgcompute.kernels.elementwise.optable import OPS

    row = OPS[name]
    assert row.accepts() == ("bool",) and row.out_dtype("bool") == "bool"
    xs = [rng.random(1029) < 0.5 for _ in range(row.arity)]
    got = wgc.run_kernel(array_op(name, row.arity), [wgc.from_numpy(x) for x in xs])
    np.testing.assert_array_equal(got.to_numpy(), row.reference(*xs))


# -- any / all -------------------------------------------------------------------------------
_AXES = [None, 0, -1, (0, 2), (1,), (), (0, 1, 2)]


@pytest.mark.parametrize("fn", ["any", "all"])
@pytest.mark.parametrize("dt", NUMERIC + ("bool",))
def test_any_all(fn, dt, rng):
    need(dt)
    ref = getattr(np, fn)
    for shape, axes in (((3, 4, 5), _AXES), ((2, 700), [None, 0, 1]), ((0, 3), [None, 0, 1]),
                        ((), [None, ()])):
        a = _values(dt, shape, rng)
        if fn == "all" and a.size > 4:  # mostly true, so that all() is not always False
            a = np.where(rng.random(shape) < 0.97, np.ones_like(a), a)
        x = wgc.from_numpy(a)
        for axis in axes:
            for keepdims in (False, True):
                got = getattr(xp, fn)(x, axis=axis, keepdims=keepdims)
                want = ref(a, axis=axis, keepdims=keepdims)
                assert got.dtype == "bool" and got.shape == want.shape, (shape, axis)
                np.testing.assert_array_equal(got.to_numpy(), want, err_msg=f"{shape} {axis}")


def test_any_all_nan_is_true_and_big():
    a = np.zeros(5000, np.float32)
    a[4321] = np.nan
    assert bool(xp.any(wgc.from_numpy(a)).item()) is True
    assert bool(xp.all(wgc.from_numpy(np.full(5000, np.nan, np.float32))).item()) is True
    assert bool(xp.all(wgc.from_numpy(a)).item()) is False


def test_any_all_signatures_and_refusals():
    x = wgc.from_numpy(np.ones((2, 3), np.bool_))
    with pytest.raises(TypeError):
        xp.any(x, 0)  # axis is keyword-only
    with pytest.raises(wgc.ArgumentError, match="axis"):
        xp.all(x, axis=2)
    with pytest.raises(wgc.ArgumentError, match="axis"):
        xp.any(x, axis=(0, 0))
    with pytest.raises(wgc.ArgumentError, match="x: expected an array"):
        xp.any(np.ones(3))


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_sum_of_bool_counts(axis, rng):
    a = rng.random((37, 1030)) < 0.3
    got = wgc.from_numpy(a).sum(axis=axis)
    assert got.dtype == "u32"
    np.testing.assert_array_equal(got.to_numpy(), a.sum(axis=axis))


# -- where -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", NUMERIC + ("bool",))
def test_where(dt, rng):
    need(dt)
    for cs, s1, s2 in (((7,), (7,), (7,)), ((3, 1), (1, 1030), (1030,)), ((), (4, 5), ()),
                       ((0, 3), (3,), (1,)), ((2, 3, 4), (3, 1), (2, 1, 4))):
        c = np.asarray(rng.random(cs) < 0.5)
        a, b = np.asarray(_values(dt, s1, rng)), np.asarray(_values(dt, s2, rng))
        bufs = [wgc.from_numpy(v) for v in (c, a, b)]
        # f16 is no dtype of the standard's namespace: the kernel itself
        got = wgc.run_kernel(WHERE, bufs) if dt == "f16" else xp.where(*bufs)
        want = np.where(c, a, b)
        assert got.dtype == dt and got.shape == want.shape
        np.testing.assert_array_equal(got.to_numpy(), want)


def test_where_scalars_and_promotion(rng):
    c = rng.random((4, 9)) < 0.5
    a = rng.normal(size=(4, 9)).astype(np.float32)
    bc, ba = wgc.from_numpy(c), wgc.from_numpy(a)
    np.testing.assert_array_equal(xp.where(bc, ba, 0.5).to_numpy(), np.where(c, a, 0.5))
    np.testing.assert_array_equal(xp.where(bc, -1.0, ba).to_numpy(), np.where(c, -1.0, a))
    i8 = rng.integers(0, 200, 9).astype(np.uint8)
    i32 = rng.integers(-9, 9, (4, 9)).astype(np.int32)
    got = xp.where(bc, wgc.from_numpy(i8), wgc.from_numpy(i32))
    assert got.dtype == "s32"
    np.testing.assert_array_equal(got.to_numpy(), np.where(c, i8, i32))


def test_where_refusals():
    c = wgc.from_numpy(np.ones(3, np.bool_))
    f = wgc.from_numpy(np.ones(3, np.float32))
    with pytest.raises(wgc.DtypeError, match="condition: .*f32.*bool"):
        xp.where(f, f, f)
    with pytest.raises(wgc.ShapeError, match="broadcast"):
        xp.where(c, f, wgc.from_numpy(np.ones(4, np.float32)))
    with pytest.raises(wgc.DtypeError, match="x1 is float32 and x2 is int32"):
        xp.where(c, f, wgc.from_numpy(np.ones(3, np.int32)))
    with pytest.raises(wgc.ArgumentError, match="condition: expected an array"):
        xp.where([True, False, True], f, f)


@pytest.mark.parametrize("fn", ["any", "all"])
def test_any_all_complex(fn):
    """A complex element is true where either part is not zero."""
    a = np.array([[0, 1j, 0], [0, 0, 0], [2 + 0j, np.nan, 1]], np.complex64)
    x = wgc.from_numpy(a)
    for axis in (None, 0, 1, (0, 1), ()):
        for keepdims in (False, True):
            got = getattr(xp, fn)(x, axis=axis, keepdims=keepdims)
            want = getattr(np, fn)(a, axis=axis, keepdims=keepdims)
            assert got.dtype == "bool" and got.shape == want.shape
            np.testing.assert_array_equal(got.to_numpy(), want)
