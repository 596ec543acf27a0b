"""complex64 end to end, against numpy: buffers of it (stored, read, indexed as views and
strided copies, transposed), its conversions (real to complex; complex to real refused),
real/imag/conj, its arithmetic with broadcasting and Python scalars, abs; and the kernels
that cannot compute it refuse it."""

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


def cplx(shape):
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return np.asarray(z).astype(np.complex64)


def test_the_table_row():
    d = DTYPES["c64"]
    assert (d.numpy, d.wgsl, d.itemsize, d.kind, d.feature) == \
        (np.dtype(np.complex64), "vec2<f32>", 8, "c", None)
    assert dtype("complex64") is d and dtype(np.complex64) is d
    assert xp.complex64 is d and xp.isdtype(xp.complex64, "complex floating")
    with pytest.raises(wgc.DtypeError):
        dtype(np.complex128)


@pytest.mark.parametrize("shape", SHAPES)
def test_store_and_read(shape):
    a = cplx(shape)
    b = wgc.from_numpy(a)
    assert b.dtype == "c64" and b.shape == shape
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


@pytest.mark.parametrize("key", [1, (slice(None), 2), (Ellipsis, slice(None, None, -2)),
                                 (1, slice(1, 3), slice(None, None, 3)), (None, 0, -1)])
def test_indexing_views_and_copies(key):
    a = cplx((3, 4, 5))
    x = wgc.from_numpy(a)
    np.testing.assert_array_equal(x[key].to_numpy(), a[key])
    np.testing.assert_array_equal(x[key].copy().to_numpy(), a[key])


def test_transpose_and_reshape():
    a = cplx((3, 40))
    x = wgc.from_numpy(a)
    np.testing.assert_array_equal(x.T.to_numpy(), a.T)
    np.testing.assert_array_equal(wgc.from_numpy(cplx((2, 3, 4))).transpose((2, 0, 1))
                                  .to_numpy().shape, (4, 2, 3))
    np.testing.assert_array_equal(x.reshape(40, 3).to_numpy(), a.reshape(40, 3))


@pytest.mark.parametrize("src", ["f32", "c64", "f64", "s32", "u32"])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (1031,)])
def test_astype_to_complex(src, shape):
    a = np.asarray(rng.standard_normal(shape) * 100).astype(DTYPES[src].numpy)
    if src == "c64":
        a = cplx(shape)
    x = wgc.from_numpy(a)
    got = x.astype("c64", casting="unsafe")
    np.testing.assert_array_equal(got.to_numpy(), a.astype(np.complex64))
    if src in ("f32", "c64"):
        np.testing.assert_array_equal(x.astype("c64").to_numpy(), a.astype(np.complex64))


def test_astype_refusals():
    c = wgc.from_numpy(cplx((3,)))
    for dt in ("f32", "s32", "u8"):
        with pytest.raises(wgc.DtypeError, match="drop the imaginary part"):
            c.astype(dt)
    with pytest.raises(wgc.DtypeError, match="f64 to c64 is not exact"):
        wgc.from_numpy(np.ones(3)).astype("c64")
    with pytest.raises(wgc.DtypeError, match="u8 to c64 is not available"):
        wgc.from_numpy(np.ones(3, np.uint8)).astype("c64", casting="unsafe")


@pytest.mark.parametrize("shape", SHAPES)
def test_real_imag_conj_abs(shape):
    a = cplx(shape)
    x = wgc.from_numpy(a)
    for f, ref in ((xp.real, np.real), (xp.imag, np.imag), (xp.conj, np.conj)):
        got = f(x)
        assert got.shape == shape
        np.testing.assert_array_equal(got.to_numpy(), ref(a))
    np.testing.assert_allclose(_complex.complex_abs(x).to_numpy(), np.abs(a), rtol=1e-6)
    assert xp.real(x).dtype == "f32" and xp.conj(x).dtype == "c64"


def test_abs_does_not_overflow():
    a = np.array([3e30 + 4e30j, 1e-30 + 0j, 0j, complex(np.inf, 1)], np.complex64)
    got = _complex.complex_abs(wgc.from_numpy(a)).to_numpy()
    np.testing.assert_allclose(got, np.abs(a), rtol=1e-6)


def test_parts_refuse_real_input():
    with pytest.raises(wgc.DtypeError, match="real: x is float32"):
        xp.real(wgc.from_numpy(np.ones(3, np.float32)))


@pytest.mark.parametrize("name,ref", [("complex_add", np.add),
                                      ("complex_subtract", np.subtract),
                                      ("complex_multiply", np.multiply),
                                      ("complex_divide", np.divide)])
@pytest.mark.parametrize("s1,s2", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (5,)),
                                   ((2, 1, 3), (4, 1)), ((0, 3), (3,)), ((1031,), (1031,))])
def test_arithmetic_broadcasts(name, ref, s1, s2):
    a, b = cplx(s1), cplx(s2)
    f = getattr(_complex, name)
    got = f(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()
    np.testing.assert_allclose(got, ref(a, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(wgc.from_numpy(a), 2 - 0.5j).to_numpy(),
                               ref(a, np.complex64(2 - 0.5j)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(2 - 0.5j, wgc.from_numpy(b)).to_numpy(),
                               ref(np.complex64(2 - 0.5j), b), rtol=1e-5, atol=1e-6)


def test_division_keeps_range():
    a = np.array([1e30 + 1e30j, 1 + 1j], np.complex64)
    b = np.array([1e30 + 1e30j, 1e-30 + 2e-30j], np.complex64)
    got = _complex.complex_divide(wgc.from_numpy(a), wgc.from_numpy(b)).to_numpy()
    np.testing.assert_allclose(got, (a.astype(np.complex128) / b).astype(np.complex64),
                               rtol=1e-5)


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
