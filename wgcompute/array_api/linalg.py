"""The standard's ``linalg`` extension on the GPU: factorisations and decompositions run one
workgroup per matrix of a batch (kernels/linalg/), products and norms on matmul, strided
copies and row reductions. float32, complex64, and float64 and complex128 (where the adapter
has shader-f64: elsewhere such an array is refused, naming the feature)."""

from __future__ import annotations

import builtins
import math
from typing import NamedTuple

import numpy as np

from .._lazy import enqueue
from ..array import astype, reshape, view
from ..buffer import Buffer
from ..dtypes import DTYPES
from ..errors import ArgumentError, DtypeError, ShapeError
from ..kernels.core.layout import broadcast_shapes, broadcast_strides, contiguous_strides
from ..kernels.linalg.decompose import (
    QR,
    SVD,
    Eigh,
    eigh_workspace,
    qr_sizes,
    qr_workspace,
    svd_workspace,
)
from ..kernels.linalg.elementwise import RowNorm
from ..kernels.linalg.factor import LU, Cholesky
from ._complex import conj as _conj
from ._dtypes import NAMES, as_dtype, promote, standard_name
from ._elementwise import abs as _abs
from ._helpers import array, new, normalize_axes, same_device
from ._linalg_large import svd_parallel, takes_parallel
from ._linear import (
    _SMALL,
    _at,
    _bindable,
    _broadcast_to,
    _identity,
    _numeric_pair,
    _permuted,
    _product,
    _real_part,
    _stack,
    _strided,
    matmul,
    matrix_transpose,
    tensordot,
    vecdot,
)

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
           "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
           "vector_norm"]

_LU, _CHOLESKY, _NORM = LU(), Cholesky(), RowNorm()
_QR, _EIGH, _SVD = QR(), Eigh(), SVD()


class SlogdetResult(NamedTuple):
    sign: Buffer
    logabsdet: Buffer


# -- arguments -----------------------------------------------------------------------------------
def _floating(where: str, x, argument: str = "x", complex_ok: bool = False) -> Buffer:
    x = array(x, argument)
    if x.dtype not in ("f32", "f64") and not (complex_ok and x.dtype.kind == "c"):
        allowed = "float32, float64, complex64 or complex128" if complex_ok else \
            "float32 or float64"
        raise DtypeError(f"{where}: {argument} is {standard_name(x.dtype)}; expected a "
                         f"floating-point array ({allowed})")
    return x


def _square(where: str, x, argument: str = "x", complex_ok: bool = False) -> Buffer:
    x = _floating(where, x, argument, complex_ok)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{where}: {argument} is {x.shape}; expected a stack of square "
                         f"matrices (..., n, n)")
    return x










# -- factorisations ------------------------------------------------------------------------------
def cholesky(x, /, *, upper: bool = False) -> Buffer:
    """The Cholesky factor of each matrix of x (..., n, n), lower (L·Lᴴ = x) or, ``upper``,
    upper (Uᴴ·U = x); real or complex64 (Hermitian). Only the lower triangle of x is read (of
    its diagonal, the real part). A matrix that is not positive definite gives nan in every
    element of its factor (nothing is raised: the GPU does not stop to report it)."""
    x = _square("cholesky", x, complex_ok=True)
    if not isinstance(upper, (builtins.bool, np.bool_)):
        raise ArgumentError(f"cholesky: upper must be a bool, got {upper!r}")
    out = new(x.shape, DTYPES[x.dtype], x.device, "cholesky")
    if out.size == 0:
        return out
    return enqueue(_CHOLESKY, [_bindable(x)], out, {"upper": bool(upper)})


def _lu(mode: str, a: Buffer, b: Buffer, shape: tuple[int, ...]) -> Buffer:
    out = new(shape, DTYPES[a.dtype], a.device, mode)
    if out.size == 0:
        return out
    return enqueue(_LU, [a, b], out, {"mode": mode})


def det(x, /) -> Buffer:
    """The determinant of each matrix of x (..., n, n) (real or complex64), by LU with partial
    pivoting (0 for a singular matrix)."""
    x = _square("det", x, complex_ok=True)
    s = _stack(x)
    return reshape(_lu("det", s, s, (s.shape[0],)), x.shape[:-2])


def slogdet(x, /) -> SlogdetResult:
    """The sign (-1, 0 or 1; of complex64 x, det / |det|) and the natural log of |det| (real)
    of each matrix of x (..., n, n), by LU with partial pivoting; a singular matrix gives sign
    0 and log|det| -inf."""
    x = _square("slogdet", x, complex_ok=True)
    s = _stack(x)
    bt = s.shape[0]
    both = _lu("slogdet", s, s, (2, bt))
    batch = x.shape[:-2]
    if x.dtype.kind != "c":
        return SlogdetResult(_at(both, 0, batch), _at(both, bt, batch))
    # log|det| is the real part of the second row
    return SlogdetResult(_at(both, 0, batch), _real_part(both, bt, batch))


def inv(x, /) -> Buffer:
    """The inverse of each matrix of x (..., n, n) (real or complex64), by LU with partial
    pivoting. A singular matrix (an exactly zero pivot) gives nan in every element of its
    inverse."""
    x = _square("inv", x, complex_ok=True)
    s = _stack(x)
    return reshape(_lu("inv", s, s, s.shape), x.shape)


def solve(x1, x2, /) -> Buffer:
    """x with x1·x = x2 for each matrix of x1 (..., M, M): x2 is (..., M, K), or (M,) (one
    vector for every matrix); batch dimensions broadcast; real or complex64. LU with partial
    pivoting; a singular x1 (an exactly zero pivot) gives nan in every element of its
    solution."""
    a = _square("solve", x1, "x1", complex_ok=True)
    b = _floating("solve", x2, "x2", complex_ok=True)
    same_device("solve", a, b)
    dt = promote(a.dtype, b.dtype, "solve")
    a, b = (v if v.dtype == dt else astype(v, dt) for v in (a, b))
    m, vector = a.shape[-1], b.ndim == 1
    if vector:
        if b.shape[0] != m:
            raise ShapeError(f"solve: x1 is {a.shape} and x2 is {b.shape}; x2 must have {m} "
                             f"elements")
        batch = a.shape[:-2]
        b = reshape(b, (m, 1))
    else:
        if b.shape[-2] != m:
            raise ShapeError(f"solve: x1 is {a.shape} and x2 is {b.shape}; x2 must be "
                             f"(..., {m}, K) or ({m},)")
        batch = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else broadcast_shapes(
            "solve", [("x1's batch shape", a.shape[:-2]), ("x2's batch shape", b.shape[:-2])])
    k = b.shape[-1]
    a3 = _stack(_broadcast_to(a, batch + (m, m)))
    b3 = _stack(_broadcast_to(b, batch + (m, k)))
    out, shape = _lu("solve", a3, b3, b3.shape), batch + ((m,) if vector else (m, k))
    return out if out.shape == shape else reshape(out, shape)  # no view made: per-call time


# -- products ------------------------------------------------------------------------------------
def outer(x1, x2, /) -> Buffer:
    """The outer product of two vectors: (N,) and (M,) give (N, M)."""
    a, b = _numeric_pair("outer", x1, x2)
    for name, v in (("x1", a), ("x2", b)):
        if v.ndim != 1:
            raise ShapeError(f"outer: {name} is {v.shape}; expected a one-dimensional array")
    return _product(reshape(a, (a.shape[0], 1)), reshape(b, (1, b.shape[0])), exact=True)


def cross(x1, x2, /, *, axis: int = -1) -> Buffer:
    """The cross product of 3-element vectors along ``axis`` (of the broadcast shape; the
    other dimensions broadcast)."""
    a, b = _numeric_pair("cross", x1, x2)
    nd = max(a.ndim, b.ndim)
    if nd == 0:
        raise ShapeError("cross: x1 and x2 are 0-dimensional; expected vectors of 3")
    if isinstance(axis, builtins.bool) or not isinstance(axis, (int, np.integer)) or \
            not -nd <= axis < 0:
        raise ArgumentError(f"cross: axis {axis!r}; expected a negative int in [-{nd}, -1]")
    if -axis > min(a.ndim, b.ndim) or a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ShapeError(f"cross: x1 is {a.shape} and x2 is {b.shape}; both must have size 3 "
                         f"along axis {axis}")
    shape = broadcast_shapes("cross", [("x1", a.shape), ("x2", b.shape)])
    d = len(shape) + axis
    perm = tuple(i for i in range(len(shape)) if i != d) + (d,)
    moved = tuple(shape[i] for i in perm)
    dt = DTYPES[a.dtype]
    if dt.kind == "c":
        raise DtypeError(f"cross: {standard_name(dt)} arrays are not supported; expected real "
                         f"arrays")
    if dt.packed:  # computed in 32 bits and wrapped back, as the dtype's arithmetic wraps
        w = "s32" if dt.kind == "i" else "u32"
        return astype(cross(astype(a, w), astype(b, w), axis=axis), dt.name, casting="unsafe")
    if dt.name == "u64":  # as int64 bits: wrapping products and differences are the same bits
        return view(cross(view(a, "s64"), view(b, "s64"), axis=axis), "u64")

    def rows(v):  # broadcast, the axis moved last, as (rows, 3)
        st = broadcast_strides(v.shape, shape)
        return reshape(_strided(v, moved, [st[i] for i in perm]), (-1, 3) if v.size else
                       (0, 3))

    ra, rb = rows(a), rows(b)
    out = new(ra.shape, dt, a.device, "cross")
    if out.size:
        enqueue(_SMALL, [ra, rb], out, {"mode": "cross"})
    out = reshape(out, moved)
    back = tuple(perm.index(i) for i in range(len(shape)))
    return _permuted(out, back)




def matrix_power(x, n, /) -> Buffer:
    """x (..., M, M) raised to the integer power n by repeated squaring (matmul); n = 0 gives
    the identity, n < 0 the power of the inverse (floating x only)."""
    x = array(x, "x")
    if isinstance(n, builtins.bool) or not isinstance(n, (int, np.integer)):
        raise ArgumentError(f"matrix_power: n must be an int, got {n!r}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"matrix_power: x is {x.shape}; expected square matrices (..., M, M)")
    if x.dtype == "bool" or DTYPES[x.dtype].kind not in "iufc":
        raise DtypeError(f"matrix_power: {standard_name(x.dtype)} arrays are not accepted")
    n = int(n)
    if n == 0:
        return _identity(x.shape, DTYPES[x.dtype], x.device)
    if n < 0:
        x, n = inv(x), -n
    result = None
    base = x
    while True:
        if n & 1:
            result = base if result is None else _product(result, base)
        n >>= 1
        if not n:
            break
        base = _product(base, base)
    return result if result is not x else _strided(x, x.shape, contiguous_strides(x.shape))


# -- diagonals and norms -------------------------------------------------------------------------
def diagonal(x, /, *, offset: int = 0) -> Buffer:
    """The ``offset`` diagonal of each matrix of x (..., M, N) (above the main one for
    offset > 0), copied on the GPU."""
    x = array(x, "x")
    if x.ndim < 2:
        raise ShapeError(f"diagonal: x is {x.shape}; it needs at least two dimensions")
    if isinstance(offset, builtins.bool) or not isinstance(offset, (int, np.integer)):
        raise ArgumentError(f"diagonal: offset must be an int, got {offset!r}")
    m, n = x.shape[-2:]
    offset = int(offset)
    length = max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))
    start = offset if offset >= 0 else -offset * n
    strides = contiguous_strides(x.shape)[:-2] + (n + 1,)
    return _strided(x, x.shape[:-2] + (length,), strides, start if length else 0)


def _row_reduce(x: Buffer, ord: str, p: float = 2.0) -> Buffer:
    """The ord norm (or sum) of each row of x (..., L): shape (...)."""
    rows = math.prod(x.shape[:-1])
    flat = reshape(_bindable(x), (rows, x.shape[-1]))
    out = new((rows,), DTYPES[x.dtype], x.device, "norm")
    if rows and x.shape[-1] == 0:
        if ord in ("inf", "-inf"):
            raise ShapeError(f"vector_norm: ord {ord} of an empty vector is undefined")
        from ._creation import zeros

        return zeros(x.shape[:-1], dtype=DTYPES[x.dtype], device=x.device)  # empty sums
    if rows:
        enqueue(_NORM, [flat], out, {"ord": ord, "p": p})
    return reshape(out, x.shape[:-1])


def trace(x, /, *, offset: int = 0, dtype=None) -> Buffer:
    """The sum of the ``offset`` diagonal of each matrix of x (..., M, N). Integer arrays sum
    in their dtype (int32 at least; uint8 and uint16 in uint32) unless ``dtype`` says
    otherwise."""
    x = array(x, "x")
    d = diagonal(x, offset=offset)
    if dtype is not None:
        target = as_dtype(dtype, "dtype")
    elif x.dtype.kind in "iu" and x.dtype.itemsize < 4:  # the default integer of its kind
        target = NAMES["uint32" if x.dtype.kind == "u" else "int32"]
    else:
        target = DTYPES[x.dtype]
    if target.kind not in "iufc":
        raise DtypeError(f"trace: dtype {standard_name(target)} is not supported; expected "
                         f"a numeric dtype")
    if target.packed:  # summed in 32 bits, wrapped back as the dtype's arithmetic wraps
        wide = trace(x, offset=offset, dtype=NAMES["int32" if target.kind == "i" else "uint32"])
        return astype(wide, target, casting="unsafe")
    if d.dtype != target.name:
        d = astype(d, target)
    if target.name == "u64":  # as int64 bits: wrapping sums are the same bits
        return view(_row_reduce(view(d, "s64"), "sum"), "u64")
    return _row_reduce(d, "sum")


_ORDS = {2: "2", 1: "1", math.inf: "inf", -math.inf: "-inf", 0: "0"}


def _ord_name(where: str, ord, dt: str) -> tuple[str, float]:
    if isinstance(ord, builtins.bool) or not isinstance(ord, (int, float, np.number)):
        raise ArgumentError(f"{where}: ord must be a number (or ±inf), got {ord!r}")
    if ord in _ORDS:
        return _ORDS[ord], 2.0
    if math.isnan(ord):
        raise ArgumentError(f"{where}: ord is nan")
    if dt != "f32":
        raise DtypeError(f"{where}: ord {ord!r} on a {standard_name(dt)} array; p-norms other "
                         f"than 0, 1, 2 and ±inf take float32 (the GPU has no 64-bit pow)")
    return "p", float(ord)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Buffer:
    """The vector ``ord`` norm of x over ``axis`` (None: all of x as one vector; a tuple:
    those axes as one vector): 2, 1, ±inf, 0 (the count of nonzeros) or any p (float32);
    of complex x, the norm of |x| (its parts' real dtype)."""
    x = array(x, "x")
    if x.dtype.kind == "c":
        x = _abs(x)
    x = _floating("vector_norm", x)
    name, p = _ord_name("vector_norm", ord, x.dtype)
    axes = normalize_axes(axis, x.ndim)
    free = tuple(d for d in range(x.ndim) if d not in axes)
    moved = _permuted(x, free + axes)
    length = math.prod(x.shape[d] for d in axes)
    kept = tuple(x.shape[d] for d in free)
    out = _row_reduce(reshape(moved, kept + (length,)), name, p)
    if keepdims:
        out = reshape(out, tuple(1 if d in axes else x.shape[d] for d in range(x.ndim)))
    return out


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro") -> Buffer:
    """The matrix ``ord`` norm of each matrix of x (..., M, N): 'fro', 1, -1, inf, -inf
    (column and row sums; complex64 x too), 2, -2 and 'nuc' (from the singular values)."""
    x = array(x, "x")
    if x.dtype.kind == "c" and (isinstance(ord, str) and ord == "fro" or ord in (
            1, -1, math.inf, -math.inf)) and not isinstance(ord, builtins.bool):
        x = _abs(x)
    x = _floating("matrix_norm", x, complex_ok=True)
    if x.ndim < 2:
        raise ShapeError(f"matrix_norm: x is {x.shape}; it needs at least two dimensions")
    nd = x.ndim
    if isinstance(ord, str) and ord == "fro":
        out = vector_norm(x, axis=(nd - 2, nd - 1), ord=2)
    elif not isinstance(ord, builtins.bool) and ord in (1, -1, math.inf, -math.inf):
        # 1: the largest column sum of |x|, inf: the largest row sum (-1, -inf: smallest)
        sums = vector_norm(x, axis=-2 if ord in (1, -1) else -1, ord=1)
        out = vector_norm(sums, axis=-1, ord=math.inf if ord > 0 else -math.inf)
    elif (isinstance(ord, str) and ord == "nuc") or (
            not isinstance(ord, builtins.bool) and not isinstance(ord, str) and ord in (2, -2)):
        out = _singular_norm(x, ord)
    else:
        raise ArgumentError(f"matrix_norm: ord {ord!r}; expected 'fro', 'nuc', 1, -1, 2, -2, "
                            f"inf or -inf")
    if keepdims:
        out = reshape(out, x.shape[:-2] + (1, 1))
    return out


# -- decompositions ------------------------------------------------------------------------------
class QRResult(NamedTuple):
    Q: Buffer
    R: Buffer




def qr(x, /, *, mode: str = "reduced") -> QRResult:
    """The QR decomposition of each matrix of x (..., M, N), real or complex64, by Householder
    reflections (R's diagonal real, -sign·norm, as LAPACK's): Q (..., M, K) and R (..., K, N)
    with K = min(M, N) ("reduced"), or Q (..., M, M) and R (..., M, N) ("complete")."""
    x = _floating("qr", x, complex_ok=True)
    if x.ndim < 2:
        raise ShapeError(f"qr: x is {x.shape}; expected a stack of matrices (..., M, N)")
    if mode not in ("reduced", "complete"):
        raise ArgumentError(f"qr: mode {mode!r}; expected 'reduced' or 'complete'")
    m, n = x.shape[-2:]
    qc, rr = qr_sizes(m, n, mode)
    s = _stack(x)
    bt = s.shape[0]
    ws = new((qr_workspace(bt, m, n, mode),), DTYPES[x.dtype], x.device, "qr")
    if bt and m * n:
        enqueue(_QR, [s], ws, {"mode": mode})
    elif bt * m * qc:  # no columns: Q is the identity's first columns
        return QRResult(_identity_columns(x, m, qc), new(x.shape[:-2] + (rr, n),
                                                         DTYPES[x.dtype], x.device, "qr"))
    batch = x.shape[:-2]
    return QRResult(_at(ws, 0, batch + (m, qc)), _at(ws, bt * m * qc, batch + (rr, n)))


def _identity_columns(x: Buffer, m: int, qc: int) -> Buffer:
    eye = _identity(x.shape[:-2] + (m, m), DTYPES[x.dtype], x.device)
    if qc == m:
        return eye
    return _strided(eye, x.shape[:-2] + (m, qc), contiguous_strides(eye.shape))


class EighResult(NamedTuple):
    eigenvalues: Buffer
    eigenvectors: Buffer


def _eigh(where: str, x) -> tuple[Buffer, Buffer, Buffer]:
    x = _square(where, x, complex_ok=True)
    s = _stack(x)
    bt, n = s.shape[0], s.shape[1]
    ws = new((eigh_workspace(bt, n),), DTYPES[x.dtype], x.device, where)
    if bt and n:
        enqueue(_EIGH, [s], ws)
    return x, ws, bt


def eigh(x, /) -> EighResult:
    """Eigenvalues (ascending, real) and eigenvectors (columns) of each symmetric (or,
    complex64, Hermitian) matrix of x (..., n, n), of which only the lower triangle is read
    (of its diagonal, the real part); parallel cyclic Jacobi sweeps. A nan in a matrix makes
    its results nan."""
    x, ws, bt = _eigh("eigh", x)
    n = x.shape[-1]
    return EighResult(_eigenvalues(x, ws), _at(ws, bt * n, x.shape))


def _eigenvalues(x: Buffer, ws: Buffer) -> Buffer:
    """eigh's eigenvalues: the start of its workspace (real; complex keeps them as (w, 0))."""
    if x.dtype.kind == "c":
        return _real_part(ws, 0, x.shape[:-1])
    return _at(ws, 0, x.shape[:-1])


def eigvalsh(x, /) -> Buffer:
    """The eigenvalues (ascending) of each symmetric matrix of x (..., n, n) (its lower
    triangle read), as eigh computes them."""
    x, ws, _ = _eigh("eigvalsh", x)
    return _eigenvalues(x, ws)


class SVDResult(NamedTuple):
    U: Buffer
    S: Buffer
    Vh: Buffer


def _svd(where: str, x, full: bool, vectors: bool = True):
    """(x, U, S, Vh) of x (..., M, N) (U and Vh None unless ``vectors``): the kernel runs on
    x or, when M < N, on xᴴ (its U and Vh then swap roles and are conjugate-transposed
    back)."""
    x = _floating(where, x, complex_ok=True)
    if x.ndim < 2:
        raise ShapeError(f"{where}: x is {x.shape}; expected a stack of matrices (..., M, N)")
    m, n = x.shape[-2:]
    wide = m < n
    a = _adjoint(x) if wide else x
    s = _stack(a)
    bt, rm, rn = s.shape
    uc = rm if full else rn
    if takes_parallel(rn):  # large matrices: the whole GPU, a workgroup per column pair
        ws, start = svd_parallel(where, s, full, vectors)
    else:
        ws = new((svd_workspace(bt, rm, rn, uc),), DTYPES[x.dtype], x.device, where)
        if bt and rn:
            enqueue(_SVD, [s], ws, {"full": full})
        start = bt * rm * uc  # S's place in ws
    batch = x.shape[:-2]
    sv = _real_part(ws, start, batch + (rn,)) if x.dtype.kind == "c" else \
        _at(ws, start, batch + (rn,))
    if not vectors:
        return x, None, sv, None
    u = _at(ws, 0, batch + (rm, uc))
    vh = _at(ws, bt * (rm * uc + rn), batch + (rn, rn))
    if bt and not rn and uc:  # no columns: U is the identity
        u = _identity(batch + (rm, rm), DTYPES[x.dtype], x.device)
    if wide:
        return x, _adjoint(vh), sv, _adjoint(u)
    return x, u, sv, vh


def _adjoint(x: Buffer) -> Buffer:
    """The conjugate transpose of each matrix of x (the transpose of a real one). complex
    moves as pairs of its parts (_strided): its results here are views anywhere in a
    workspace."""
    if x.dtype.kind != "c":
        return matrix_transpose(x)
    st = contiguous_strides(x.shape)
    shape = x.shape[:-2] + (x.shape[-1], x.shape[-2])
    return _conj(_strided(x, shape, st[:-2] + (st[-1], st[-2])))


def svd(x, /, *, full_matrices: bool = True) -> SVDResult:
    """U, S, Vh with x = U·diag(S)·Vh for each matrix of x (..., M, N), S descending (K =
    min(M, N) values), by one-sided Jacobi. U is (..., M, M) and Vh (..., N, N) with
    ``full_matrices``, else (..., M, K) and (..., K, N); columns of U (rows of Vh) beyond
    the nonzero singular values complete an orthonormal basis. With K ≥ 128 the sweeps run
    over the whole GPU (on R of a QR first for a tall x), and the host reads a convergence
    flag after each (waiting for it); sweeps that do not converge raise ConvergenceError."""
    if not isinstance(full_matrices, (builtins.bool, np.bool_)):
        raise ArgumentError(f"svd: full_matrices must be a bool, got {full_matrices!r}")
    _, u, s, vh = _svd("svd", x, bool(full_matrices))
    return SVDResult(u, s, vh)


def svdvals(x, /) -> Buffer:
    """The singular values of each matrix of x (..., M, N), descending (as svd's S; real)."""
    return _svd("svdvals", x, False, vectors=False)[2]








def _tolerance(where: str, x: Buffer, rtol, batch: tuple[int, ...]) -> Buffer:
    """rtol (None: max(M, N)·eps; a number; or an array broadcast against the batch) as an
    array of x's real dtype and shape ``batch``."""
    from ._creation import full

    real = x.dtype.part if x.dtype.kind == "c" else DTYPES[x.dtype]
    if rtol is None:
        rtol = max(x.shape[-2:]) * float(np.finfo(real.numpy).eps)
    if isinstance(rtol, (int, float, np.number)) and not isinstance(rtol, builtins.bool):
        return full(batch, float(rtol), dtype=real, device=x.device)
    r = _floating(where, rtol, "rtol")
    same_device(where, x, r)
    if r.dtype != real.name:
        r = astype(r, real, casting="unsafe")
    broadcast_shapes(where, [("rtol", r.shape), ("x's batch shape", batch)])
    return _broadcast_to(r, batch) if r.shape != batch else r


def matrix_rank(x, /, *, rtol=None) -> Buffer:
    """The number of singular values of each matrix of x (..., M, N) (real or complex64)
    above rtol times the largest (rtol: max(M, N)·eps by default, a number, or an array
    broadcast against the batch); int32."""
    x = array(x, "x")
    s = _svd("matrix_rank", x, False, vectors=False)[2]
    batch = x.shape[:-2]
    rows = math.prod(batch)
    tol = _tolerance("matrix_rank", x, rtol, batch)
    out = new((rows,), DTYPES[s.dtype], x.device, "matrix_rank")
    if rows:
        enqueue(_SMALL, [reshape(s, (rows, s.shape[-1])), reshape(tol, (rows,))], out,
                   {"mode": "rank"})
    return reshape(astype(out, NAMES["int32"]), batch)


def pinv(x, /, *, rtol=None) -> Buffer:
    """The Moore-Penrose pseudo-inverse of each matrix of x (..., M, N): V·diag(1/S)·Uᵀ over
    the singular values above rtol times the largest (rtol as matrix_rank's); real or
    complex64."""
    x, u, s, vh = _svd("pinv", x, False)
    batch = x.shape[:-2]
    rows, k = math.prod(batch), s.shape[-1]
    tol = _tolerance("pinv", x, rtol, batch)
    w = new((rows, k), DTYPES[s.dtype], x.device, "pinv")
    if w.size:
        enqueue(_SMALL, [reshape(s, (rows, k)), reshape(tol, (rows,))], w,
                   {"mode": "pinv_w"})
    v = _adjoint(vh)  # (..., N, K)
    vw = new(v.shape, DTYPES[x.dtype], x.device, "pinv")
    if vw.size:
        if x.dtype.kind == "c":  # the weights as (w, 0), the kernel's element type
            w = astype(w, x.dtype)
        enqueue(_SMALL, [v, reshape(w, batch + (k,))], vw, {"mode": "scale_cols"})
    return _product(vw, _adjoint(u))


def _singular_norm(x: Buffer, ord) -> Buffer:
    """The 2 (largest), -2 (smallest) or nuclear (sum) norm from x's singular values."""
    s = _svd("matrix_norm", x, False, vectors=False)[2]
    k = s.shape[-1]
    if k == 0:
        raise ShapeError(f"matrix_norm: x is {x.shape}; ord {ord!r} of an empty matrix is "
                         f"undefined")
    if ord == "nuc":
        return _row_reduce(s, "sum")
    batch = s.shape[:-1]
    strides = tuple(st * k for st in contiguous_strides(batch))
    return _strided(s, batch, strides, 0 if ord == 2 else k - 1)
