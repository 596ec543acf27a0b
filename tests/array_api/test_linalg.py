"""wgcompute.array_api's linear algebra (matmul, tensordot, vecdot, matrix_transpose) and its
linalg extension against numpy.linalg, over f32 and f64, batches, odd and empty sizes and sizes
past one workgroup (64). Tolerances: f32 results to rtol 1e-4 of the result's scale (2e-4 for
the iterative eigh and svd), f64 to 1e-10, on well-conditioned random inputs; integer results
exactly. Factorisations whose signs are free (eigh, svd) are checked by their defining
identities (A·V = V·diag(w), orthonormal columns) and their values against numpy."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.dtypes import DTYPES

# the dtypes these parameters hold need their adapter features (f64, f16, int64)
pytestmark = pytest.mark.computes("dt", "name", "src", "dt1", "dt2")

la = xp.linalg
FLOATS = ("f32", "f64")
INTS = ("s32", "s64", "u32", "u8")


def need(*dts):
    have = wgc.device_info()["features"]
    for dt in dts:
        f = DTYPES[dt].feature
        if f and f not in have:
            pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def npt(dt):
    return DTYPES[dt].numpy


def tol(dt, loose=False):  # f32 also stands for complex64's parts
    return (2e-4 if loose else 1e-4) if dt == "f32" else 1e-10


def close(got, want, dt, loose=False):
    """got (a Buffer) equals want (numpy) to the dtype's tolerance, relative to want's scale."""
    g = got.to_numpy()
    assert g.shape == want.shape, (g.shape, want.shape)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(g, want, rtol=tol(dt, loose), atol=tol(dt, loose) * scale)


def rand(rng, shape, dt):
    return rng.standard_normal(shape).astype(npt(dt))


def crand(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def well_conditioned(rng, shape, dt):
    """Random matrices with a strong diagonal: their condition numbers stay small."""
    a = rng.standard_normal(shape) / np.sqrt(shape[-1])
    return (a + 2 * np.eye(shape[-1])).astype(npt(dt))


def spd(rng, shape, dt):
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) / shape[-1] + np.eye(shape[-1])).astype(npt(dt))


# -- matmul, tensordot, vecdot, matrix_transpose -------------------------------------------------
MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((0, 3), (3, 2)), ((2, 0), (0, 3)),
                 ((70, 65), (65, 3)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("dt", FLOATS + INTS)
@pytest.mark.parametrize("s1,s2", MATMUL_SHAPES)
def test_matmul_against_numpy(dt, s1, s2, rng):
    need(dt)
    if DTYPES[dt].kind == "f":
        a, b = rand(rng, s1, dt), rand(rng, s2, dt)
    else:
        a = rng.integers(0, 7, s1).astype(npt(dt))
        b = rng.integers(0, 7, s2).astype(npt(dt))
    got = xp.matmul(xp.asarray(a), xp.asarray(b))
    if DTYPES[dt].kind == "f":
        close(got, np.matmul(a, b), dt)
    else:
        np.testing.assert_array_equal(got.to_numpy(), np.matmul(a, b))


@pytest.mark.parametrize("dt", ["f32", "s32", "c64"])
def test_products_over_an_empty_axis_of_a_view_are_zeros(dt, rng):
    """A contracted axis of size 0 gives zeros, also for views lying past their base's
    (empty) memory: nothing is bound."""
    stack = xp.asarray(np.zeros((3, 2, 0), npt(dt)))
    other = xp.asarray(np.zeros((3, 0, 4), npt(dt)))
    for i in range(3):
        got = xp.matmul(stack[i], other[i]).to_numpy()
        np.testing.assert_array_equal(got, np.zeros((2, 4), npt(dt)))
        got = xp.tensordot(stack[i], other[i], axes=1).to_numpy()
        np.testing.assert_array_equal(got, np.zeros((2, 4), npt(dt)))


def test_matmul_integers_wrap_as_numpy(rng):
    a = np.array([[200, 100]], np.uint8)
    b = np.array([[3], [7]], np.uint8)
    np.testing.assert_array_equal(xp.matmul(xp.asarray(a), xp.asarray(b)).to_numpy(), a @ b)
    big = np.array([[2**30, 2**30]], np.int32)
    two = np.array([[2], [2]], np.int32)
    np.testing.assert_array_equal(xp.matmul(xp.asarray(big), xp.asarray(two)).to_numpy(),
                                  big @ two)


@pytest.mark.needs("s64", "f64")  # promotes to them
def test_matmul_promotes_and_refuses(rng):
    a32 = xp.asarray(rand(rng, (3, 4), "f32"))
    a64 = xp.asarray(rand(rng, (4, 2), "f64"))
    assert xp.matmul(a32, a64).dtype == "f64"
    with pytest.raises(wgc.ArgumentError, match="x2"):
        xp.matmul(a32, 2.0)
    with pytest.raises(wgc.ShapeError, match="0-dimensional"):
        xp.matmul(xp.asarray(1.0), a32)
    with pytest.raises(wgc.ShapeError, match="contracted dimensions 4 and 3"):
        xp.matmul(a32, a32[:3])
    with pytest.raises(wgc.ShapeError, match="broadcast"):
        xp.matmul(xp.asarray(rand(rng, (2, 3, 4), "f32")), xp.asarray(rand(rng, (3, 4, 2),
                                                                           "f32")))
    with pytest.raises(wgc.DtypeError):
        xp.matmul(a32, xp.asarray(np.ones((4, 2), np.int32)))


@pytest.mark.parametrize("dt", ["f32", "s32"])
@pytest.mark.parametrize("s1,s2,axes", [
    ((3, 4, 5), (4, 5, 2), 2), ((3, 4), (4, 2), 1), ((2, 3), (4,), 0), ((), (3,), 0),
    ((3, 4, 5), (4, 3, 2), ([0, 1], [1, 0])), ((3, 4, 5), (5, 3), ([-1, 0], [0, -1])),
    ((0, 4), (4, 3), 1), ((3, 0), (0, 2), 1)])
def test_tensordot_against_numpy(dt, s1, s2, axes, rng):
    a = rng.integers(-3, 4, s1).astype(npt(dt))
    b = rng.integers(-3, 4, s2).astype(npt(dt))
    got = xp.tensordot(xp.asarray(a), xp.asarray(b), axes=axes)
    np.testing.assert_allclose(got.to_numpy(), np.tensordot(a, b, axes=axes))
    assert got.dtype == dt


def test_tensordot_refuses_bad_axes(rng):
    a = xp.asarray(rand(rng, (3, 4), "f32"))
    with pytest.raises(wgc.ArgumentError, match="negative"):
        xp.tensordot(a, a, axes=-1)
    with pytest.raises(wgc.ShapeError, match="contracted axes must match"):
        xp.tensordot(a, a, axes=1)
    with pytest.raises(wgc.ArgumentError, match="repeats"):
        xp.tensordot(a, a, axes=([0, 0], [0, 1]))


@pytest.mark.parametrize("dt", ["f32", "f64", "s32"])
@pytest.mark.parametrize("s1,s2,axis", [((5,), (5,), -1), ((2, 3, 4), (3, 4), -1),
                                        ((2, 3, 4), (3, 4), -2), ((4, 1), (3, 4, 5), 0),
                                        ((0, 3), (3,), -1), ((70,), (1, 70), -1)])
def test_vecdot_against_numpy(dt, s1, s2, axis, rng):
    need(dt)
    a = rng.integers(-3, 4, s1).astype(npt(dt))
    b = rng.integers(-3, 4, s2).astype(npt(dt))
    if axis == 0:  # an axis of the broadcast shape: x1 (4, 1) lines up with x2's axis 1
        a, b, axis = rng.integers(-3, 4, (4, 5)).astype(npt(dt)), b, -2
    want = np.sum(a * b, axis=axis)
    got = xp.vecdot(xp.asarray(a), xp.asarray(b), axis=axis)
    np.testing.assert_allclose(got.to_numpy(), want)
    assert got.shape == want.shape


def test_vecdot_refuses_mismatched_axis(rng):
    with pytest.raises(wgc.ShapeError, match="contracted axis"):
        xp.vecdot(xp.asarray(rand(rng, (3, 4), "f32")), xp.asarray(rand(rng, (3, 5), "f32")))


@pytest.mark.parametrize("shape", [(2, 3), (4, 1, 5), (0, 3), (3, 70, 65)])
def test_matrix_transpose(shape, rng):
    a = rand(rng, shape, "f32")
    np.testing.assert_array_equal(xp.matrix_transpose(xp.asarray(a)).to_numpy(),
                                  np.swapaxes(a, -1, -2))
    with pytest.raises(wgc.ShapeError, match="two dimensions"):
        xp.matrix_transpose(xp.asarray(np.ones(3, np.float32)))


# -- diagonal, trace, outer, cross ---------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 4), (2, 5, 3), (0, 4), (4, 0), (70, 70)])
@pytest.mark.parametrize("offset", [0, 1, -2, 9])
def test_diagonal_and_trace(shape, offset, rng):
    a = rand(rng, shape, "f32")
    got = la.diagonal(xp.asarray(a), offset=offset)
    np.testing.assert_array_equal(got.to_numpy(), np.diagonal(a, offset, -2, -1))
    close(la.trace(xp.asarray(a), offset=offset), np.trace(a, offset, -2, -1).astype(
        np.float32), "f32")


@pytest.mark.needs("s64", "f64")
def test_trace_dtypes(rng):
    u = rng.integers(0, 200, (3, 3)).astype(np.uint8)
    t = la.trace(xp.asarray(u))
    assert t.dtype == "u32" and t.to_numpy() == np.trace(u.astype(np.uint32))
    i = rng.integers(-9, 9, (2, 4, 4)).astype(np.int32)
    np.testing.assert_array_equal(la.trace(xp.asarray(i), dtype=xp.int64).to_numpy(),
                                  np.trace(i, axis1=-2, axis2=-1))
    assert la.trace(xp.asarray(i), dtype=xp.int64).dtype == "s64"


@pytest.mark.parametrize("dt", ["f32", "s32", "u8"])
def test_outer(dt, rng):
    a = rng.integers(0, 9, 5).astype(npt(dt))
    b = rng.integers(0, 9, 70).astype(npt(dt))
    np.testing.assert_array_equal(la.outer(xp.asarray(a), xp.asarray(b)).to_numpy(),
                                  np.outer(a, b))
    with pytest.raises(wgc.ShapeError, match="one-dimensional"):
        la.outer(xp.asarray(a.reshape(5, 1)), xp.asarray(b))


@pytest.mark.parametrize("dt", FLOATS)
def test_outer_is_the_exact_elementwise_product(dt):
    """-0.0, inf and nan as x1[i] * x2[j] gives them (not added to a +0.0 sum)."""
    need(dt)
    a = np.array([-0.0, 1.0, np.inf, 3.0], npt(dt))
    b = np.array([1.0, -0.0, np.nan, 1e-30], npt(dt))
    got = la.outer(xp.asarray(a), xp.asarray(b)).to_numpy()
    with np.errstate(invalid="ignore"):
        want = np.outer(a, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dt", ["f32", "f64", "s32"])
@pytest.mark.parametrize("s1,s2,axis", [((3,), (3,), -1), ((2, 3), (4, 1, 3), -1),
                                        ((3, 5), (3, 5), -2), ((2, 3, 1), (1, 3, 4), -2)])
def test_cross(dt, s1, s2, axis, rng):
    need(dt)
    a = rng.integers(-5, 5, s1).astype(npt(dt))
    b = rng.integers(-5, 5, s2).astype(npt(dt))
    got = la.cross(xp.asarray(a), xp.asarray(b), axis=axis)
    np.testing.assert_array_equal(got.to_numpy(), np.cross(a, b, axis=axis))


def test_cross_refuses():
    a = xp.asarray(np.ones((2, 4), np.float32))
    with pytest.raises(wgc.ShapeError, match="size 3"):
        la.cross(a, a)
    with pytest.raises(wgc.ArgumentError, match="negative"):
        la.cross(a, a, axis=0)


# -- norms ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("ord", [2, 1, np.inf, -np.inf, 0, 3, 0.5, -1])
@pytest.mark.parametrize("axis", [None, 1, -1, (0, 2)])
def test_vector_norm(dt, ord, axis, rng):
    need(dt)
    x = rand(rng, (3, 70, 5), dt)
    x[0, 0, 0] = 0
    if dt == "f64" and ord not in (2, 1, np.inf, -np.inf, 0):
        with pytest.raises(wgc.DtypeError, match="float32"):
            la.vector_norm(xp.asarray(x), axis=axis, ord=ord)
        return
    for keepdims in (False, True):
        axes = tuple(range(3)) if axis is None else axis if isinstance(axis, tuple) else (axis,)
        axes = tuple(a % 3 for a in axes)
        moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(moved.shape[:3 - len(axes)] + (-1,))
        with np.errstate(divide="ignore"):  # numpy's own 1 / 0 for negative ord
            want = np.linalg.norm(flat, ord=ord, axis=-1)
        if keepdims:
            want = np.expand_dims(want, axes)
        got = la.vector_norm(xp.asarray(x), axis=axis, ord=ord, keepdims=keepdims)
        close(got, want.astype(npt(dt)), dt)


def test_vector_norm_nan_and_refusals():
    x = np.array([1.0, np.nan, -3.0], np.float32)
    for ord in (np.inf, -np.inf, 2, 1):
        assert np.isnan(la.vector_norm(xp.asarray(x), ord=ord).to_numpy())
    with pytest.raises(wgc.DtypeError, match="floating"):
        la.vector_norm(xp.asarray(np.ones(3, np.int32)))
    with pytest.raises(wgc.ArgumentError, match="ord"):
        la.vector_norm(xp.asarray(x), ord="fro")


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm(dt, ord, rng):
    need(dt)
    x = rand(rng, (2, 5, 4), dt)
    want = np.linalg.norm(x, ord=ord, axis=(-2, -1))
    close(la.matrix_norm(xp.asarray(x), ord=ord), want, dt, loose=True)
    assert la.matrix_norm(xp.asarray(x), ord=ord, keepdims=True).shape == (2, 1, 1)


# -- factorisations ------------------------------------------------------------------------------
SQUARE = [(1, 1), (5, 5), (3, 4, 4), (64, 64), (2, 70, 70), (0, 3, 3), (2, 0, 0)]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_cholesky(dt, shape, rng):
    need(dt)
    a = spd(rng, shape, dt) if shape[-1] else np.zeros(shape, npt(dt))
    close(la.cholesky(xp.asarray(a)), np.linalg.cholesky(a), dt)
    close(la.cholesky(xp.asarray(a), upper=True),
          np.swapaxes(np.linalg.cholesky(a), -1, -2), dt)


def test_cholesky_of_a_matrix_not_positive_definite_is_nan(rng):
    a = np.stack([spd(rng, (4, 4), "f32"), -np.eye(4, dtype=np.float32)])
    got = la.cholesky(xp.asarray(a)).to_numpy()
    close(xp.asarray(got[0]), np.linalg.cholesky(a[0]), "f32")
    assert np.isnan(got[1]).all()


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_det_slogdet_inv(dt, shape, rng):
    need(dt)
    a = well_conditioned(rng, shape, dt) if shape[-1] else np.zeros(shape, npt(dt))
    sign, logdet = np.linalg.slogdet(a)
    got = la.slogdet(xp.asarray(a))
    np.testing.assert_array_equal(got.sign.to_numpy(), sign)
    close(got.logabsdet, logdet.astype(npt(dt)), dt)
    close(la.det(xp.asarray(a)), np.linalg.det(a).astype(npt(dt)), dt)
    close(la.inv(xp.asarray(a)), np.linalg.inv(a), dt)


def test_singular_matrices():
    a = np.array([[[1, 2], [2, 4]], [[2, 0], [0, 3]]], np.float32)
    assert la.det(xp.asarray(a)).to_numpy().tolist() == [0.0, 6.0]
    s = la.slogdet(xp.asarray(a))
    assert s.sign.to_numpy().tolist() == [0.0, 1.0]
    assert s.logabsdet.to_numpy()[0] == -np.inf
    inv = la.inv(xp.asarray(a)).to_numpy()
    assert np.isnan(inv[0]).all() and np.allclose(inv[1], np.linalg.inv(a[1]))
    x = la.solve(xp.asarray(a), xp.asarray(np.ones((2, 2, 1), np.float32))).to_numpy()
    assert np.isnan(x[0]).all() and np.allclose(x[1], np.linalg.solve(a[1], np.ones((2, 1))))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("n", [64, 70])
def test_singular_matrices_in_workgroup_memory_and_in_the_workspace(dt, n, rng):
    """n = 64 (f32) factors in workgroup memory in one launch; 70 in the workspace, in
    slices: both give nan, 0, -inf for a zero pivot."""
    need(dt)
    a = well_conditioned(rng, (2, n, n), dt)
    a[0, :, 5] = 0
    assert la.det(xp.asarray(a)).to_numpy()[0] == 0
    s = la.slogdet(xp.asarray(a))
    assert s.sign.to_numpy()[0] == 0 and s.logabsdet.to_numpy()[0] == -np.inf
    close(s.logabsdet[1], np.linalg.slogdet(a[1])[1].astype(npt(dt)), dt)
    inv = la.inv(xp.asarray(a)).to_numpy()
    assert np.isnan(inv[0]).all()
    close(xp.asarray(inv[1]), np.linalg.inv(a[1]), dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("s1,s2", [((5, 5), (5, 3)), ((5, 5), (5,)), ((3, 4, 4), (4, 2)),
                                   ((2, 1, 6, 6), (3, 6, 1)), ((64, 64), (64, 64)),
                                   ((4, 64, 64), (64,)), ((70, 70), (70, 2)),
                                   ((0, 4, 4), (4, 1)), ((3, 3), (3, 0))])
def test_solve(dt, s1, s2, rng):
    need(dt)
    a = well_conditioned(rng, s1, dt)
    b = rand(rng, s2, dt)
    if len(s2) == 1:
        want = np.linalg.solve(a, b[:, None])[..., 0]
    else:
        want = np.linalg.solve(a, b)
    close(la.solve(xp.asarray(a), xp.asarray(b)), want, dt)


def test_factorisations_refuse_what_they_cannot_take(rng):
    with pytest.raises(wgc.ShapeError, match="square"):
        la.inv(xp.asarray(rand(rng, (3, 4), "f32")))
    with pytest.raises(wgc.DtypeError, match="floating"):
        la.det(xp.asarray(np.eye(3, dtype=np.int32)))
    with pytest.raises(wgc.ShapeError, match="x2"):
        la.solve(xp.asarray(np.eye(3, dtype=np.float32)), xp.asarray(np.ones(4, np.float32)))
    with pytest.raises(wgc.ArgumentError, match="mode"):
        la.qr(xp.asarray(np.eye(3, dtype=np.float32)), mode="r")


# -- decompositions ------------------------------------------------------------------------------
RECT = [(1, 1), (4, 4), (6, 3), (3, 6), (2, 5, 5), (70, 10), (10, 70), (0, 3), (3, 0),
        (2, 65, 65)]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", RECT)
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_matches_lapack(dt, shape, mode, rng):
    """Householder with LAPACK's signs: Q and R equal numpy's (geqrf + orgqr)."""
    need(dt)
    a = rand(rng, shape, dt)
    q, r = la.qr(xp.asarray(a), mode=mode)
    eq, er = np.linalg.qr(a, mode=mode)
    close(q, eq, dt)
    close(r, er, dt)
    r *= 2  # results are arrays of their own (not views of a workspace): in place works
    close(r, 2 * er, dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 7, 7), (64, 64), (70, 70),
                                   (0, 0), (2, 0, 0)])
def test_eigh(dt, shape, rng):
    need(dt)
    a = rand(rng, shape, dt)
    a = (a + np.swapaxes(a, -1, -2)) / 2
    w, v = la.eigh(xp.asarray(a))
    close(w, np.linalg.eigvalsh(a), dt, loose=True)
    close(la.eigvalsh(xp.asarray(a)), np.linalg.eigvalsh(a), dt, loose=True)
    w, v = w.to_numpy(), v.to_numpy()
    n = shape[-1]
    scale = max(1.0, float(np.abs(a).max(initial=0)))
    assert np.abs(a @ v - v * w[..., None, :]).max(initial=0) <= tol(dt, True) * scale * n
    assert np.abs(np.swapaxes(v, -1, -2) @ v - np.eye(n)).max(initial=0) <= tol(dt, True) * n


def test_eigh_reads_the_lower_triangle_and_repeated_eigenvalues():
    a = np.array([[2.0, 99.0, 99.0], [0.0, 2.0, 99.0], [0.0, 0.0, 2.0]], np.float32)
    w, v = la.eigh(xp.asarray(a))
    np.testing.assert_allclose(w.to_numpy(), [2, 2, 2])
    np.testing.assert_allclose(np.abs(v.to_numpy()), np.eye(3), atol=1e-6)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", RECT + [(2, 64, 64)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(dt, shape, full, rng):
    need(dt)
    a = rand(rng, shape, dt)
    if shape == (4, 4):
        a[:, 3] = a[:, 0]  # rank 3: U's last column completes the basis
    u, s, vh = la.svd(xp.asarray(a), full_matrices=full)
    eu, es, evh = np.linalg.svd(a, full_matrices=full)
    close(s, es, dt, loose=True)
    close(la.svdvals(xp.asarray(a)), es, dt, loose=True)
    u, s, vh = u.to_numpy(), s.to_numpy(), vh.to_numpy()
    assert u.shape == eu.shape and vh.shape == evh.shape
    k = min(shape[-2:])
    scale = max(1.0, float(np.abs(a).max(initial=0)))
    t = tol(dt, True) * max(shape[-2:])
    assert np.abs((u[..., :k] * s[..., None, :]) @ vh[..., :k, :] - a).max(initial=0) <= \
        t * scale
    assert np.abs(np.swapaxes(u, -1, -2) @ u - np.eye(u.shape[-1])).max(initial=0) <= t
    assert np.abs(vh @ np.swapaxes(vh, -1, -2) - np.eye(vh.shape[-2])).max(initial=0) <= t


@pytest.mark.parametrize("dt", FLOATS)
def test_matrix_rank_and_pinv(dt, rng):
    need(dt)
    a = rand(rng, (3, 6, 4), dt)
    a[0, :, 3] = a[0, :, 0]
    a[1] = 0
    np.testing.assert_array_equal(la.matrix_rank(xp.asarray(a)).to_numpy(),
                                  np.linalg.matrix_rank(a))
    assert la.matrix_rank(xp.asarray(a)).dtype == "s32"
    rtol = np.array([0.1, 0.5, 0.9], npt(dt))
    np.testing.assert_array_equal(
        la.matrix_rank(xp.asarray(a), rtol=xp.asarray(rtol)).to_numpy(),
        np.linalg.matrix_rank(a, rtol=rtol))
    close(la.pinv(xp.asarray(a)), np.linalg.pinv(a), dt, loose=True)
    b = np.swapaxes(a, -1, -2).copy()
    close(la.pinv(xp.asarray(b), rtol=0.3), np.linalg.pinv(b, rtol=0.3), dt, loose=True)


@pytest.mark.parametrize("dt", ["f32", "f64", "s32"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, -1, -3])
def test_matrix_power(dt, n, rng):
    need(dt)
    if DTYPES[dt].kind == "f":
        a = well_conditioned(rng, (2, 4, 4), dt)
        close(la.matrix_power(xp.asarray(a), n), np.linalg.matrix_power(a, n), dt)
        return
    a = rng.integers(-3, 4, (4, 4)).astype(np.int32)
    if n < 0:
        with pytest.raises(wgc.DtypeError):
            la.matrix_power(xp.asarray(a), n)
        return
    np.testing.assert_array_equal(la.matrix_power(xp.asarray(a), n).to_numpy(),
                                  np.linalg.matrix_power(a, n))


def test_the_namespace_lists_the_extension():
    for name in ("cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
                 "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
                 "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
                 "vector_norm"):
        assert name in la.__all__ and callable(getattr(la, name))
    for name in ("matmul", "tensordot", "vecdot", "matrix_transpose"):
        assert name in xp.__all__ and getattr(la, name) is getattr(xp, name)


def test_complex64_products_and_norms(rng):
    """complex64 through matmul, tensordot, vecdot (x1 conjugated), outer, trace, diagonal,
    matrix_power and the norms of |x|; f32 tolerances."""
    a, b = crand(rng, (2, 3, 4)), crand(rng, (4, 5))
    close(xp.matmul(xp.asarray(a), xp.asarray(b)), a @ b, "f32")
    close(xp.tensordot(xp.asarray(a), xp.asarray(b), axes=1), np.tensordot(a, b, axes=1),
          "f32")
    x, y = crand(rng, (3, 70)), crand(rng, (2, 3, 70))
    close(xp.vecdot(xp.asarray(x), xp.asarray(y)), np.sum(np.conj(x) * y, axis=-1), "f32")
    close(la.outer(xp.asarray(x[0]), xp.asarray(x[1])), np.outer(x[0], x[1]), "f32")
    close(la.trace(xp.asarray(a), offset=1), np.trace(a, 1, -2, -1), "f32")
    np.testing.assert_array_equal(la.diagonal(xp.asarray(a), offset=-1).to_numpy(),
                                  np.diagonal(a, -1, -2, -1))
    sq = crand(rng, (2, 3, 3))
    for n in (0, 1, 3):
        close(la.matrix_power(xp.asarray(sq), n), np.linalg.matrix_power(sq, n), "f32")
    close(la.vector_norm(xp.asarray(a), axis=-1), np.linalg.norm(a, axis=-1), "f32")
    for ord in ("fro", 1, np.inf):
        close(la.matrix_norm(xp.asarray(a), ord=ord), np.linalg.norm(a, ord=ord, axis=(-2, -1)),
              "f32")


@pytest.mark.parametrize("n", [1, 3, 64, 70])
def test_complex64_lu(n, rng):
    """solve, inv, det and slogdet of complex64 matrices: in workgroup memory (n ≤ 64) and in
    the workspace (70); a singular one gives nan, 0, sign 0 and -inf."""
    a = (crand(rng, (2, n, n)) / np.sqrt(n) + 2 * np.eye(n)).astype(np.complex64)
    a[1, :, 0] = 0
    b = crand(rng, (2, n, 3))
    x = la.solve(xp.asarray(a), xp.asarray(b)).to_numpy()
    close(xp.asarray(x[0]), np.linalg.solve(a[0], b[0]), "f32")
    assert np.isnan(x[1]).all()
    inv = la.inv(xp.asarray(a)).to_numpy()
    close(xp.asarray(inv[0]), np.linalg.inv(a[0]), "f32")
    assert np.isnan(inv[1]).all()
    det = la.det(xp.asarray(a)).to_numpy()
    np.testing.assert_allclose(det[0], np.linalg.det(a[0]), rtol=1e-4)
    assert det[1] == 0
    sign, logabs = la.slogdet(xp.asarray(a))
    assert sign.dtype == "c64" and logabs.dtype == "f32" and logabs.shape == (2,)
    es, el = np.linalg.slogdet(a[0])
    np.testing.assert_allclose(sign.to_numpy()[0], es, atol=1e-5)
    np.testing.assert_allclose(logabs.to_numpy()[0], el, atol=1e-4)
    assert sign.to_numpy()[1] == 0 and logabs.to_numpy()[1] == -np.inf


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 6), (4, 4), (64, 64)])
def test_complex64_svd_and_what_builds_on_it(shape, rng):
    """Complex one-sided Jacobi: S (real) against numpy, U·diag(S)·Vh = x with unitary U and
    Vh (full and reduced), and svdvals, matrix_rank, pinv and the 2 and nuclear norms; f32
    tolerances (2e-4: iterative)."""
    a = crand(rng, shape)
    a[..., -1] = a[..., 0]  # rank-deficient: U's last column completes the basis
    es = np.linalg.svd(a, compute_uv=False)
    for full in (False, True):
        u, s, vh = la.svd(xp.asarray(a), full_matrices=full)
        assert s.dtype == "f32"
        close(s, es, "f32", loose=True)
        u, s, vh = u.to_numpy(), s.to_numpy(), vh.to_numpy()
        k = min(shape[-2:])
        t = 2e-4 * max(shape[-2:])
        assert np.abs((u[..., :k] * s[..., None, :]) @ vh[..., :k, :] - a).max() <= t * 4
        assert np.abs(np.conj(np.swapaxes(u, -1, -2)) @ u - np.eye(u.shape[-1])).max() <= t
        assert np.abs(vh @ np.conj(np.swapaxes(vh, -1, -2)) - np.eye(vh.shape[-2])).max() <= t
    close(la.svdvals(xp.asarray(a)), es, "f32", loose=True)
    np.testing.assert_array_equal(la.matrix_rank(xp.asarray(a)).to_numpy(),
                                  np.linalg.matrix_rank(a))
    close(la.pinv(xp.asarray(a)), np.linalg.pinv(a), "f32", loose=True)
    close(la.pinv(xp.asarray(a), rtol=0.3), np.linalg.pinv(a, rtol=0.3), "f32", loose=True)
    for ord in (2, -2, "nuc"):
        close(la.matrix_norm(xp.asarray(a), ord=ord),
              np.linalg.norm(a, ord=ord, axis=(-2, -1)).astype(np.float32), "f32", loose=True)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 70])
def test_complex64_eigh(n, rng):
    """Hermitian Jacobi: real eigenvalues against numpy, H·V = V·diag(w) with unitary V; only
    the lower triangle is read (the diagonal's real part)."""
    b = crand(rng, (2, n, n))
    h = ((b + np.conj(np.swapaxes(b, -1, -2))) / 2).astype(np.complex64)
    junk = np.tril(h) + np.triu(crand(rng, (n, n)), 1)  # only the lower triangle counts
    w, v = la.eigh(xp.asarray(junk))
    assert w.dtype == "f32"
    close(w, np.linalg.eigvalsh(h).astype(np.float32), "f32", loose=True)
    close(la.eigvalsh(xp.asarray(h)), np.linalg.eigvalsh(h).astype(np.float32), "f32",
          loose=True)
    w, v = w.to_numpy(), v.to_numpy()
    scale = max(1.0, float(np.abs(h).max()))
    assert np.abs(h @ v - v * w[..., None, :]).max() <= 2e-4 * n * scale
    assert np.abs(np.conj(np.swapaxes(v, -1, -2)) @ v - np.eye(n)).max() <= 2e-4 * n


def test_complex64_views_that_do_not_start_aligned(rng):
    """Matrices sliced out of a stack start anywhere in its memory: complex64 ones are
    copied before a kernel binds them (qr, inv, cholesky, matmul, trace of an empty
    diagonal)."""
    a = (crand(rng, (3, 3, 3)) + 3 * np.eye(3)).astype(np.complex64)
    stack = xp.asarray(a)
    for i in range(3):
        close(la.qr(stack[i]).R, np.linalg.qr(a[i])[1], "f32")
        close(la.inv(stack[i]), np.linalg.inv(a[i]), "f32")
        close(xp.matmul(stack[i], stack[i]), a[i] @ a[i], "f32")
        h = (a[i] @ np.conj(a[i].T)).astype(np.complex64)
        close(la.cholesky(xp.asarray(np.stack([h, h]))[1]), np.linalg.cholesky(h), "f32")
        np.testing.assert_array_equal(xp.matrix_transpose(stack[i]).to_numpy(), a[i].T)
    close(la.trace(stack, offset=5), np.zeros(3, np.complex64), "f32")


def test_complex64_cross_is_refused(rng):
    z = xp.asarray(crand(rng, (3, 3)))
    with pytest.raises(wgc.DtypeError, match="complex64"):
        la.cross(z, z)
