"""complex64 and complex128 end to end, against numpy: buffers of them (stored, read, indexed
as views and strided copies, transposed), their conversions (real to complex, between the two;
complex to real refused), real/imag/conj, their arithmetic with broadcasting and Python
scalars, abs, reductions, scans, products and creation; and the kernels that cannot compute
them refuse them. complex128 runs where the adapter has shader-f64 (its parts are f64)."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.array_api import _complex
from wgcompute.dtypes import DTYPES, convert_exact, dtype, list_to_array

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

rng = np.random.default_rng(3)
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 3, 4), (1031,)]
DTS = ["c64", "c128"]
RTOL = {"c64": 1e-5, "c128": 1e-13}  # a few ulp of the parts' dtype


def cplx(shape, dt="c64"):
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return np.asarray(z).astype(DTYPES[dt].numpy)


def test_the_table_rows():
    d = DTYPES["c64"]
    assert (d.numpy, d.wgsl, d.itemsize, d.kind, d.feature, d.part) == \
        (np.dtype(np.complex64), "vec2<f32>", 8, "c", None, "f32")
    assert dtype("complex64") is d and dtype(np.complex64) is d
    assert xp.complex64 is d and xp.isdtype(xp.complex64, "complex floating")
    d = DTYPES["c128"]
    assert (d.numpy, d.wgsl, d.itemsize, d.kind, d.feature, d.part) == \
        (np.dtype(np.complex128), "vec2<f64>", 16, "c", "shader-f64", "f64")
    assert dtype("complex128") is d and dtype(np.complex128) is d
    assert xp.isdtype(d, "complex floating")
    with pytest.raises(wgc.DtypeError, match="not complex"):
        assert DTYPES["f32"].part is None


def test_promotion_to_complex128():
    """The standard's table: complex64 with float64 is complex128, as is complex128 with
    anything complex or real floating."""
    c64, c128 = DTYPES["c64"], DTYPES["c128"]
    assert xp.result_type(c64, xp.float64) is c128
    assert xp.result_type(c64, c128) is c128 and xp.result_type(xp.float32, c128) is c128
    assert xp.result_type(c64, xp.float32) is c64
    assert xp.can_cast(c64, c128) and not xp.can_cast(c128, c64)
    assert xp.finfo(c128).dtype == xp.float64 and xp.finfo(c128).bits == 64


def test_info_lists_complex128_where_the_device_has_float64():
    dev = wgc.current_device()
    listed = xp.__array_namespace_info__().dtypes(kind="complex floating")
    assert ("complex128" in listed) == dev.has("shader-f64")
    assert ("complex128" in xp.__array_namespace_info__().dtypes()) == \
        ("float64" in xp.__array_namespace_info__().dtypes())


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_store_and_read(shape, dt):
    a = cplx(shape, dt)
    b = wgc.from_numpy(a)
    assert b.dtype == dt and b.shape == shape
    np.testing.assert_array_equal(b.to_numpy(), a)


def test_exact_conversion_of_data():
    np.testing.assert_array_equal(wgc.buffer([1, 2.5, 1 - 2j], dtype="c64").to_numpy(),
                                  np.array([1, 2.5, 1 - 2j], np.complex64))
    np.testing.assert_array_equal(convert_exact(np.array([1 + 1j]), DTYPES["c64"]),
                                  [1 + 1j])
    with pytest.raises(wgc.DtypeError, match="imaginary part would be lost"):
        convert_exact(np.array([1 + 1j]), DTYPES["f32"])
    with pytest.raises(wgc.DtypeError, match="out of range for f32"):
        convert_exact(np.array([1e300j]), DTYPES["c64"])
    with pytest.raises(wgc.DtypeError, match="cannot be stored exactly"):
        list_to_array([2**40 + 1], DTYPES["c64"])
    with pytest.raises(wgc.DtypeError, match="not a number"):
        list_to_array([1j], DTYPES["f32"])
    # complex128's parts are f64: what complex64 refuses, it holds
    np.testing.assert_array_equal(convert_exact(np.array([1e300j]), DTYPES["c128"]), [1e300j])
    np.testing.assert_array_equal(list_to_array([2**40 + 1, 0.1 + 2j], DTYPES["c128"]),
                                  np.array([2**40 + 1, 0.1 + 2j]))
    with pytest.raises(wgc.DtypeError, match="cannot be stored exactly"):
        list_to_array([2**60 + 1], DTYPES["c128"])


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("key", [1, (slice(None), 2), (Ellipsis, slice(None, None, -2)),
                                 (1, slice(1, 3), slice(None, None, 3)), (None, 0, -1)])
def test_indexing_views_and_copies(key, dt):
    a = cplx((3, 4, 5), dt)
    x = wgc.from_numpy(a)
    np.testing.assert_array_equal(x[key].to_numpy(), a[key])
    np.testing.assert_array_equal(x[key].copy().to_numpy(), a[key])


@pytest.mark.parametrize("dt", DTS)
def test_transpose_and_reshape(dt):
    a = cplx((3, 40), dt)
    x = wgc.from_numpy(a)
    np.testing.assert_array_equal(x.T.to_numpy(), a.T)
    b = cplx((2, 3, 4), dt)
    np.testing.assert_array_equal(wgc.from_numpy(b).transpose((2, 0, 1)).to_numpy(),
                                  b.transpose((2, 0, 1)))
    np.testing.assert_array_equal(x.reshape(40, 3).to_numpy(), a.reshape(40, 3))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("src", ["f32", "c64", "c128", "f64", "s32", "u32"])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (1031,)])
def test_astype_to_complex(src, shape, dt):
    a = np.asarray(rng.standard_normal(shape) * 100).astype(DTYPES[src].numpy)
    if DTYPES[src].kind == "c":
        a = cplx(shape, src)
    x = wgc.from_numpy(a)
    want = a.astype(DTYPES[dt].numpy)
    got = x.astype(dt, casting="unsafe")
    np.testing.assert_array_equal(got.to_numpy(), want)
    exact = {"c64": ("f32", "c64"), "c128": ("f32", "c64", "c128", "f64", "s32", "u32")}[dt]
    if src in exact:  # (the parts hold every value: no check needed, none refused)
        np.testing.assert_array_equal(x.astype(dt).to_numpy(), want)
    else:
        with pytest.raises(wgc.DtypeError, match=f"{src} to {dt} is not exact"):
            x.astype(dt)
    np.testing.assert_array_equal(xp.astype(x, DTYPES[dt]).to_numpy(), want)


def test_astype_refusals():
    c = wgc.from_numpy(cplx((3,)))
    for dt in ("f32", "s32", "u8"):
        with pytest.raises(wgc.DtypeError, match="drop the imaginary part"):
            c.astype(dt)
    with pytest.raises(wgc.DtypeError, match="f64 to c64 is not exact"):
        wgc.from_numpy(np.ones(3)).astype("c64")
    with pytest.raises(wgc.DtypeError, match="u8 to c64 is not available"):
        wgc.from_numpy(np.ones(3, np.uint8)).astype("c64", casting="unsafe")
    c = wgc.from_numpy(cplx((3,), "c128"))
    with pytest.raises(wgc.DtypeError, match="drop the imaginary part"):
        c.astype("f64")
    with pytest.raises(wgc.DtypeError, match="c128 to c64 is not exact"):
        c.astype("c64")


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_real_imag_conj_abs(shape, dt):
    a = cplx(shape, dt)
    x = wgc.from_numpy(a)
    for f, ref in ((xp.real, np.real), (xp.imag, np.imag), (xp.conj, np.conj)):
        got = f(x)
        assert got.shape == shape
        np.testing.assert_array_equal(got.to_numpy(), ref(a))
    np.testing.assert_allclose(_complex.complex_abs(x).to_numpy(), np.abs(a), rtol=RTOL[dt])
    part = DTYPES[dt].part
    assert xp.real(x).dtype == part and xp.imag(x).dtype == part and xp.conj(x).dtype == dt


@pytest.mark.parametrize("dt,big,tiny", [("c64", 3e30, 1e-30), ("c128", 3e300, 1e-300)])
def test_abs_does_not_overflow(dt, big, tiny):
    a = np.array([big + 4 / 3 * big * 1j, tiny + 0j, 0j, complex(np.inf, 1)],
                 DTYPES[dt].numpy)
    got = _complex.complex_abs(wgc.from_numpy(a)).to_numpy()
    np.testing.assert_allclose(got, np.abs(a), rtol=RTOL[dt])


def test_parts_refuse_real_input():
    with pytest.raises(wgc.DtypeError, match="real: x is float32"):
        xp.real(wgc.from_numpy(np.ones(3, np.float32)))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("name,ref", [("complex_add", np.add),
                                      ("complex_subtract", np.subtract),
                                      ("complex_multiply", np.multiply),
                                      ("complex_divide", np.divide)])
@pytest.mark.parametrize("s1,s2", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)),
                                   ((2, 1, 3), (4, 1)), ((0, 3), (3,)), ((1031,), (1031,))])
def test_arithmetic_broadcasts(name, ref, s1, s2, dt):
    a, b = cplx(s1, dt), cplx(s2, dt)
    f = getattr(_complex, name)
    tol = {"rtol": RTOL[dt], "atol": RTOL[dt] / 10}
    s = DTYPES[dt].numpy.type(2 - 0.5j)
    got = f(wgc.from_numpy(a), wgc.from_numpy(b))
    assert got.dtype == dt
    np.testing.assert_allclose(got.to_numpy(), ref(a, b), **tol)
    np.testing.assert_allclose(f(wgc.from_numpy(a), 2 - 0.5j).to_numpy(), ref(a, s), **tol)
    np.testing.assert_allclose(f(2 - 0.5j, wgc.from_numpy(b)).to_numpy(), ref(s, b), **tol)


@pytest.mark.parametrize("dt,big,tiny", [("c64", 1e30, 1e-30), ("c128", 1e300, 1e-300)])
def test_division_keeps_range(dt, big, tiny):
    a = np.array([big + big * 1j, 1 + 1j], DTYPES[dt].numpy)
    b = np.array([big + big * 1j, tiny + 2 * tiny * 1j], DTYPES[dt].numpy)
    got = _complex.complex_divide(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()
    np.testing.assert_allclose(got, [1, (1 + 1j) / (1 + 2j) / tiny], rtol=RTOL[dt])


def test_arithmetic_refuses_real_operands():
    with pytest.raises(wgc.DtypeError):
        _complex.complex_add(wgc.from_numpy(np.ones(3, np.float32)), 1.0)


REFUSING = {
    "operator //": lambda x: x // x, "comparison": lambda x: x < x, "max": lambda x: x.max(),
    "matmul kernel": lambda x: wgc.run_kernel("matmul", [x, x]), "relu": lambda x: wgc.relu(x),
    "transpose kernel": lambda x: wgc.run_kernel("transpose", [x]),
    "astype kernel": lambda x: wgc.run_kernel("astype", [x], wgc.empty((4, 4), "f32")),
}


@pytest.mark.parametrize("name", list(REFUSING))
def test_kernels_without_complex_refuse_it(name):
    x = wgc.from_numpy(cplx((4, 4)))
    with pytest.raises(wgc.DtypeError, match="c64|complex64"):
        REFUSING[name](x)
