"""The namespace's elementwise functions against numpy, generated from the op table: every
function over every dtype its row accepts (f16, outside the standard, through the same
kernel), on special values (±0, ±inf, nan, the extremes) and random ones past one workgroup;
then the standard's rules for Python scalars, promotion, broadcasting, 0-d and empty arrays,
clip, the refusals, and the array object's operators and attributes."""

import operator

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.array_api._elementwise import ROWS
from wgcompute.buffer import result_buffer
from wgcompute.dtypes import DTYPES
from wgcompute.kernels.elementwise.arrayops import array_op
from wgcompute.kernels.elementwise.optable import OPS

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

# ulp allowed beside numpy (its f64 result rounded to the dtype); 0: bit for bit
_EXACT = {"abs", "negative", "positive", "sqrt", "floor", "ceil", "trunc", "round", "sign",
          "square", "copysign", "nextafter", "maximum", "minimum", "add", "subtract",
          "multiply", "floor_divide", "remainder"}
# pow of a non-integer exponent is exp(y log x): its error grows with |y log(x)|, the
# rounding of that product
_ULP = {"hypot": 2, "reciprocal": 1, "divide": 1, "pow": 4}
_F32_ULP = 4  # the transcendental functions, computed in f32
# a result's size is relative to its operands' (cancellation): ulp of the larger operand
_ABSOLUTE = {"logaddexp"}
FUNCTIONS = sorted(name for name, row in ROWS.items() if row in OPS)


def need(*dts):
    have = wgc.device_info()["features"]
    for dt in dts:
        f = DTYPES[dt].feature
        if f and f not in have:
            pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def _special(dt: str) -> np.ndarray:
    npt = DTYPES[dt].numpy
    if DTYPES[dt].kind == "b":
        return np.array([False, True])
    if DTYPES[dt].is_float:
        fi = np.finfo(npt)
        return np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 3.0, 0.25, 1e-3, -7.0,
                         np.inf, -np.inf, np.nan, fi.tiny, -fi.tiny, fi.max, -fi.max,
                         fi.max / 2, 100.0, -60.0, 12.5, 0.999], dtype=npt)
    ii = np.iinfo(npt)
    return np.array([0, 1, 2, 7, 13, 100, ii.max, ii.max - 1] +
                    ([-1, -2, -7, -100, ii.min + 1] if ii.min else []), dtype=npt)


def _random(dt: str, n: int, rng, name: str) -> np.ndarray:
    npt = DTYPES[dt].numpy
    if DTYPES[dt].kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if DTYPES[dt].is_float:
        if name in ("acos", "asin", "atanh"):
            v = rng.uniform(-1, 1, n)
        elif name == "acosh":
            v = 1 + 10.0 ** rng.uniform(-6, 4, n)
        else:  # every scale, both signs
            v = 10.0 ** rng.uniform(-6, 6 if dt == "f32" else 4, n) * rng.choice([-1, 1], n)
            v[: n // 2] = rng.uniform(-8, 8, n // 2)
        with np.errstate(over="ignore"):
            return v.astype(npt)
    ii = np.iinfo(npt)
    return rng.integers(max(ii.min, -1000), min(ii.max, 1000), n).astype(npt)


def _operands(name: str, dt: str, rng) -> list[np.ndarray]:
    """Operands of one case: every special value (every pairing of them for two operands)
    and random ones, more than one workgroup's worth."""
    row = OPS[ROWS[name]]
    sp = _special(dt)
    if row.arity == 1:
        return [np.concatenate([sp, _random(dt, 1400, rng, name)])]
    x1 = np.concatenate([np.repeat(sp, sp.size), _random(dt, 1400, rng, name)])
    x2 = np.concatenate([np.tile(sp, sp.size), _random(dt, 1400, rng, name)])
    if name in ("bitwise_left_shift", "bitwise_right_shift"):  # counts 0 .. past the width
        x2 = (rng.integers(0, DTYPES[dt].itemsize * 8 + 4, x2.size)).astype(x2.dtype)
    if name == "pow" and not DTYPES[dt].is_float:  # numpy refuses negative integer powers
        x2 = rng.integers(0, 6, x2.size).astype(x2.dtype)
    if name in ("floor_divide", "remainder") and DTYPES[dt].kind == "i":
        x1 = np.where(x1 == np.iinfo(x1.dtype).min, 0, x1).astype(x1.dtype)
    return [x1, x2]


def _cases():
    out = []
    for name in FUNCTIONS:
        row = OPS[ROWS[name]]
        for dt in row.accepts():
            if name == "divide" and not DTYPES[dt].is_float:
                continue  # refused (test_refusals)
            out.append(pytest.param(name, dt, id=f"{name}-{dt}"))
    return out


def _compute(name: str, dt: str, xs):
    """The namespace function (f16, outside the standard: the same row's kernel)."""
    bufs = [wgc.from_numpy(x) for x in xs]
    if dt != "f16":
        return getattr(xp, name)(*bufs).to_numpy()
    row = OPS[ROWS[name]]
    out = result_buffer(bufs[0].shape, DTYPES[row.out_dtype(dt)], bufs[0].device, name)
    return wgc.run_kernel(array_op(row.name, row.arity), bufs, out).to_numpy()


def _check_floats(name: str, dt: str, got, want, xs):
    npt = DTYPES[dt].numpy
    with np.errstate(over="ignore", invalid="ignore"):
        want_t = want.astype(npt)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want_t), err_msg="nan")
    inf = np.isinf(want_t)
    np.testing.assert_array_equal(got[inf], want_t[inf], err_msg="infinities")
    zero = want_t == 0
    if name not in ("sign", "nextafter", "maximum", "minimum"):  # (numpy's f16 nextafter(0,
        # -0) is 0; the standard's, and ours, is -0. sign of ±0 is 0 of either sign; IEEE
        # and the standard leave max and min of +0 and -0 open)
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want_t[zero]),
                                      err_msg="the sign of zeros")
    fin = np.isfinite(want_t) & ~zero
    ulp = _ULP.get(name, 0 if name in _EXACT else _F32_ULP)
    if dt == "f16":
        ulp = 1  # computed in f32, rounded once more
    scale = np.abs(want_t[fin]).astype(npt)
    if name in _ABSOLUTE:
        scale = np.maximum(scale, np.maximum(np.abs(xs[0][fin]), np.abs(xs[1][fin])))
    err = np.abs(got[fin].astype(np.float64) - want[fin]) / np.spacing(scale).astype(
        np.float64)
    allowed = max(ulp, 0.5)  # (0.5: the rounding of numpy's f64 result itself)
    if name == "pow":  # (see _ULP)
        with np.errstate(all="ignore"):
            allowed = np.maximum(allowed, 2 * np.abs(xs[1][fin] * np.log(np.abs(xs[0][fin]))))
    bad = err > allowed
    if wgc.current_device().backend.lower() in ("opengl", "gl"):  # llvmpipe's GL path flushes
        tiny = np.finfo(npt).tiny  # subnormal results to zero (docs/guide/numpy.md says so)
        bad &= ~((np.abs(want_t[fin]) < tiny) & (got[fin] == 0))
    assert not bad.any(), (f"{name} {dt}: {bad.sum()} off by up to {err.max():.1f} ulp, "
                           f"e.g. at {[x[fin][bad][:3] for x in xs]}: got {got[fin][bad][:3]}, "
                           f"numpy {want_t[fin][bad][:3]}")


@pytest.mark.parametrize("name,dt", _cases())
def test_function_matches_numpy(name, dt, rng):
    need(dt)
    xs = _operands(name, dt, rng)
    row = OPS[ROWS[name]]
    got = _compute(name, dt, xs)
    wide = DTYPES[dt].is_float and name not in _EXACT  # (numpy's own f32 sin is no reference)
    with np.errstate(all="ignore"):
        want = np.asarray(row.reference(*[x.astype(np.float64) if wide else x for x in xs]))
    assert got.dtype == DTYPES[row.out_dtype(dt)].numpy, (got.dtype, row.out_dtype(dt))
    if not DTYPES[dt].is_float or got.dtype == np.bool_:
        if name == "pow" and DTYPES[dt].kind in "iu":
            want = row.reference(*xs)
        np.testing.assert_array_equal(got, want.astype(got.dtype))
        return
    _check_floats(name, dt, got, want, xs)


def test_trigonometry_of_large_arguments_is_reduced_exactly():
    """sin, cos and tan reduce |x| up to f32's largest by 2/pi's bits (not by a rounded pi):
    a few ulp at 1e22 and 3e38 as near 0."""
    v = np.array([3.4028235e38, 1e30, 1e22, 8.9e4, 65535.99, 65536.0, 1e10, 2 ** 24, 205887.4,
                  -6.487897e7, 1e5 * np.pi], np.float32)
    for name in ("sin", "cos", "tan"):
        got = getattr(xp, name)(xp.asarray(v)).to_numpy().astype(np.float64)
        want = getattr(np, name)(v.astype(np.float64))
        err = np.abs(got - want) / np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
        assert err.max() <= _F32_ULP, (name, err)


@pytest.mark.parametrize("name", ["subtract", "divide", "pow", "atan2", "copysign", "less",
                                  "greater_equal", "remainder", "floor_divide", "maximum",
                                  "hypot", "nextafter", "logaddexp", "add", "multiply"])
def test_a_python_scalar_on_either_side(name, rng):
    a = np.concatenate([_special("f32"), rng.uniform(-5, 5, 20).astype(np.float32)])
    x = xp.asarray(a)
    row = OPS[ROWS[name]]
    for s in (2.5, -3, 0.0):
        for got, want in ((getattr(xp, name)(x, s), row.reference(a, np.float32(s))),
                          (getattr(xp, name)(s, x), row.reference(np.float32(s), a))):
            assert got.shape == a.shape
            w = np.asarray(want)
            np.testing.assert_allclose(got.to_numpy().astype(np.float64),
                                       w.astype(got.to_numpy().dtype).astype(np.float64),
                                       rtol=1e-5 if name == "pow" else 1e-6, atol=0,
                                       equal_nan=True)


def test_integer_scalars_and_shifts():
    a = np.array([-7, -1, 0, 1, 5, 100], np.int32)
    x = xp.asarray(a)
    counts = np.array([0, 3, 31, 32, 40], np.int32)
    np.testing.assert_array_equal(xp.bitwise_left_shift(1, xp.asarray(counts)).to_numpy(),
                                  np.left_shift(np.int32(1), counts))
    np.testing.assert_array_equal(xp.bitwise_right_shift(x, 2).to_numpy(), a >> 2)
    np.testing.assert_array_equal(xp.bitwise_right_shift(x, 40).to_numpy(),
                                  np.right_shift(a, 40))
    np.testing.assert_array_equal(xp.floor_divide(100, x[x.shape[0] - 2:]).to_numpy(),
                                  100 // a[-2:])
    np.testing.assert_array_equal(xp.bitwise_xor(x, -1).to_numpy(), a ^ -1)
    u = xp.asarray(np.array([0, 1, 200, 255], np.uint8))
    np.testing.assert_array_equal(xp.bitwise_invert(u).to_numpy(),
                                  ~np.array([0, 1, 200, 255], np.uint8))
    np.testing.assert_array_equal(xp.add(u, 255).to_numpy(),
                                  np.array([0, 1, 200, 255], np.uint8) + np.uint8(255))
    with pytest.raises(wgc.DtypeError, match="256 is out of range for a uint8"):
        xp.add(u, 256)
    with pytest.raises(wgc.DtypeError, match="Python float does not combine with a int32"):
        xp.add(x, 1.5)


@pytest.mark.parametrize("dt1,dt2,want", [("int32", "uint8", "int32"), ("uint32", "int32",
                                          "int64"), ("float32", "float64", "float64"),
                                          ("uint8", "uint32", "uint32"),
                                          ("int64", "int32", "int64")])
def test_mixed_dtypes_promote_by_the_standards_table(dt1, dt2, want):
    need("f64" if "float64" in (dt1, dt2) else "f32", "s64" if want == "int64" else "f32")
    a, b = np.array([1, 2, 3, 250]), np.array([[2], [5]])
    x1 = xp.asarray(a.astype(np.dtype(dt1)), dtype=getattr(xp, dt1))
    x2 = xp.asarray(b.astype(np.dtype(dt2)), dtype=getattr(xp, dt2))
    for fn, ref in ((xp.add, np.add), (xp.multiply, np.multiply), (xp.maximum, np.maximum),
                    (xp.less, np.less)):
        got = fn(x1, x2)
        w = ref(a.astype(np.dtype(dt1)), b.astype(np.dtype(dt2)))
        assert got.dtype == (xp.bool if ref is np.less else getattr(xp, want))
        np.testing.assert_array_equal(got.to_numpy(), w)


@pytest.mark.parametrize("s1,s2", [((), (5,)), ((3, 1), (1, 4)), ((0,), (1,)), ((2, 0, 3), (3,)),
                                   ((1031,), ()), ((4, 1, 6), (5, 1)), ((), ())])
def test_broadcasting_0d_and_empty(s1, s2, rng):
    a = rng.uniform(0.1, 3, s1).astype(np.float32)
    b = rng.uniform(0.1, 3, s2).astype(np.float32)
    for fn, ref in ((xp.atan2, np.arctan2), (xp.hypot, np.hypot), (xp.pow, np.power),
                    (xp.greater, np.greater)):
        got = fn(xp.asarray(a), xp.asarray(b))
        w = ref(a, b)
        assert got.shape == w.shape
        np.testing.assert_allclose(got.to_numpy(), w, rtol=4e-7)
    got = xp.exp(xp.asarray(a))
    assert got.shape == a.shape
    np.testing.assert_allclose(got.to_numpy(), np.exp(a), rtol=4e-7)


def test_refusals_name_the_function_and_what_is_allowed():
    f64 = xp.asarray([1.0, 2.0], dtype=xp.float64) if "shader-f64" in \
        wgc.device_info()["features"] else None
    i = xp.asarray([1, 2], dtype=xp.int32)
    f = xp.asarray([1.0, 2.0])
    if f64 is not None:
        np.testing.assert_array_equal(xp.pow(f64, 3).to_numpy(), [1.0, 8.0])
    with pytest.raises(wgc.DtypeError, match="sin: int32 arrays are not accepted"):
        xp.sin(i)
    with pytest.raises(wgc.DtypeError, match="bitwise_and: float32 arrays are not accepted; "
                                             "expected an integer dtype"):
        xp.bitwise_and(f, f)
    with pytest.raises(wgc.DtypeError, match="signbit: int32 arrays are not accepted"):
        xp.signbit(i)
    with pytest.raises(wgc.DtypeError, match="divide: true division of int32 arrays"):
        xp.divide(i, i)
    with pytest.raises(wgc.DtypeError, match="x1 is int32 and x2 is float32, which have no "
                                             "promoted dtype"):
        xp.add(i, f)
    with pytest.raises(wgc.DtypeError, match="negative power -1"):
        xp.pow(i, -1)
    with pytest.raises(wgc.ArgumentError, match="x: expected an array"):
        xp.sin([1.0])
    np.testing.assert_array_equal(xp.isnan(i).to_numpy(), [False, False])
    np.testing.assert_array_equal(xp.isfinite(i).to_numpy(), [True, True])
    np.testing.assert_array_equal(xp.round(i).to_numpy(), [1, 2])


def test_clip(rng):
    a = np.array([-3.0, -0.5, 0.0, 0.5, 2.0, np.nan, np.inf, -np.inf], np.float32)
    x = xp.asarray(a)
    np.testing.assert_array_equal(xp.clip(x, -1, 1.5).to_numpy(), np.clip(a, -1, 1.5))
    np.testing.assert_array_equal(xp.clip(x, max=0.0).to_numpy(), np.minimum(a, 0.0))
    np.testing.assert_array_equal(xp.clip(x, min=0.25).to_numpy(), np.maximum(a, 0.25))
    same = xp.clip(x)
    assert same is not x
    np.testing.assert_array_equal(same.to_numpy(), a)
    lo = rng.uniform(-2, 0, (3, 1)).astype(np.float32)
    hi = np.array([np.nan, 1.0, 3.0] + [1.0] * 5, np.float32)
    got = xp.clip(x, xp.asarray(lo), xp.asarray(hi))
    want = np.minimum(np.maximum(a, lo), hi)
    assert got.shape == want.shape == (3, 8) and got.dtype == xp.float32
    np.testing.assert_array_equal(got.to_numpy(), want)
    u = xp.asarray(np.array([0, 5, 200, 255], np.uint8))
    np.testing.assert_array_equal(xp.clip(u, -5, 1000).to_numpy(), [0, 5, 200, 255])
    np.testing.assert_array_equal(xp.clip(u, 3, 100).to_numpy(), [3, 5, 100, 100])
    np.testing.assert_array_equal(xp.clip(u, 4, xp.asarray(np.array([9], np.uint8)))
                                  .to_numpy(), [4, 5, 9, 9])
    with pytest.raises(wgc.DtypeError, match="Python float does not combine"):
        xp.clip(u, 1.5)
    with pytest.raises(wgc.DtypeError, match="clip: min is float32 and x is uint8"):
        xp.clip(u, xp.asarray([1.0]))
    with pytest.raises(wgc.DtypeError, match="out of range for a uint8"):
        xp.clip(u, 300)


# -- the array object ---------------------------------------------------------------------------
def test_operators_promote_and_follow_the_standard():
    i = wgc.from_numpy(np.array([1, -2, 3], np.int32))
    u = wgc.from_numpy(np.array([1, 2, 250], np.uint8))
    f = wgc.from_numpy(np.array([0.5, 2.0, -1.0], np.float32))
    assert (i + u).dtype == "s32" and (i + u).tolist() == [2, 0, 253]
    assert (u * i).tolist() == [1, -4, 750]
    assert (i + 2).dtype == "s32" and (f + 1).tolist() == [1.5, 3.0, 0.0]
    with pytest.raises(wgc.DtypeError, match="s32 and f32 buffers have no common dtype"):
        i + f
    with pytest.raises(TypeError, match="1.5 is not an s32 integer: a float scalar"):
        i * 1.5
    for op in (operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift):
        np.testing.assert_array_equal(op(i, u).to_numpy(),
                                      op(np.array([1, -2, 3], np.int32),
                                         np.array([1, 2, 250], np.uint8)))
        np.testing.assert_array_equal(op(i, 3).to_numpy(), op(np.array([1, -2, 3], np.int32),
                                                              3))
        np.testing.assert_array_equal(op(6, i).to_numpy(), op(6, np.array([1, -2, 3],
                                                                          np.int32)))
    assert (~i).tolist() == [-2, 1, -4] and (+i).tolist() == [1, -2, 3]
    assert abs(i).tolist() == [1, 2, 3] and (-u).tolist() == [255, 254, 6]
    with pytest.raises(wgc.DtypeError, match="& | ^ ~ << and >> take integer buffers"):
        f & f
    with pytest.raises(wgc.DtypeError, match="true division of s32"):
        i / i


def test_in_place_operators_keep_the_left_dtype():
    i = wgc.from_numpy(np.array([1, 2, 3], np.int32))
    i += wgc.from_numpy(np.array([1, 1, 1], np.uint8))
    i <<= 2
    i |= 1
    i ^= wgc.from_numpy(np.array([1, 0, 1], np.int32))
    i >>= 1
    i &= 6
    assert i.dtype == "s32" and i.tolist() == [4, 6, 0]
    u = wgc.from_numpy(np.array([1, 2, 3], np.uint8))
    with pytest.raises(wgc.DtypeError, match="promote to s32, and an in-place operator keeps"):
        u += i
    with pytest.raises(wgc.DtypeError, match="a float scalar does not combine"):
        i += 1.0
    assert u.tolist() == [1, 2, 3]


def test_array_object_attributes():
    m = wgc.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert m.__array_namespace__() is xp
    assert m.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(wgc.ArgumentError, match="api_version '2030.01' is not available"):
        m.__array_namespace__(api_version="2030.01")
    np.testing.assert_array_equal(m.T.to_numpy(), np.arange(6).reshape(2, 3).T)
    stack = wgc.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert stack.mT.shape == (2, 4, 3)
    with pytest.raises(wgc.ShapeError, match="T transposes a 2-D buffer"):
        stack.T  # noqa: B018
    assert m.to_device(m.device) is m and m.to_device(None) is m
    with pytest.raises(wgc.ArgumentError, match="stream"):
        m.to_device(m.device, stream=1)
    s = m.sum()
    assert bool(s) is True and int(s) == 15 and float(s) == 15.0 and complex(s) == 15 + 0j
    assert bool(xp.asarray(0.0)) is False and bool(xp.asarray(float("nan"))) is True
    n = xp.asarray(7, dtype=xp.int32)
    assert operator.index(n) == 7 and [0, 1, 2, 3, 4, 5, 6, 7, 8][n] == 7
    with pytest.raises(TypeError, match="only an integer buffer is an index"):
        operator.index(s)
    with pytest.raises(wgc.ArgumentError, match="bool.*would read the GPU"):
        bool(m)
    with pytest.raises(OverflowError):
        int(xp.asarray(float("inf")))
    with pytest.raises(ValueError):
        int(xp.asarray(float("nan")))


def test_bool_and_complex64_operands():
    """The bitwise functions of bools are the logical ones; complex64's tests (isnan, isinf,
    isfinite, ==, !=) combine its parts', its arithmetic runs complex64's own kernels."""
    b = np.array([True, False, True])
    x = xp.asarray(b)
    np.testing.assert_array_equal(xp.bitwise_and(x, False).to_numpy(), b & False)
    np.testing.assert_array_equal(xp.bitwise_xor(x, xp.asarray([True, True, False]))
                                  .to_numpy(), b ^ np.array([True, True, False]))
    np.testing.assert_array_equal(xp.bitwise_invert(x).to_numpy(), ~b)
    c = np.array([1 + 2j, complex(np.nan, 0), complex(0, np.inf), -3j], np.complex64)
    z = xp.asarray(c)
    for name, ref in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
        np.testing.assert_array_equal(getattr(xp, name)(z).to_numpy(), ref(c))
    np.testing.assert_array_equal(xp.equal(z, 1 + 2j).to_numpy(), c == 1 + 2j)
    np.testing.assert_array_equal((z != z).to_numpy(), c != c)
    re = np.real(c).astype(np.float32)  # promoted to complex64
    np.testing.assert_array_equal(xp.equal(xp.asarray(re), z).to_numpy(), re == c)
    np.testing.assert_allclose((z * 2 - 1j).to_numpy(), c * 2 - 1j)
    np.testing.assert_array_equal(xp.positive(z).to_numpy(), c)
    np.testing.assert_array_equal(xp.negative(z).to_numpy(), -c)
    half = np.array([[0.5 + 2.5j, -1.5 - 0.5j]], np.complex64)
    assert xp.round(xp.asarray(half)).shape == (1, 2)
    np.testing.assert_array_equal(xp.round(xp.asarray(half)).to_numpy(), np.round(half))
    np.testing.assert_array_equal((-xp.asarray(np.complex64(1 - 2j))).to_numpy(), -1 + 2j)
    fin = np.isfinite(c)
    np.testing.assert_allclose(xp.square(z).to_numpy()[fin], np.square(c)[fin], rtol=1e-6)
    with pytest.raises(wgc.DtypeError, match="floor: complex64 arrays are not accepted"):
        xp.floor(z)  # (real numbers only, as the standard)
    same = z
    z += 1
    z *= 2j
    assert z is same
    np.testing.assert_allclose(z.to_numpy()[fin], ((c + 1) * 2j)[fin], rtol=1e-6)
    with pytest.raises(wgc.DtypeError, match="f32 and c64 promote to c64, and an in-place"):
        f = xp.asarray([1.0])
        f += z[:1]


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_pow_of_large_integer_exponents_and_signed_zeros(dt):
    """Integer exponents past 16 take exp(y log x) (repeated squaring doubles its error with
    each square: 1.00001 ** 1e6 was 0.16% off); -0 and -inf to odd powers keep their sign."""
    need("f64" if dt == "float64" else "f32")
    npt = np.dtype(dt)
    v = np.array([1.00001, 0.9999, 1.5, -2.0, -0.0, -np.inf, 0.0], npt)
    x = xp.asarray(v)
    for e in (1000000, 64, 17, 3, -3, -17, 2.5, 1e10 + 1):
        e = float(npt.type(e)) if isinstance(e, float) else e  # (1e10 + 1 is even in f32)
        got = xp.pow(x, e).to_numpy()
        with np.errstate(all="ignore"):
            want = np.power(v.astype(np.float64), e).astype(npt)
        num = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]),
                                      err_msg=str(e))
        fin = np.isfinite(want) & (want != 0)
        np.testing.assert_array_equal(got[~fin], want[~fin], err_msg=str(e))
        bound = 2 * np.abs(e * np.log(np.abs(v[fin].astype(np.float64)))) + 4
        err = np.abs(got[fin] - want[fin]) / np.spacing(np.abs(want[fin]))
        assert (err <= bound).all(), (e, err, bound)


def _expm1_reference(c):
    """expm1 of complex ``c``: (expm1(a) cos b - 2 sin²(b/2)) + i e^a sin b in f64 for
    finite parts, the standard's table for the others."""
    a, b = c.real.astype(np.float64), c.imag.astype(np.float64)
    with np.errstate(all="ignore"):
        re = np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2
        im = np.exp(a) * np.sin(b)
    re = np.where(b == 0, np.expm1(a), re)
    im = np.where(b == 0, b, im)
    bad_b, inf_a = ~np.isfinite(b), np.isinf(a)
    re = np.where(bad_b, np.where(inf_a, np.where(a < 0, -1.0, a), np.nan), re)
    im = np.where(bad_b, np.where(inf_a & (a < 0), np.copysign(0.0, b), np.nan), im)
    fin_b = np.isfinite(b) & (b != 0)
    re = np.where(fin_b & (a == -np.inf), -1.0, re)
    im = np.where(fin_b & (a == -np.inf), np.copysign(0.0, np.sin(b)), im)
    out = np.empty(c.shape, c.dtype)
    out.real, out.imag = re, im
    return out


# complex dtypes: the numpy dtype, a relative tolerance of a few ulp, large and tiny parts
COMPLEX = {"c64": (np.complex64, 4e-6, 1e30, -1e-30),
           "c128": (np.complex128, 1e-14, 1e300, -1e-300)}


@pytest.mark.parametrize("dt", list(COMPLEX))
def test_complex_functions_match_numpy(rng, dt):
    """exp, expm1, log, log1p, log2, log10, sqrt, the hyperbolic and circular functions and
    their inverses of complex64 and complex128: every
    pairing of special parts (±0, ±inf, nan, ...) as numpy's (C99's), signs of zeros
    included, and random values within a few ulp."""
    npd, rtol, big, tiny = COMPLEX[dt]
    sp = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 2.0, -3.5, big,
                   tiny, 100.0], np.float64)
    c = np.empty(sp.size ** 2 + 600, npd)
    c.real = np.concatenate([np.repeat(sp, sp.size), rng.normal(0, 3, 600)])
    c.imag = np.concatenate([np.tile(sp, sp.size), rng.normal(0, 3, 600)])
    z = xp.asarray(c)
    for name in ("exp", "log", "log2", "log10", "sqrt", "sinh", "cosh", "tanh", "sin", "cos",
                 "tan", "expm1", "log1p", "asinh", "asin", "acosh", "acos", "atanh", "atan"):
        got = getattr(xp, name)(z).to_numpy()
        assert got.dtype == npd
        with np.errstate(all="ignore"):
            want = getattr(np, name)(c.astype(np.complex128)).astype(npd)
        if name == "expm1":  # numpy's is exp(z) - 1: the standard's cases, and f64 math
            want = _expm1_reference(c)
        if name in ("tanh", "tan"):  # tanh(±inf + iy) = ±1 + 0j with y's sign, the
            # standard's (numpy's, C99's: sin(2y)'s); tan(z) = -i tanh(iz)
            part, other = (want.imag, c.imag) if name == "tanh" else (want.real, c.real)
            edge = np.isinf(c.real if name == "tanh" else c.imag) & np.isfinite(other)
            part[edge] = np.copysign(0.0, other[edge])
        if name == "log1p":  # numpy's is log(1 + z), which loses a small z: f64 math there
            small = np.abs(c) < 0.25
            a, b = c.real[small].astype(np.float64), c.imag[small].astype(np.float64)
            want.real[small] = 0.5 * np.log1p(a * (2 + a) + b * b)
            want.imag[small] = np.arctan2(b, 1 + a)
        for part, other in ((np.real, np.imag), (np.imag, np.real)):
            g, w = part(got), part(want)
            exact = (g == w) & ((np.signbit(g) == np.signbit(w)) | (name == "expm1"))
            close = np.isclose(g, w, rtol=rtol, atol=0) & (w != 0)  # (expm1: a zero's sign
            # is open where an f64 result underflows f32)
            # ±inf beside a nan: C99 leaves the sign open (numpy's sin is not -i sinh(iz))
            open_sign = np.isinf(g) & np.isinf(w) & np.isnan(other(want))
            # a zero beside a nan input part: the standard leaves its sign open too
            open_sign |= (g == 0) & (w == 0) & (np.isnan(c.real) | np.isnan(c.imag))
            ok = exact | (np.isnan(g) & np.isnan(w)) | close | open_sign
            assert ok.all(), (name, c[~ok][:4], got[~ok][:4], want[~ok][:4])


@pytest.mark.parametrize("dt", list(COMPLEX))
def test_complex_sign_and_pow(dt):
    npd, rtol = COMPLEX[dt][:2]
    c = np.array([1 + 2j, -3 + 0.5j, 0j, complex(np.nan, 0), 2.5 - 1j, -1e-3 + 4j], npd)
    z = xp.asarray(c)
    got = xp.sign(z).to_numpy()
    with np.errstate(all="ignore"):
        want = np.sign(c.astype(np.complex128))
    np.testing.assert_allclose(got, want, rtol=rtol / 10)
    e = np.array([0.5 + 1j, 2, -1.5j, 1, 0.25, 3 - 1j], npd)
    with np.errstate(all="ignore"):
        want = (c.astype(np.complex128) ** e.astype(np.complex128)).astype(npd)
    got = xp.pow(z, xp.asarray(e)).to_numpy()
    assert got.dtype == npd
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol / 2)
    assert np.isnan(got[~fin]).all()
    np.testing.assert_array_equal((z ** 2).to_numpy(), c * c)  # multiplied, exactly
    np.testing.assert_allclose(xp.pow(2.0, z).to_numpy(), 2.0 ** c, rtol=rtol / 2)


@pytest.mark.parametrize("dt", list(COMPLEX))
def test_complex_expm1_of_signed_zeros(dt):
    """expm1(±0 + 0j) is +0 + 0j (the standard's table; a real expm1(-0) is -0)."""
    c = np.zeros(4, COMPLEX[dt][0])
    c.real, c.imag = [0.0, -0.0, 0.0, -0.0], [0.0, 0.0, -0.0, -0.0]
    got = xp.expm1(xp.asarray(c)).to_numpy()
    assert (got == 0).all() and not np.signbit(got.real).any()
    np.testing.assert_array_equal(np.signbit(got.imag), [False, False, True, True])


def test_the_rows_that_need_64_bit_integers_in_f64_are_the_ones_refused_without_them():
    """A device without shader-int64 refuses exactly the f64 functions whose WGSL reads u64."""
    from wgcompute.array_api._elementwise import F64_BITS

    f64 = DTYPES["f64"]
    uses = {name for name, row in OPS.items() if "f64" in row.accepts() and "u64" in (
        row.body(f64, "f64") if row.body else row.template(f64))}
    assert uses == F64_BITS
