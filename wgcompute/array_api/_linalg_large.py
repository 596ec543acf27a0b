"""linalg.svd's path for large matrices: parallel one-sided Jacobi sweeps over the whole GPU
(kernels/linalg/svd_parallel), after a QR for tall ones; a sweep is one queued op, converged
when one rotates nothing (a flag read back per sweep)."""

from __future__ import annotations

from .._lazy import enqueue
from ..buffer import Buffer, BufferView
from ..dtypes import DTYPES
from ..errors import ConvergenceError
from ..kernels.linalg.decompose import svd_workspace
from ..kernels.linalg.svd_parallel import (
    PARALLEL_SVD_N,
    QR_FIRST,
    QRR,
    QRApply,
    SVDCompletion,
    SVDParallel,
    flag_at,
    max_sweeps,
    qr_r_workspace,
)
from ._helpers import new

_PAR, _COMPLETE, _QRR, _QAPPLY = SVDParallel(), SVDCompletion(), QRR(), QRApply()


def takes_parallel(n: int) -> bool:
    """Whether an SVD whose (m ≥ n) matrices have n columns runs here."""
    return n >= PARALLEL_SVD_N


def svd_parallel(where: str, s: Buffer, full: bool, vectors: bool,
                 sweeps: int | None = None) -> tuple[Buffer, int]:
    """linalg_svd's workspace (U, S, Vh, ...) and S's place in it, for the matrices of s
    (batch, m, n), m ≥ n, by sweeps of parallel Jacobi rounds (each sweep one submission; a
    4-byte flag is read back after it: the host waits once per sweep). At most ``sweeps``
    (the dtype's bound by default); a sweep that still rotates at the bound raises
    ConvergenceError. A tall s (m ≥ QR_FIRST · n, or any m > n for a full U) is reduced to
    R of its QR first: R's SVD is computed, then U = Q·U_R."""
    bt, m, n = s.shape
    if n and bt and (m >= QR_FIRST * n or (vectors and full and m > n)):
        return _through_qr(where, s, full, vectors, sweeps)
    return _sweeps(where, s, full, vectors, sweeps, (m, n))


def _through_qr(where: str, s: Buffer, full: bool, vectors: bool, sweeps):
    bt, m, n = s.shape
    dt = DTYPES[s.dtype]
    wq = new((qr_r_workspace(bt, m, n),), dt, s.device, where)
    enqueue(_QRR, [s], wq)
    r = BufferView(wq, (bt, n, n), bt * n * m * dt.itemsize)  # the R's
    wr, start = _sweeps(where, r, False, vectors, sweeps, (m, n))
    if not vectors:
        return wr, start
    uc = m if full else n
    ws = new((svd_workspace(bt, m, n, uc),), dt, s.device, where)
    enqueue(_QAPPLY, [wq, wr], ws, {"m": m, "n": n, "full": full})
    return ws, bt * m * uc


def _sweeps(where: str, s: Buffer, full: bool, vectors: bool, sweeps, shape):
    """svd_parallel without the QR: the Jacobi sweeps on the columns of s."""
    bt, m, n = s.shape
    uc = m if full else n
    dt = DTYPES[s.dtype]
    ws = new((svd_workspace(bt, m, n, uc),), dt, s.device, where)
    if bt * n == 0:
        return ws, bt * m * uc
    params = {"full": full}
    enqueue(_PAR, [s], ws, {"step": "load", **params})
    flag = BufferView(ws, (1,), flag_at(bt, m, n, uc) * dt.itemsize)
    limit = max_sweeps(s.dtype) if sweeps is None else sweeps
    for _ in range(limit):
        enqueue(_PAR, [s], ws, {"step": "sweep", **params})
        if flag.to_numpy()[0] == 0:
            break
    else:
        raise ConvergenceError(f"{where}: the Jacobi sweeps did not converge in {limit} sweeps "
                               f"on matrices of shape {shape} ({dt.name}); x may hold "
                               f"inf or values too large to square")
    enqueue(_PAR, [s], ws, {"step": "finish", "vectors": vectors, **params})
    if vectors:
        enqueue(_COMPLETE, [s], ws, params)
    return ws, bt * m * uc
