"""LU with partial pivoting (solve, inv, det, slogdet) and Cholesky, one workgroup per matrix
working in storage, so any n runs with no host round trip."""

from __future__ import annotations

from ...dtypes import DTYPES
from ...errors import ArgumentError, ShapeError
from ..core.base import Launch, Param, fold_grid
from .common import WG, LinalgKernel, batch_of, chunks, phased
from .elementwise import Take

LU_MODES = ("solve", "inv", "det", "slogdet")
SHARED_N = 64  # matrices up to this size factor in workgroup memory, in one launch
# Which program factors those: "rows" (lu_rows.wgsl: each row and its X in an invocation's
# registers, several matrices per workgroup; f32 and complex64 with n, k ≤ SHARED_N and at most
# ROW_REGS real elements a row) or "scan" (lu_small.wgsl: the matrix and X in workgroup memory,
# every invocation scanning the pivot column; f64 and complex128 always take it).
SMALL_LU = "rows"
ROW_REGS = 160  # lu_rows.wgsl's (NMAX + KMAX) · (2 for complex): registers an invocation holds


def _pow2(x: int) -> int:
    """The least power of two ≥ x (1 for 0 and 1)."""
    return 1 << (x - 1).bit_length() if x > 1 else 1


def lu_workspace(batch: int, n: int, k: int) -> int:
    """Elements of linalg_lu's workspace: X, det, sign, log|det|, then the LU factors."""
    return batch * (n * k + 3 + n * n)


class LUFactor(LinalgKernel):
    """ws = LU of each (n, n) matrix of a (batch, n, n) with, by ``mode``, X = a⁻¹·b (b:
    (batch, n, k)), X = a⁻¹, or det / sign / log|det| (layout in lu.wgsl)."""

    name = "linalg_lu_factor"
    inputs = ("a", "b")
    dtypes = ("f32", "f64", "c64", "c128")
    output = "ws"
    template = "linalg/lu.wgsl"
    params = (Param("mode", "str", "solve", "solve, inv or det"),)
    fields = (("n", "u32"), ("k", "u32"), ("batch", "u32"), ("nanv", "f32"), ("ninf", "f32"),
              ("phase", "u32"), ("j0", "u32"), ("j1", "u32"))
    description = "LU with partial pivoting, one workgroup per matrix: solve, inv, det"

    def _sizes(self, inputs, params):
        a, b = inputs
        if a.ndim != 3 or a.shape[1] != a.shape[2]:
            raise ShapeError(f"{self.name}: a is {a.shape}; expected (batch, n, n)")
        bt, n = a.shape[0], a.shape[1]
        mode = params["mode"]
        if mode not in LU_MODES:
            raise ArgumentError(f"{self.name}: mode {mode!r}; expected one of {LU_MODES}")
        mode = "det" if mode == "slogdet" else mode
        k = b.shape[2] if mode == "solve" else n if mode == "inv" else 0
        if mode == "solve" and (b.ndim != 3 or b.shape[:2] != (bt, n)):
            raise ShapeError(f"{self.name}: b is {b.shape}; expected ({bt}, {n}, k)")
        return bt, n, k

    def check(self, inputs, output, params) -> None:
        self.check_float([("a", inputs[0]), ("b", inputs[1]), ("ws", output)])
        bt, n, k = self._sizes(inputs, params)
        self.check_shape("ws", (output.size,), (lu_workspace(bt, n, k),))

    def output_spec(self, inputs, params):
        bt, n, k = self._sizes(inputs, params)
        return (lu_workspace(bt, n, k),), inputs[0].dtype

    def _rows(self, inputs, params) -> tuple[int, int] | None:
        """(NMAX, KMAX): the rows (n) and X's columns (k) lu_rows.wgsl is rendered for, each
        rounded up to a power of two (and to a vector of the pivot row: 4 real, 2 complex
        elements), when it takes these matrices (SMALL_LU); else None."""
        dt = inputs[0].dtype
        if SMALL_LU != "rows" or dt not in ("f32", "c64"):
            return None
        _, n, k = self._sizes(inputs, params)
        per = 2 if dt == "c64" else 4  # elements a vector of the pivot row holds
        nmax, kmax = max(per, _pow2(n)), max(per, _pow2(k)) if k else 0
        if n > SHARED_N or k > SHARED_N or (nmax + kmax) * (4 // per) > ROW_REGS:
            return None
        return nmax, kmax

    def _shared(self, inputs, params, device) -> int:
        """Elements of workgroup memory lu_small.wgsl's matrix and X take when they fit there
        (n ≤ 64), else 0 (they stay in the workspace, any n); -1 where lu_rows.wgsl takes the
        matrices (in registers)."""
        if self._rows(inputs, params):
            return -1
        _, n, k = self._sizes(inputs, params)
        cap = n * (n | 1) + n * k  # lu_small.wgsl's rows are n | 1 apart
        item = DTYPES[inputs[0].dtype].itemsize  # (complex128: 16 bytes)
        room = device.limit("max-compute-workgroup-storage-size") - self.workgroup_size * (
            item + 4) - 16
        return cap if n <= SHARED_N and cap * item <= room else 0

    def constants(self, inputs, output, params):
        mode = "det" if params["mode"] == "slogdet" else params["mode"]
        rows = self._rows(inputs, params)
        if rows:
            return (("MODE", mode), ("SHARED", True), ("ROWS", True), ("NMAX", rows[0]),
                    ("KMAX", rows[1]), ("PER", 2 if inputs[0].dtype == "c64" else 4))
        cap = self._shared(inputs, params, output.device)
        return (("MODE", mode), ("SHARED", cap > 0), ("CAP", cap), ("NMAX", SHARED_N),
                ("ROWS", False))

    def render(self, key):
        # small matrices: lu_rows.wgsl (registers) or lu_small.wgsl (workgroup memory), one
        # launch
        consts = dict(key.constants)
        if consts["ROWS"]:
            return self._render("linalg/lu_rows.wgsl", key)
        if consts["SHARED"]:
            return self._render("linalg/lu_small.wgsl", key)
        return self._render(self.template, key)

    def batch(self, inputs, output, params):
        return inputs[0].shape[0]

    def uniform(self, inputs, output, params):
        bt, n, k = self._sizes(inputs, params)
        return {"n": n, "k": k, "batch": bt, "nanv": float("nan"), "ninf": float("-inf"),
                "phase": 0, "j0": 0, "j1": 0}

    def launches(self, inputs, output, params, device):
        bt, n, k = self._sizes(inputs, params)
        rows = self._rows(inputs, params)
        if rows and bt:
            groups = fold_grid(-(-bt // (WG // rows[0])), device, self.name)
            return [Launch(groups, dict(self.uniform(inputs, output, params), phase=4))]
        first = super().launches(inputs, output, params, device)
        if self._shared(inputs, params, device):
            return [Launch(la.workgroups, dict(la.uniform, phase=4)) for la in first]
        steps = [{"phase": 1, "j0": i, "j1": j}
                 for i, j in chunks([(n - j) * (n - j + k) + n for j in range(n)])]
        if params["mode"] in ("solve", "inv"):
            steps += [{"phase": 2, "j0": i, "j1": j}
                      for i, j in chunks([(n - jj) * k + k for jj in range(n)])]
        return phased(first, steps + [3])


class Cholesky(LinalgKernel):
    """out = the lower (or, ``upper``, upper) Cholesky factor of each matrix of a
    (..., n, n), real or complex64 (L·Lᴴ); nan throughout for a matrix that is not positive
    definite."""

    name = "linalg_cholesky"
    inputs = ("a",)
    dtypes = ("f32", "f64", "c64", "c128")
    template = "linalg/cholesky.wgsl"
    params = (Param("upper", "bool", False, "write U = Lᵀ instead of L"),)
    fields = (("n", "u32"), ("batch", "u32"), ("nanv", "f32"), ("phase", "u32"), ("j0", "u32"),
              ("j1", "u32"))
    description = "Cholesky factor, one workgroup per matrix (nan where not positive definite)"

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        self.check_float([("a", a), ("out", output)])
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ShapeError(f"{self.name}: a is {a.shape}; expected (..., n, n)")
        self.check_shape("out", output.shape, a.shape)

    def constants(self, inputs, output, params):
        return (("UPPER", bool(params["upper"])),)

    def batch(self, inputs, output, params):
        return batch_of(inputs[0].shape, 2)

    def uniform(self, inputs, output, params):
        a = inputs[0]
        return {"n": a.shape[-1], "batch": batch_of(a.shape, 2), "nanv": float("nan"),
                "phase": 0, "j0": 0, "j1": 0}

    def launches(self, inputs, output, params, device):
        n = inputs[0].shape[-1]
        steps = [{"phase": 1, "j0": i, "j1": j}
                 for i, j in chunks([(n - j) * (n - j) // 2 + n for j in range(n)])]
        return phased(super().launches(inputs, output, params, device), steps + [2])


LU_FACTOR = LUFactor()
TAKE = Take()


class LU(LUFactor):
    """By ``mode``, of each (n, n) matrix of a (batch, n, n): "solve" X = a⁻¹·b (out like b,
    (batch, n, k)), "inv" a⁻¹ (out like a), "det" (out (batch,)), "slogdet" (out (2, batch):
    signs, then log|det|). Small matrices solved or inverted in workgroup memory write out
    directly (one launch, bound once and reused); otherwise two steps in one compute pass:
    linalg_lu_factor into a workspace, then a copy of the part asked for."""

    name = "linalg_lu"
    output = "out"

    def output_spec(self, inputs, params):
        a, b = inputs
        mode = params["mode"]
        bt = a.shape[0]
        shape = {"solve": b.shape, "inv": a.shape, "det": (bt,), "slogdet": (2, bt)}[mode]
        return shape, a.dtype

    def check(self, inputs, output, params) -> None:
        self.check_float([("a", inputs[0]), ("b", inputs[1]), ("out", output)])
        self._sizes(inputs, params)
        self.check_shape("out", output.shape, self.output_spec(inputs, params)[0])

    def passes(self, inputs, output, params):
        if params["mode"] in ("solve", "inv") and self._shared(inputs, params, output.device):
            return None  # X is all the kernel writes: out is its workspace
        bt, n, k = self._sizes(inputs, params)
        offset = {"solve": 0, "inv": 0, "det": bt * n * k,
                  "slogdet": bt * n * k + bt}[params["mode"]]
        return [((lu_workspace(bt, n, k),), output.dtype)], [
            (LU_FACTOR, ["in0", "in1"], "tmp0", {"mode": params["mode"]}),
            (TAKE, ["tmp0"], "out", {"offset": offset})]
