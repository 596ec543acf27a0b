"""linalg.svd and svdvals of large matrices (n ≥ PARALLEL_SVD_N columns), which run as
parallel one-sided Jacobi over the whole GPU (a workgroup per column pair, a dispatch per
round), against numpy.linalg: singular values to rtol 1e-4 of the largest (f32; 1e-10
f64), U·diag(S)·Vh = x, orthonormal U and Vh, on random, rank-deficient, ill-conditioned
and wide (m < n) matrices; the refusal when the sweeps do not converge."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.array_api._linalg_large import svd_parallel
from wgcompute.dtypes import DTYPES
from wgcompute.kernels.linalg.svd_parallel import PARALLEL_SVD_N

# sizes past one workgroup (large matrices, the parallel paths): slow on a CPU adapter
pytestmark = [pytest.mark.computes("dt"), pytest.mark.slow]

la = xp.linalg


def need(dt):
    f = DTYPES[dt].feature
    if f and f not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {f} for {dt}")


def rtol(dt):
    return 1e-4 if dt == "f32" else 1e-10


def check_svd(a, dt, full=False):
    """svd and svdvals of a against numpy's (float64) singular values, and the identities."""
    x = xp.asarray(a)
    es = np.linalg.svd(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                       compute_uv=False)
    u, s, vh = la.svd(x, full_matrices=full)
    u, s, vh = u.to_numpy(), s.to_numpy(), vh.to_numpy()
    m, n = a.shape
    k = min(m, n)
    assert u.shape == ((m, m) if full else (m, k)) and vh.shape == ((n, n) if full else (k, n))
    assert s.shape == (k,) and s.dtype == a.real.dtype
    top = es[0]
    assert np.abs(s - es).max() <= rtol(dt) * top
    assert np.all(np.diff(s) <= 0)
    assert np.abs(la.svdvals(x).to_numpy() - es).max() <= rtol(dt) * top
    t = rtol(dt) * max(m, n) ** 0.5
    assert np.abs((u[:, :k] * s) @ vh[:k] - a).max() <= t * top
    assert np.abs(u.conj().T @ u - np.eye(u.shape[1])).max() <= t
    assert np.abs(vh @ vh.conj().T - np.eye(vh.shape[0])).max() <= t


def uses_parallel(dt):
    """Whether the parallel program is compiled on the device (for this dtype)."""
    keys = wgc.current_device().pipelines
    return any(k.kernel == "linalg_svd_parallel" and k.dtypes == (dt,) for k in list(keys))


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_tall_matrix_runs_over_the_gpu(dt, rng):
    need(dt)
    a = rng.standard_normal((512, PARALLEL_SVD_N)).astype(DTYPES[dt].numpy)
    check_svd(a, dt)
    assert uses_parallel(dt)


def test_wide_square_and_full_matrices(rng):
    check_svd(rng.standard_normal((130, 257)).astype(np.float32), "f32")  # m < n: xᵀ
    check_svd(rng.standard_normal((200, 200)).astype(np.float32), "f32")
    # U = Q·diag(U_R, I): its 64 columns past n are Q's (R's SVD, then the reflectors)
    a = rng.standard_normal((192, 128)).astype(np.float32)
    a[:, 3] = 0  # and a zero singular value: U_R's column completed in R's space
    check_svd(a, "f32", full=True)
    keys = wgc.current_device().pipelines
    assert any(k.kernel == "linalg_qr_apply" for k in list(keys))


def test_complex64_through_qr(rng):
    a = (rng.standard_normal((300, 128)) + 1j * rng.standard_normal((300, 128)))
    check_svd(a.astype(np.complex64), "f32")


def test_rank_deficient_and_ill_conditioned(rng):
    # rank 40, and two exactly zero columns: zero singular values, U completed there
    a = (rng.standard_normal((240, 40)) @ rng.standard_normal((40, 130))).astype(np.float32)
    a[:, [7, 90]] = 0
    check_svd(a, "f32")
    assert np.sum(la.svdvals(xp.asarray(a)).to_numpy() > 1e-4 * np.abs(a).max()) == 40
    # singular values from 1 down to 1e-6
    q1, _ = np.linalg.qr(rng.standard_normal((256, 128)))
    q2, _ = np.linalg.qr(rng.standard_normal((128, 128)))
    check_svd(((q1 * np.logspace(0, -6, 128)) @ q2).astype(np.float32), "f32")


@pytest.mark.parametrize("dt", ["f32", "f64", "c64"])
def test_singular_values_of_tall_stacks_go_through_qr(dt, rng):
    """svdvals of m ≥ 2n matrices: those of R of their QR (linalg_qr_r), a stack of two with
    a zero column (and, f32, wide ones: transposed); matrix_rank builds on them."""
    need(dt)
    shape = (2, 260, 128)
    a = rng.standard_normal(shape)
    if dt == "c64":
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype(DTYPES[dt].numpy)
    a[1, :, 5] = 0
    real = "f32" if dt == "c64" else dt
    for x in (a, np.swapaxes(a, -1, -2).copy())[:2 if dt == "f32" else 1]:
        es = np.linalg.svd(x.astype(np.complex128 if dt == "c64" else np.float64),
                           compute_uv=False)
        got = la.svdvals(xp.asarray(x)).to_numpy()
        assert got.shape == es.shape and got.dtype == DTYPES[real].numpy
        assert np.abs(got - es).max() <= rtol(real) * es.max()
    if dt == "f32":
        np.testing.assert_array_equal(la.matrix_rank(xp.asarray(a)).to_numpy(), [128, 127])
    keys = wgc.current_device().pipelines
    assert any(k.kernel == "linalg_qr_r" and k.dtypes == (dt,) for k in list(keys))


def test_steps_coded_in_the_grid_or_in_the_uniform(rng, monkeypatch):
    """A launch codes its step (round, column) in its count of workgroups where one row of
    the grid has room (a GPU: all launches alike, one bind group for them), else in its
    uniform (a CPU adapter: a bind group each): both give the same results."""
    from wgcompute.kernels.linalg import svd_parallel as sp

    a = rng.standard_normal((260, 128)).astype(np.float32)
    dev = wgc.current_device()
    got = {}
    for room in ("none", "limit"):
        monkeypatch.setattr(sp, "grid_room", (lambda d: 0) if room == "none" else
                            (lambda d: d.limit("max-compute-workgroups-per-dimension")))
        made = dev.stats["bind_groups_created"]
        got[room] = [la.svdvals(xp.asarray(a)).to_numpy(),
                     la.svd(xp.asarray(a), full_matrices=True).U.to_numpy()]
        got[room + " bind groups"] = dev.stats["bind_groups_created"] - made
    assert got["none bind groups"] > 3 * 128 > 30 > got["limit bind groups"]
    np.testing.assert_allclose(got["limit"][0], got["none"][0], rtol=1e-5,
                               atol=1e-5 * got["none"][0][0])
    np.testing.assert_allclose(np.abs(got["limit"][1]), np.abs(got["none"][1]), atol=1e-4)
    es = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert np.abs(got["limit"][0] - es).max() <= 1e-4 * es[0]


@pytest.mark.parametrize("wg", [128, 256])
def test_larger_workgroups(wg, rng, monkeypatch):
    """The programs' workgroups grow with m (64 to 256 invocations; rows kept in registers
    up to 16 each, or not): the larger sizes too, on matrices of 260 rows, both paths."""
    from wgcompute.kernels.linalg import svd_parallel as sp

    monkeypatch.setattr(sp, "group_size", lambda m, gpu=True: wg)
    monkeypatch.setattr(sp, "HELD_MAX", 16 if wg == 256 else 0)
    check_svd(rng.standard_normal((260, 130)).astype(np.float32), "f32")  # direct
    a = rng.standard_normal((260, 128)).astype(np.float32)
    es = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert np.abs(la.svdvals(xp.asarray(a)).to_numpy() - es).max() <= 1e-4 * es[0]  # QR


def test_nan_makes_every_singular_value_nan(rng):
    a = rng.standard_normal((160, 128)).astype(np.float32)
    a[5, 9] = np.nan
    assert np.isnan(la.svdvals(xp.asarray(a)).to_numpy()).all()
    _, s, vh = la.svd(xp.asarray(a), full_matrices=False)
    assert np.isnan(s.to_numpy()).all() and np.isnan(vh.to_numpy()).all()


def test_sweeps_that_do_not_converge_are_refused(rng):
    s = xp.asarray(rng.standard_normal((1, 256, PARALLEL_SVD_N)).astype(np.float32))
    with pytest.raises(wgc.errors.ConvergenceError, match="did not converge in 1 sweeps"):
        svd_parallel("svd", s, False, True, sweeps=1)


@pytest.mark.slow
def test_a_bigger_matrix(rng):
    check_svd(rng.standard_normal((1024, 256)).astype(np.float32), "f32")


# -- batched solve of small matrices: lu_rows.wgsl (subgroups) and lu_small.wgsl -------------
def lu_program_used(rows: bool):
    keys = wgc.current_device().pipelines
    return any(k.kernel == "linalg_lu" and dict(k.constants).get("ROWS") is rows
               for k in list(keys))


@pytest.mark.parametrize("program", ["rows", "scan"])
@pytest.mark.parametrize("dt", ["f32", "c64"])
def test_batched_solve_inv_det(program, dt, rng, monkeypatch):
    from wgcompute.kernels.linalg import factor

    if program == "rows" and not wgc.current_device().has("subgroup"):
        pytest.skip("the adapter has no subgroups")
    monkeypatch.setattr(factor, "SMALL_LU", program)
    for n, bt in ((1, 5), (5, 130), (33, 40), (64, 70)):
        a = rng.standard_normal((bt, n, n)) / np.sqrt(n) + 3 * np.eye(n)
        if dt == "c64":
            a = a + 1j * rng.standard_normal((bt, n, n)) / np.sqrt(n)
        a = a.astype(DTYPES[dt].numpy)
        a[0] = a[0][::-1]  # a pivot in every column: the reversed rows
        if n > 1:
            a[1, 0, 0] = 0  # a zero on the diagonal
            a[2, :, 1] = 0  # singular: the second pivot is exactly zero
        b = rng.standard_normal((bt, n, 2)).astype(DTYPES[dt].numpy)
        x, inv = la.solve(xp.asarray(a), xp.asarray(b)), la.inv(xp.asarray(a))
        x, inv = x.to_numpy(), inv.to_numpy()
        ok = slice(3, None) if n > 1 else slice(None)
        np.testing.assert_allclose(x[ok], np.linalg.solve(a[ok], b[ok]), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(inv[ok], np.linalg.inv(a[ok]), rtol=1e-4, atol=1e-4)
        if n > 1:
            np.testing.assert_allclose(x[:2], np.linalg.solve(a[:2], b[:2]), atol=1e-4)
            assert np.isnan(x[2]).all() and np.isnan(inv[2]).all()
        sign, logabs = la.slogdet(xp.asarray(a))
        es, el = np.linalg.slogdet(a.astype(np.complex128 if dt == "c64" else np.float64))
        keep = [i for i in range(bt) if i != 2 or n == 1]  # rounding decides numpy's sign
        np.testing.assert_allclose(sign.to_numpy()[keep], es[keep], atol=1e-4)
        np.testing.assert_allclose(logabs.to_numpy()[keep], el[keep], rtol=1e-4, atol=1e-4)
        if n > 1:
            assert sign.to_numpy()[2] == 0 and logabs.to_numpy()[2] == -np.inf
    assert lu_program_used(program == "rows")


def test_permutation_determinants(rng):
    """The sign of LU's row order: permutation matrices have det ±1 exactly."""
    perms = np.stack([np.eye(40, dtype=np.float32)[rng.permutation(40)] for _ in range(50)])
    want = np.linalg.det(perms.astype(np.float64))
    np.testing.assert_array_equal(la.det(xp.asarray(perms)).to_numpy(), want)
