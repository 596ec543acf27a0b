"""Householder QR, Jacobi eigendecomposition of symmetric matrices and one-sided Jacobi SVD,
one workgroup per matrix working in a storage workspace whose leading parts are the results."""

from __future__ import annotations

from ...errors import ArgumentError, ShapeError
from ..core.base import Param
from .common import LinalgKernel, chunks, phased


def qr_sizes(m: int, n: int, mode: str) -> tuple[int, int]:
    """(columns of Q, rows of R) for ``mode`` "reduced" or "complete"."""
    k = min(m, n)
    return (k, k) if mode == "reduced" else (m, m)


def qr_workspace(batch: int, m: int, n: int, mode: str) -> int:
    qc, rr = qr_sizes(m, n, mode)
    return batch * (m * qc + rr * n + m * n + min(m, n))


class QR(LinalgKernel):
    """ws = Q (batch, m, QC), then R (batch, RR, n), then scratch, of each matrix of a
    (batch, m, n) (layout in qr.wgsl)."""

    name = "linalg_qr"
    inputs = ("a",)
    dtypes = ("f32", "f64", "c64", "c128")
    output = "ws"
    template = "linalg/qr.wgsl"
    params = (Param("mode", "str", "reduced", "reduced or complete"),)
    fields = (("m", "u32"), ("n", "u32"), ("qc", "u32"), ("rr", "u32"), ("batch", "u32"),
              ("phase", "u32"), ("j0", "u32"), ("j1", "u32"))
    description = "Householder QR, one workgroup per matrix"

    def _sizes(self, inputs, params):
        (a,) = inputs
        if a.ndim != 3:
            raise ShapeError(f"{self.name}: a is {a.shape}; expected (batch, m, n)")
        if params["mode"] not in ("reduced", "complete"):
            raise ArgumentError(f"{self.name}: mode {params['mode']!r}; expected 'reduced' or "
                                f"'complete'")
        return a.shape

    def check(self, inputs, output, params) -> None:
        self.check_float([("a", inputs[0]), ("ws", output)])
        self.check_shape("ws", output.shape, self.output_spec(inputs, params)[0])

    def output_spec(self, inputs, params):
        bt, m, n = self._sizes(inputs, params)
        return (qr_workspace(bt, m, n, params["mode"]),), inputs[0].dtype

    def batch(self, inputs, output, params):
        return inputs[0].shape[0]

    def uniform(self, inputs, output, params):
        bt, m, n = self._sizes(inputs, params)
        qc, rr = qr_sizes(m, n, params["mode"])
        return {"m": m, "n": n, "qc": qc, "rr": rr, "batch": bt, "phase": 0, "j0": 0, "j1": 0}

    def launches(self, inputs, output, params, device):
        bt, m, n = self._sizes(inputs, params)
        qc, _ = qr_sizes(m, n, params["mode"])
        k = min(m, n)
        steps = [{"phase": 1, "j0": i, "j1": j}
                 for i, j in chunks([2 * (m - j) * (n - j) + m for j in range(k)])] + [2]
        steps += [{"phase": 3, "j0": i, "j1": j}
                  for i, j in chunks([2 * (jj + 1 + m - k) * qc for jj in range(k)])]
        return phased(super().launches(inputs, output, params, device), steps)


def eigh_workspace(batch: int, n: int) -> int:
    return batch * (n + 3 * n * n + 3 * ((n + n % 2) // 2) + 1)


_EPS = {"f32": 1.1920929e-07, "f64": 2.220446049250313e-16, "c64": 1.1920929e-07,
        "c128": 2.220446049250313e-16}
# Jacobi sweeps at most (they stop once converged), a slice of their rounds per dispatch
SWEEPS = {"f32": 20, "f64": 30, "c64": 20, "c128": 30}
SWEEPS_SVD = {"f32": 30, "f64": 40, "c64": 30, "c128": 40}


class Eigh(LinalgKernel):
    """ws = eigenvalues (batch, n) ascending, then eigenvectors (batch, n, n) in columns,
    then scratch, of each symmetric matrix of a (batch, n, n) (layout in eigh.wgsl)."""

    name = "linalg_eigh"
    inputs = ("a",)
    dtypes = ("f32", "f64", "c64", "c128")
    output = "ws"
    template = "linalg/eigh.wgsl"
    fields = (("n", "u32"), ("np", "u32"), ("batch", "u32"), ("nanv", "f32"), ("phase", "u32"),
              ("g0", "u32"), ("g1", "u32"))
    description = "symmetric eigendecomposition by parallel Jacobi, one workgroup per matrix"

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        self.check_float([("a", a), ("ws", output)])
        if a.ndim != 3 or a.shape[1] != a.shape[2]:
            raise ShapeError(f"{self.name}: a is {a.shape}; expected (batch, n, n)")
        self.check_shape("ws", output.shape, self.output_spec(inputs, params)[0])

    def output_spec(self, inputs, params):
        bt, n, _ = inputs[0].shape
        return (eigh_workspace(bt, n),), inputs[0].dtype

    def constants(self, inputs, output, params):
        return (("TOL", _EPS[str(output.dtype)] * 4),)

    def batch(self, inputs, output, params):
        return inputs[0].shape[0]

    def uniform(self, inputs, output, params):
        bt, n, _ = inputs[0].shape
        return {"n": n, "np": n + n % 2, "batch": bt, "nanv": float("nan"), "phase": 0,
                "g0": 0, "g1": 0}

    def launches(self, inputs, output, params, device):
        n = inputs[0].shape[1]
        rounds = n + n % 2 - 1
        costs = [3 * n * n + 2 * n * n * (g % rounds == 0)
                 for g in range(SWEEPS[str(output.dtype)] * rounds)]
        return phased(super().launches(inputs, output, params, device),
                      [{"phase": 1, "g0": i, "g1": j} for i, j in chunks(costs)] + [2])


def svd_workspace(batch: int, m: int, n: int, uc: int) -> int:
    return batch * (m * uc + n + 2 * n * n + m * n + 3 * ((n + n % 2) // 2) + 2)


class SVD(LinalgKernel):
    """ws = U (batch, m, UC), then S (batch, n) descending, then Vh (batch, n, n), then
    scratch, of each matrix of a (batch, m, n) with m ≥ n; UC = m (``full``) or n."""

    name = "linalg_svd"
    inputs = ("a",)
    dtypes = ("f32", "f64", "c64", "c128")
    output = "ws"
    template = "linalg/svd.wgsl"
    params = (Param("full", "bool", False, "U with m columns (full_matrices)"),)
    fields = (("m", "u32"), ("n", "u32"), ("uc", "u32"), ("np", "u32"), ("batch", "u32"),
              ("phase", "u32"), ("g0", "u32"), ("g1", "u32"))
    description = "singular value decomposition by one-sided Jacobi, one workgroup per matrix"

    def _sizes(self, inputs, params):
        (a,) = inputs
        if a.ndim != 3 or a.shape[1] < a.shape[2]:
            raise ShapeError(f"{self.name}: a is {a.shape}; expected (batch, m, n) with m ≥ n")
        bt, m, n = a.shape
        return bt, m, n, m if params["full"] else n

    def check(self, inputs, output, params) -> None:
        self.check_float([("a", inputs[0]), ("ws", output)])
        self.check_shape("ws", output.shape, self.output_spec(inputs, params)[0])

    def output_spec(self, inputs, params):
        return (svd_workspace(*self._sizes(inputs, params)),), inputs[0].dtype

    def constants(self, inputs, output, params):
        return (("TOL", _EPS[str(output.dtype)] * 4),)

    def batch(self, inputs, output, params):
        return inputs[0].shape[0]

    def uniform(self, inputs, output, params):
        bt, m, n, uc = self._sizes(inputs, params)
        return {"m": m, "n": n, "uc": uc, "np": n + n % 2, "batch": bt, "phase": 0, "g0": 0,
                "g1": 0}

    def launches(self, inputs, output, params, device):
        _, m, n, uc = self._sizes(inputs, params)
        rounds = n + n % 2 - 1
        sweeps = [{"phase": 1, "g0": i, "g1": j} for i, j in chunks(
            [4 * m * n] * (SWEEPS_SVD[str(output.dtype)] * rounds))]
        # completing column c costs about 3·m·c where it runs (zero singular values, or c ≥ n)
        complete = [{"phase": 3, "g0": i, "g1": j} for i, j in chunks(
            [3 * m * c + m if c >= n else m for c in range(uc)])]
        return phased(super().launches(inputs, output, params, device),
                      sweeps + [2] + complete)
