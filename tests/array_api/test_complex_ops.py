"""complex64 and complex128 through the namespace's other functions, against numpy: creation,
where, take, joining and moving elements, reductions, scans, products and linalg; and the
functions that cannot compute complex128 refuse it. complex128 runs where the adapter has
shader-f64."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

pytestmark = pytest.mark.computes("dt")
F64 = pytest.mark.needs("f64")  # complex128 and float64 only

rng = np.random.default_rng(11)
DTS = ["c64", "c128"]
RTOL = {"c64": 2e-5, "c128": 1e-12}


def cplx(shape, dt):
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return np.asarray(z).astype(DTYPES[dt].numpy)


@pytest.mark.parametrize("dt", DTS)
def test_creation(dt):
    d = DTYPES[dt]
    np.testing.assert_array_equal(xp.zeros((2, 3), dtype=d).to_numpy(), np.zeros((2, 3), d.numpy))
    np.testing.assert_array_equal(xp.ones((4,), dtype=d).to_numpy(), np.ones(4, d.numpy))
    np.testing.assert_array_equal(xp.full((3,), 1 - 2.5j, dtype=d).to_numpy(),
                                  np.full(3, 1 - 2.5j, d.numpy))
    for k in (-1, 0, 2):
        got = xp.eye(3, 4, k=k, dtype=d).to_numpy()
        assert got.dtype == d.numpy
        np.testing.assert_array_equal(got, np.eye(3, 4, k=k, dtype=d.numpy))
    a = cplx((3, 4), dt)
    np.testing.assert_array_equal(xp.tril(xp.asarray(a), k=1).to_numpy(), np.tril(a, 1))
    np.testing.assert_array_equal(xp.asarray([[1 + 2j, 3]], dtype=d).to_numpy(),
                                  np.array([[1 + 2j, 3]], d.numpy))


@pytest.mark.parametrize("dt", DTS)
def test_where_take_and_joins(dt):
    a, b = cplx((3, 5), dt), cplx((3, 5), dt)
    x, y = xp.asarray(a), xp.asarray(b)
    c = rng.random((3, 5)) < 0.5
    np.testing.assert_array_equal(xp.where(xp.asarray(c), x, y).to_numpy(), np.where(c, a, b))
    idx = np.array([4, 0, 0, 2], np.int32)
    np.testing.assert_array_equal(xp.take(x, xp.asarray(idx), axis=1).to_numpy(),
                                  np.take(a, idx, axis=1))
    np.testing.assert_array_equal(xp.concat([x, y], axis=1).to_numpy(),
                                  np.concatenate([a, b], axis=1))
    np.testing.assert_array_equal(xp.stack([x, y]).to_numpy(), np.stack([a, b]))
    np.testing.assert_array_equal(xp.flip(x, axis=1).to_numpy(), np.flip(a, axis=1))
    np.testing.assert_array_equal(xp.roll(x, 2, axis=1).to_numpy(), np.roll(a, 2, axis=1))
    np.testing.assert_array_equal(xp.permute_dims(x, (1, 0)).to_numpy(), a.T)
    np.testing.assert_array_equal(x[:, ::-2].to_numpy(), a[:, ::-2])
    x[1, 2] = 7 - 1j
    a[1, 2] = 7 - 1j
    np.testing.assert_array_equal(x.to_numpy(), a)
    a[0, 0] = 0
    assert int(xp.count_nonzero(xp.asarray(a))) == np.count_nonzero(a)
    np.testing.assert_array_equal(xp.count_nonzero(xp.asarray(a), axis=1).to_numpy(),
                                  np.count_nonzero(a, axis=1))


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("shape,axis", [((7,), None), ((3, 5), 1), ((4, 3, 2), (0, 2)),
                                        ((300,), 0), ((0, 3), 0)])
def test_sum_prod_and_scans(dt, shape, axis):
    a = cplx(shape, dt)
    x = xp.asarray(a)
    tol = {"rtol": RTOL[dt], "atol": RTOL[dt]}
    for f, ref in ((xp.sum, np.sum), (xp.prod, np.prod)):
        got = f(x, axis=axis)
        assert got.dtype == dt
        np.testing.assert_allclose(got.to_numpy(), ref(a.astype(np.complex128), axis=axis),
                                   **tol)
    if len(shape) == 1 or isinstance(axis, int):
        ax = axis or 0
        for f, ref in ((xp.cumulative_sum, np.cumsum), (xp.cumulative_prod, np.cumprod)):
            got = f(x, axis=ax)
            assert got.dtype == dt
            np.testing.assert_allclose(got.to_numpy(), ref(a.astype(np.complex128), axis=ax),
                                       **tol)


@F64
def test_sum_into_complex128():
    """sum's dtype may widen complex64 to complex128 (the standard's dtype argument)."""
    a = cplx((5, 4), "c64")
    got = xp.sum(xp.asarray(a), axis=0, dtype=DTYPES["c128"])
    assert got.dtype == "c128"
    np.testing.assert_allclose(got.to_numpy(), a.astype(np.complex128).sum(0), rtol=1e-12)
    with pytest.raises(wgc.DtypeError, match="wider complex dtype"):
        xp.sum(xp.asarray(a.astype(np.complex128)), dtype=DTYPES["c64"])


@pytest.mark.parametrize("dt", DTS)
def test_products(dt):
    a, b = cplx((2, 3, 4), dt), cplx((4, 5), dt)
    tol = {"rtol": RTOL[dt], "atol": RTOL[dt]}
    got = xp.matmul(xp.asarray(a), xp.asarray(b))
    assert got.dtype == dt
    np.testing.assert_allclose(got.to_numpy(), a @ b, **tol)
    v, w = cplx((3, 6), dt), cplx((6,), dt)
    np.testing.assert_allclose(xp.vecdot(xp.asarray(v), xp.asarray(w)).to_numpy(),
                               np.sum(np.conj(v) * w, axis=-1), **tol)
    np.testing.assert_allclose(xp.tensordot(xp.asarray(a), xp.asarray(b), axes=1).to_numpy(),
                               np.tensordot(a, b, axes=1), **tol)


@F64
def test_mixed_promotion_computes_in_complex128():
    """complex64 with float64 operands are computed in complex128 (the standard's table)."""
    a = cplx((4,), "c64")
    r = rng.standard_normal(4)
    got = xp.multiply(xp.asarray(a), xp.asarray(r))
    assert got.dtype == "c128"
    np.testing.assert_allclose(got.to_numpy(), a.astype(np.complex128) * r, rtol=1e-15)


@pytest.mark.parametrize("dt", DTS)
def test_linalg(dt):
    m = (cplx((2, 4, 4), dt) + 4 * np.eye(4)).astype(DTYPES[dt].numpy)
    x = xp.asarray(m)
    assert x.dtype == dt
    tol = {"rtol": RTOL[dt] * 10, "atol": RTOL[dt] * 10}
    np.testing.assert_allclose(xp.linalg.det(x).to_numpy(), np.linalg.det(m), **tol)
    np.testing.assert_allclose(xp.linalg.inv(x).to_numpy(), np.linalg.inv(m), **tol)
    b = cplx((2, 4, 2), dt)
    np.testing.assert_allclose(xp.linalg.solve(x, xp.asarray(b)).to_numpy(),
                               np.linalg.solve(m, b), **tol)
    h = m @ np.conj(np.swapaxes(m, -1, -2))  # Hermitian positive definite
    np.testing.assert_allclose(xp.linalg.cholesky(xp.asarray(h)).to_numpy(),
                               np.linalg.cholesky(h), **tol)
    np.testing.assert_allclose(xp.linalg.eigvalsh(xp.asarray(h)).to_numpy(),
                               np.linalg.eigvalsh(h), **tol)
    s = xp.linalg.svdvals(x)
    assert s.dtype == DTYPES[dt].part
    np.testing.assert_allclose(s.to_numpy(), np.linalg.svd(m, compute_uv=False), **tol)
    q, r = xp.linalg.qr(x)
    np.testing.assert_allclose((xp.matmul(q, r)).to_numpy(), m, **tol)
    np.testing.assert_allclose(xp.linalg.vector_norm(x, axis=-1).to_numpy(),
                               np.linalg.norm(m, axis=-1), **tol)
    np.testing.assert_allclose(xp.linalg.matrix_norm(x).to_numpy(),
                               np.linalg.norm(m, axis=(-2, -1)), **tol)


@pytest.mark.parametrize("dt", DTS)
def test_refusals(dt):
    x = xp.asarray(cplx((5,), dt))
    with pytest.raises(wgc.DtypeError, match="real-valued"):
        xp.sort(x)
    with pytest.raises(wgc.DtypeError, match="real-valued"):
        xp.max(x)


@pytest.mark.parametrize("dt", DTS)
def test_unique(dt):
    """unique_* of complex: sorted by real part, then imaginary part; ±0 one value (the first
    in x's order stands for both), each nan its own (last); complex128's by ranks."""
    a = np.array([[1 + 2j, 0, -0.0 + 0j, np.nan, 1 + 2j],
                  [3, 1 + 1j, complex(np.nan, 1), 0j, 1 + 2j]], DTYPES[dt].numpy)
    values, indices, inverse, counts = xp.unique_all(xp.asarray(a))
    want = np.array([0, 1 + 1j, 1 + 2j, 3, complex(np.nan, 0), complex(np.nan, 1)])
    np.testing.assert_array_equal(values.to_numpy(), want.astype(DTYPES[dt].numpy))
    np.testing.assert_array_equal(indices.to_numpy(), [1, 6, 0, 5, 3, 7])
    np.testing.assert_array_equal(inverse.to_numpy(), [[2, 0, 0, 4, 2], [3, 1, 5, 0, 2]])
    np.testing.assert_array_equal(counts.to_numpy(), [3, 1, 3, 1, 1, 1])
    b = cplx((40,), dt)
    b[::3] = b[1]
    np.testing.assert_array_equal(xp.unique_values(xp.asarray(b)).to_numpy(),
                                  np.unique(b))  # (numpy's order: the same)
    v, c = xp.unique_counts(xp.asarray(b))
    np.testing.assert_array_equal(c.to_numpy(), np.unique(b, return_counts=True)[1])
    assert xp.unique_values(xp.asarray(b[:0])).shape == (0,)


@F64
@pytest.mark.parametrize("shape,axis", [((8,), -1), ((5, 6), 0), ((3, 7, 4), 1), ((1,), 0)])
def test_complex128_transforms(shape, axis):
    """Every transform of the fft extension in complex128 (float64 for the real ones), to
    float64's accuracy: Stockham passes and Bluestein's algorithm with their twiddles and
    chirps made in float64 on the host."""
    a = cplx(shape, "c128")
    r = rng.standard_normal(shape)
    x, xr = xp.asarray(a), xp.asarray(r)
    tol = {"rtol": 1e-12, "atol": 1e-12}
    for name in ("fft", "ifft"):
        got = getattr(xp.fft, name)(x, axis=axis, norm="ortho")
        assert got.dtype == "c128"
        np.testing.assert_allclose(got.to_numpy(), getattr(np.fft, name)(a, axis=axis,
                                                                         norm="ortho"), **tol)
    np.testing.assert_allclose(xp.fft.fft(x, n=5, axis=axis).to_numpy(),
                               np.fft.fft(a, n=5, axis=axis), **tol)
    for name, arg, ref in (("rfft", xr, r), ("ihfft", xr, r)):
        got = getattr(xp.fft, name)(arg, axis=axis)
        assert got.dtype == "c128"
        np.testing.assert_allclose(got.to_numpy(), getattr(np.fft, name)(ref, axis=axis),
                                   **tol)
    for name, n in (("irfft", 6), ("hfft", 7)):
        got = getattr(xp.fft, name)(x, n=n, axis=axis)
        assert got.dtype == "f64"
        np.testing.assert_allclose(got.to_numpy(), getattr(np.fft, name)(a, n=n, axis=axis),
                                   **tol)
    np.testing.assert_allclose(xp.fft.fftn(x).to_numpy(), np.fft.fftn(a), **tol)
    np.testing.assert_allclose(xp.fft.ifftn(x, axes=(0,)).to_numpy(),
                               np.fft.ifftn(a, axes=(0,)), **tol)
    np.testing.assert_allclose(xp.fft.rfftn(xr).to_numpy(), np.fft.rfftn(r), **tol)
    if shape[-1] > 1:
        np.testing.assert_allclose(xp.fft.irfftn(x).to_numpy(), np.fft.irfftn(a), **tol)


@F64
@pytest.mark.parametrize("n", [4099, 1 << 16])
def test_complex128_transforms_of_any_length(n):
    """Long axes and primes past a workgroup (Bluestein's) transform in complex128: no length
    is refused."""
    a = cplx((n,), "c128")
    x = xp.asarray(a)
    for name in ("fft", "ifft"):
        got = getattr(xp.fft, name)(x)
        assert got.dtype == "c128"
        want = getattr(np.fft, name)(a)
        assert np.abs(got.to_numpy() - want).max() <= 1e-13 * np.abs(want).max()


def test_complex128_refused_where_the_adapter_lacks_float64():
    """Without shader-f64, complex128 is stored but not computed: kernels on it refuse it with
    a DtypeError naming the feature, and the namespace's info does not list it."""
    if wgc.current_device().has("shader-f64"):
        pytest.skip(f"{wgc.current_device().name} has shader-f64 (make test-gl runs this)")
    x = xp.asarray(np.array([1 + 2j, 3j]), dtype=DTYPES["c128"])
    np.testing.assert_array_equal(x.to_numpy(), [1 + 2j, 3j])
    assert "complex128" not in xp.__array_namespace_info__().dtypes()
    for f in (lambda: xp.exp(x), lambda: xp.multiply(x, x), lambda: xp.sum(x),
              lambda: xp.fft.fft(x)):
        with pytest.raises(wgc.DtypeError, match="shader-f64"):
            f().to_numpy()
