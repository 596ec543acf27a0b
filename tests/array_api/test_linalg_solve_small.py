"""linalg.solve, inv, det and slogdet of batches of small matrices (n ≤ 64), which factor in one
launch: lu_rows.wgsl (each row in an invocation's registers, several matrices a workgroup;
float32 and complex64) or lu_small.wgsl (workgroup memory), against numpy.linalg in float64 /
complex128: results to rtol 1e-4 of their scale (times the condition number for nearly
singular matrices), over sizes that fill a workgroup's rows or not and batches that are not a
multiple of the matrices a workgroup holds."""

import numpy as np
import pytest

import wgcompute as wgc
import wgcompute.array_api as xp
from wgcompute.kernels.linalg import factor

la = xp.linalg
NP = {"f32": np.float32, "c64": np.complex64}
WIDE = {"f32": np.float64, "c64": np.complex128}


def matrices(rng, dt, bt, n, k=None):
    """bt well-conditioned (n, n) matrices (and (n, k) right-hand sides) of dtype dt."""
    a = rng.standard_normal((bt, n, n)) / np.sqrt(n) + 3 * np.eye(n)
    b = rng.standard_normal((bt, n, k or 1))
    if dt == "c64":
        a = a + 1j * rng.standard_normal((bt, n, n)) / np.sqrt(n)
        b = b + 1j * rng.standard_normal(b.shape)
    return a.astype(NP[dt]), b.astype(NP[dt])


def close(got, want, cond=1.0):
    got = got.to_numpy() if hasattr(got, "to_numpy") else got
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=1e-4 * cond, atol=1e-4 * cond * scale)


def buckets(dt, n, k):
    """lu_rows.wgsl's NMAX and KMAX for n rows and k columns of X: powers of two, at least a
    vector (4 float32, 2 complex64)."""
    per = 2 if dt == "c64" else 4
    return tuple(max(per, 1 << (max(v, 1) - 1).bit_length()) for v in (n, k))


def program(dt, mode, n, k):
    """Whether a lu_rows.wgsl pipeline for mode on (n, n) matrices of dtype dt with k
    right-hand sides was made: what tells which program took them."""
    nmax, kmax = buckets(dt, n, k)
    return any(key.kernel == "linalg_lu" and key.dtypes == (dt,) and dict(key.constants).get(
        "ROWS") and dict(key.constants)["MODE"] == mode and dict(key.constants)["NMAX"] == nmax
        and dict(key.constants)["KMAX"] == kmax for key in list(wgc.current_device().pipelines))


def takes_rows(dt, n, k):
    """Whether lu_rows.wgsl holds a row of n and k elements in registers (dt's parts)."""
    return sum(buckets(dt, n, k)) * (2 if dt == "c64" else 1) <= factor.ROW_REGS


@pytest.mark.parametrize("dt", ["f32", "c64"])
@pytest.mark.parametrize("n", [1, 2, 31, 63, 64])
@pytest.mark.parametrize("k", [1, 5, 64])
def test_solve_of_small_matrices_in_registers(dt, n, k, rng):
    """37 matrices: the last workgroup holds fewer than its share (n ≤ 32: 64 // n rounded up
    to a power of two a workgroup). X of every one against numpy; the register program took
    them where a row and its X fit its registers."""
    a, b = matrices(rng, dt, 37, n, k)
    x = la.solve(xp.asarray(a), xp.asarray(b))
    close(x, np.linalg.solve(a.astype(WIDE[dt]), b.astype(WIDE[dt])))
    if takes_rows(dt, n, k):
        assert program(dt, "solve", n, k), "solve did not take lu_rows.wgsl"


@pytest.mark.parametrize("dt", ["f32", "c64"])
@pytest.mark.parametrize("n", [1, 2, 31, 63, 64])
def test_inv_det_slogdet_of_small_matrices(dt, n, rng):
    a, _ = matrices(rng, dt, 37, n)
    a[0] = a[0][::-1]  # a pivot in every column: the reversed rows
    wide = a.astype(WIDE[dt])
    close(la.inv(xp.asarray(a)), np.linalg.inv(wide))
    det = la.det(xp.asarray(a)).to_numpy()
    want = np.linalg.det(wide)
    np.testing.assert_allclose(det, want, rtol=1e-4 * n)
    sign, logabs = la.slogdet(xp.asarray(a))
    es, el = np.linalg.slogdet(wide)
    np.testing.assert_allclose(sign.to_numpy(), es, atol=1e-4)
    close(logabs, el)
    if takes_rows(dt, n, n):
        assert program(dt, "inv", n, n), "inv did not take lu_rows.wgsl"


@pytest.mark.parametrize("dt", ["f32", "c64"])
@pytest.mark.parametrize("n", [2, 8, 31, 64])
def test_singular_matrices_beside_regular_ones(dt, n, rng):
    """Singular matrices (a zero column; a zero row) among others of the same workgroup:
    theirs are nan, det 0, sign 0 and log|det| -inf; their neighbours' are unaffected."""
    a, b = matrices(rng, dt, 19, n, 3)
    a[3, :, n // 2] = 0
    a[8, n - 1] = 0
    bad = [3, 8]
    ok = [i for i in range(19) if i not in bad]
    wide = a.astype(WIDE[dt])
    x = la.solve(xp.asarray(a), xp.asarray(b)).to_numpy()
    inv = la.inv(xp.asarray(a)).to_numpy()
    close(x[ok], np.linalg.solve(wide[ok], b[ok].astype(WIDE[dt])))
    close(inv[ok], np.linalg.inv(wide[ok]))
    assert np.isnan(x[bad]).all() and np.isnan(inv[bad]).all()
    det = la.det(xp.asarray(a)).to_numpy()
    assert (det[bad] == 0).all()
    np.testing.assert_allclose(det[ok], np.linalg.det(wide[ok]), rtol=1e-4 * n)
    sign, logabs = la.slogdet(xp.asarray(a))
    assert (sign.to_numpy()[bad] == 0).all() and (logabs.to_numpy()[bad] == -np.inf).all()


@pytest.mark.parametrize("n", [3, 31, 64])
def test_nearly_singular_matrices_and_the_pivot_order(n, rng):
    """Partial pivoting in f32: leading entries near zero (1e-30: no pivoting would divide by
    them), columns of equal magnitudes (a ±1 sign pattern: the lowest row among equals), and a
    matrix of condition about 1e3 (two nearly equal columns) against numpy in float64, to
    1e-4 times its condition number."""
    a, b = matrices(rng, "f32", 3, n, 2)
    a[0] = np.float32(1e-30) * np.eye(n) + np.roll(np.eye(n), 1, axis=0) * 2
    a[1] = np.where(rng.random((n, n)) < 0.5, -1, 1) + np.eye(n) * n
    a[2, :, -1] = a[2, :, 0] * (1 + 1e-3)
    x = la.solve(xp.asarray(a), xp.asarray(b)).to_numpy()
    wide = a.astype(np.float64)
    for i in range(3):
        cond = np.linalg.cond(wide[i])
        close(x[i], np.linalg.solve(wide[i], b[i].astype(np.float64)), max(1.0, cond / 10))
    assert program("f32", "solve", n, 2)


@pytest.mark.parametrize("dt", ["f32", "c64"])
def test_workgroup_memory_program(dt, rng, monkeypatch):
    """lu_small.wgsl (SMALL_LU "scan": float64 and complex128 always take it) gives the same
    results, and the register program is not used then."""
    monkeypatch.setattr(factor, "SMALL_LU", "scan")
    a, b = matrices(rng, dt, 5, 6, 3)
    x = la.solve(xp.asarray(a), xp.asarray(b))
    close(x, np.linalg.solve(a.astype(WIDE[dt]), b.astype(WIDE[dt])))
    op = factor.LU()
    meta = [xp.asarray(a), xp.asarray(b)]
    consts = dict(op.constants(meta, x, {"mode": "solve"}))
    assert consts["ROWS"] is False and consts["SHARED"] is True


def test_rows_that_do_not_fit_registers_take_another_program(rng):
    """complex64 inverses of 64 × 64 (a row and its X: 256 real elements) stay off the register
    program and still match numpy."""
    a, _ = matrices(rng, "c64", 2, 64)
    op = factor.LU()
    inv = la.inv(xp.asarray(a))
    consts = dict(op.constants([xp.asarray(a), xp.asarray(a)], inv, {"mode": "inv"}))
    assert consts["ROWS"] is False
    close(inv, np.linalg.inv(a.astype(np.complex128)))


@pytest.mark.parametrize("fn", ["solve", "inv"])
def test_a_call_again_on_the_same_arrays_reuses_its_bindings(fn, rng):
    """solve and inv of (batch, n, n) arrays bind those arrays themselves (no view made per
    call): a second call on them finds the first one's bindings."""
    a, b = matrices(rng, "f32", 7, 5, 2)
    args = (xp.asarray(a), xp.asarray(b))[:2 if fn == "solve" else 1]
    binds = wgc.current_device().binds

    def count():
        return sum(1 for key in list(binds) if key[0] == "linalg_lu")

    getattr(la, fn)(*args).to_numpy()  # the result is freed: its memory goes back to the pool
    before = count()
    for _ in range(3):
        x = getattr(la, fn)(*args).to_numpy()
    assert count() == before
    want = np.linalg.solve(a, b) if fn == "solve" else np.linalg.inv(a)
    close(x, want.astype(np.float64))


_WG_BYTES = {"f32": 4, "u32": 4, "i32": 4, "f64": 8, "vec2<f32>": 8, "vec2<f64>": 16}


def _workgroup_bytes(src: str) -> int:
    """Bytes of a shader's workgroup variables (arrays and scalars of the types above)."""
    import re

    total = 0
    for line in src.splitlines():
        m = re.match(r"\s*var<workgroup>\s+\w+\s*:\s*(array<(.+),\s*(\d+)>|(\S+));", line)
        if m:
            t, count = (m.group(2), int(m.group(3))) if m.group(2) else (m.group(4), 1)
            total += _WG_BYTES[t.strip()] * count
    return total


@pytest.mark.parametrize("dt", ["f32", "f64", "c64", "c128"])
def test_the_workgroup_memory_path_fits_the_adapter(dt, monkeypatch):
    """Where lu_small.wgsl's matrix and X go to workgroup memory, the shader's workgroup
    variables fit the adapter's limit, for every n up to 64 and X of 1 or n columns (a
    complex128 element is 16 bytes: counted as 8, a 44×44 system declared 33.7 KB where
    32 KB was the limit)."""
    from wgcompute.dtypes import DTYPES
    from wgcompute.kernels.linalg.factor import LU

    feature = DTYPES[dt].feature
    if feature and feature not in wgc.device_info()["features"]:
        pytest.skip(f"{wgc.device_info()['name']} lacks {feature}")
    monkeypatch.setattr(factor, "SMALL_LU", "workgroup")  # (f32, c64: not in registers)
    dev = wgc.current_device()
    limit = dev.limit("max-compute-workgroup-storage-size")
    kernel = LU()
    seen = 0
    for n in range(1, 65):
        for k in sorted({1, n}):
            a, b = wgc.empty((1, n, n), dt), wgc.empty((1, n, k), dt)
            params = {"mode": "solve"}
            out = wgc.empty((1, n, k), dt)
            consts = dict(kernel.constants([a, b], out, params))
            if consts.get("ROWS") or not consts.get("SHARED"):
                continue
            seen += 1
            src, _ = kernel.render(kernel.key([a, b], out, params))
            assert _workgroup_bytes(src) <= limit, (dt, n, k, _workgroup_bytes(src), limit)
    assert seen, "no size took the workgroup-memory path"
