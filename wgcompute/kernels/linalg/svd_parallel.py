"""The SVD of large matrices over the whole GPU: parallel one-sided Jacobi, one workgroup per
column pair and a dispatch per round (svd_parallel.wgsl), in linalg_svd's workspace; for tall
ones first R of a Householder QR (qr_parallel.wgsl), and after it U = Q·U_R (qr_apply.wgsl)."""

from __future__ import annotations

import math

from ...errors import ArgumentError
from ..core.base import Launch, Param, fold_grid
from .common import LinalgKernel, chunks
from .decompose import _EPS, SVD, SWEEPS_SVD, svd_workspace

# Matrices with at least this many columns (of the m ≥ n matrix the kernel sees) take the
# parallel path; batches of smaller ones keep the one-workgroup program (linalg_svd). A sweep
# there is n - 1 rounds of one workgroup's barriers, each round 4·m·n/64 element updates per
# invocation; here n - 1 dispatches (a few µs each to record and for the GPU's pass
# boundary) plus a flag read back per sweep. By that estimate (not yet timed on a GPU; on
# lavapipe, a CPU, the one workgroup wins at every size) the two meet near n = 128.
PARALLEL_SVD_N = 128
STEPS = ("load", "sweep", "finish")
# A pair's workgroup keeps its rows of the two columns in registers when each invocation has
# at most this many (m ≤ 16 · 256): one read of the columns a round instead of two.
HELD_MAX = 16
# A step index (round, column) in the uniform that means "the workgroups past those that
# work": every step's launch is then alike and they share one bind group.
GRID = 0xFFFFFFFF


def grid_room(device) -> int:
    """The most workgroups a launch may code its step in (one row of the grid); none on a
    CPU adapter, where a workgroup that only exits costs about what one that works does
    (lavapipe: a 256 × 256 sweep took twice as long coded in the grid), while on a GPU it
    costs next to nothing and a bind group per launch ~0.1 ms of host time (~3·n of them
    an SVD otherwise)."""
    return device.limit("max-compute-workgroups-per-dimension") if device.is_gpu else 0


def stepped(device, groups: int, steps, uniform: dict, key: str) -> list[Launch]:
    """A launch per step of ``steps``, ``groups`` workgroups doing the work: the step coded
    as that many more workgroups (the uniform's ``key`` GRID) where one row of the grid has
    room, else in the uniform."""
    steps = list(steps)
    if not steps or groups + max(steps) <= grid_room(device):
        u = dict(uniform, **{key: GRID})
        return [Launch((groups + s, 1, 1), u) for s in steps]
    return [Launch(fold_grid(groups, device, "linalg"), dict(uniform, **{key: s}))
            for s in steps]


def group_size(m: int, gpu: bool = True) -> int:
    """Invocations of a column's (or a pair's) workgroup, 64 to 256: about 4 rows each on a
    GPU, 8 on a CPU adapter (a round is one short dispatch: more invocations a column shorten
    it on a GPU; on lavapipe they cost more than they save). Measured on an H200 (svdvals of
    4096×1024 f32: Jacobi sweeps of 1024 rows): 8 rows 13.4-14.1 ms a sweep, 4 rows 11.3."""
    rows = 4 if gpu else 8
    return min(256, max(64, 1 << max(m // rows - 1, 1).bit_length()))


def sweep_tolerance(m: int, dt: str) -> float:
    """The relative orthogonality |xᴴy| ≤ tol·‖x‖·‖y‖ at which a pair is not rotated:
    √m·eps (LAPACK's xGESVJ): a dot product over m rows carries rounding of that order, so
    a tighter bound would keep rotating rounding noise and never converge."""
    return max(math.sqrt(m), 4.0) * _EPS[dt]


def max_sweeps(dt: str) -> int:
    return SWEEPS_SVD[dt]


class SVDParallel(LinalgKernel):
    """By ``step``, on each matrix of a (batch, m, n) with m ≥ n and linalg_svd's workspace
    (UC = m with ``full``, else n): "load" copies a in, "sweep" runs one sweep (its n - 1
    rounds, a dispatch each, after clearing the flag at the workspace's ``flag_at``), "finish"
    writes S descending and (``vectors``) U's first n columns and Vh. linalg_svd's completion
    of U (SVDCompletion) follows where a singular value is zero or UC > n."""

    name = "linalg_svd_parallel"
    share_bind_groups = True  # no set_params: its alike launches share a bind group
    inputs = ("a",)
    dtypes = ("f32", "f64", "c64", "c128")
    output = "ws"
    workgroup_size = 256  # the largest; constants() sets the one used (group_size)
    template = "linalg/svd_parallel.wgsl"
    params = (Param("step", "str", "sweep", "load, sweep or finish"),
              Param("full", "bool", False, "U with m columns (full_matrices)"),
              Param("vectors", "bool", True, "write U and Vh (finish)"))
    fields = (("m", "u32"), ("n", "u32"), ("uc", "u32"), ("np", "u32"), ("batch", "u32"),
              ("phase", "u32"), ("round", "u32"), ("vectors", "u32"), ("tol", "f32"),
              ("nanv", "f32"))
    description = "singular value decomposition by parallel one-sided Jacobi, a workgroup a pair"

    _sizes = SVD._sizes

    def check(self, inputs, output, params) -> None:
        if params["step"] not in STEPS:
            raise ArgumentError(f"{self.name}: step {params['step']!r}; expected one of {STEPS}")
        self.check_float([("a", inputs[0]), ("ws", output)])
        self.check_shape("ws", output.shape, self.output_spec(inputs, params)[0])

    def output_spec(self, inputs, params):
        return (svd_workspace(*self._sizes(inputs, params)),), inputs[0].dtype

    def constants(self, inputs, output, params):
        m = inputs[0].shape[1]
        wg = group_size(m, inputs[0].device.is_gpu)
        held = -(-m // wg)
        return (("WG", wg), ("LOG2WG", wg.bit_length() - 1),
                ("HELD", held if held <= HELD_MAX else 0))

    def uniform(self, inputs, output, params):
        bt, m, n, uc = self._sizes(inputs, params)
        return {"m": m, "n": n, "uc": uc, "np": n + n % 2, "batch": bt, "phase": 0,
                "round": 0, "vectors": int(bool(params["vectors"])),
                "tol": sweep_tolerance(m, str(output.dtype)), "nanv": float("nan")}

    def launches(self, inputs, output, params, device):
        bt, m, n, _ = self._sizes(inputs, params)
        if bt * n == 0:
            return []
        base = self.uniform(inputs, output, params)
        np_ = n + n % 2

        def launch(groups: int, **u) -> Launch:
            return Launch(fold_grid(groups, device, self.name), dict(base, **u))

        if params["step"] == "load":
            return [launch(-(-bt * (m * n + n * n) // group_size(m, device.is_gpu)), phase=0)]
        if params["step"] == "sweep":
            return [launch(1, phase=1)] + stepped(device, bt * (np_ // 2), range(np_ - 1),
                                                  dict(base, phase=2), "round")
        return [launch(bt * n, phase=3), launch(bt * n, phase=4)]


def flag_at(bt: int, m: int, n: int, uc: int) -> int:
    """The element of the workspace that a sweep sets when it rotated some pair."""
    return svd_workspace(bt, m, n, uc) - bt * (3 * ((n + n % 2) // 2) + 2)


class SVDCompletion(SVD):
    """linalg_svd's last step alone: U's columns of zero singular values and those past n
    completed to an orthonormal basis (one workgroup per matrix), after SVDParallel."""

    name = "linalg_svd_completion"
    description = "completes U's columns to an orthonormal basis, one workgroup per matrix"

    def launches(self, inputs, output, params, device):
        launches = super().launches(inputs, output, params, device)
        return [la for la in launches if la.uniform["phase"] == 3]


# A tall matrix (m ≥ QR_FIRST · n; with a full U, any m > n) is first reduced to R of its QR
# (n + 2 dispatches, m·n² element updates): R has the same singular values, each Jacobi round
# then reads columns of n elements instead of m, and U = Q·U_R (Q's last m - n columns
# complete a full U, where the one-workgroup completion would take m - n sequential steps).
QR_FIRST = 2


def qr_r_workspace(bt: int, m: int, n: int) -> int:
    return bt * (n * m + n * n + n)


class QRR(LinalgKernel):
    """wq = the columns of each matrix of a (batch, m, n), m ≥ n, as rows (n × m: Householder
    vectors below the diagonal), then each R (n × n) of their QR, then the reflectors' tau
    (batch × n) (layout in qr_parallel.wgsl)."""

    name = "linalg_qr_r"
    share_bind_groups = True  # no set_params: its alike launches share a bind group
    inputs = ("a",)
    dtypes = ("f32", "f64", "c64", "c128")
    output = "wq"
    workgroup_size = 256  # the largest; constants() sets the one used (group_size)
    template = "linalg/qr_parallel.wgsl"
    fields = (("m", "u32"), ("n", "u32"), ("batch", "u32"), ("phase", "u32"), ("j", "u32"))
    description = "R of the Householder QR, a workgroup per column, a dispatch per step"

    _sizes = SVD._sizes

    def check(self, inputs, output, params) -> None:
        self.check_float([("a", inputs[0]), ("wq", output)])
        self.check_shape("wq", output.shape, self.output_spec(inputs, params)[0])

    def output_spec(self, inputs, params):
        bt, m, n, _ = self._sizes(inputs, {"full": False})
        return (qr_r_workspace(bt, m, n),), inputs[0].dtype

    def constants(self, inputs, output, params):
        wg = group_size(inputs[0].shape[1], inputs[0].device.is_gpu)
        return (("WG", wg), ("LOG2WG", wg.bit_length() - 1))

    def uniform(self, inputs, output, params):
        bt, m, n, _ = self._sizes(inputs, {"full": False})
        return {"m": m, "n": n, "batch": bt, "phase": 0, "j": 0}

    def launches(self, inputs, output, params, device):
        bt, m, n, _ = self._sizes(inputs, {"full": False})
        if bt * n == 0:
            return []
        base = self.uniform(inputs, output, params)
        wg = group_size(m, device.is_gpu)

        def launch(groups: int, **u) -> Launch:
            return Launch(fold_grid(groups, device, self.name), dict(base, **u))

        if bt * (n - 1) <= grid_room(device):
            u = dict(base, phase=2, j=GRID)  # j: from the count of workgroups, bt · (n - 1 - j)
            applies = [Launch((bt * (n - 1 - j), 1, 1), u) for j in range(n - 1)]
        else:
            applies = [launch(bt * (n - 1 - j), phase=2, j=j) for j in range(n - 1)]
        return ([launch(-(-bt * m * n // wg), phase=0), launch(bt, phase=1, j=0)] + applies
                + [launch(-(-bt * n * n // wg), phase=3)])


class QRApply(LinalgKernel):
    """ws (linalg_svd's layout for a (batch, m, n), m ≥ n, UC = m with ``full``, else n) from
    linalg_qr_r's wq of a and linalg_svd's workspace wr of its R's: U = Q·diag(U_R, I), S
    and Vh (layout in qr_apply.wgsl). ``m`` and ``n`` are a's."""

    name = "linalg_qr_apply"
    share_bind_groups = True  # no set_params: its alike launches share a bind group
    inputs = ("wq", "wr")
    dtypes = ("f32", "f64", "c64", "c128")
    output = "ws"
    workgroup_size = 256
    template = "linalg/qr_apply.wgsl"
    params = (Param("m", "u32", 1, "rows of a"), Param("n", "u32", 1, "columns of a"),
              Param("full", "bool", False, "U with m columns (full_matrices)"))
    fields = (("m", "u32"), ("n", "u32"), ("uc", "u32"), ("batch", "u32"), ("phase", "u32"),
              ("j0", "u32"), ("j1", "u32"))
    description = "U = Q·U_R from Householder reflectors, a workgroup per 32 columns"

    def _sizes(self, inputs, params):
        m, n = params["m"], params["n"]
        bt = inputs[1].size // max(svd_workspace(1, n, n, n), 1)
        return bt, m, n, m if params["full"] else n

    def check(self, inputs, output, params) -> None:
        self.check_float([("wq", inputs[0]), ("wr", inputs[1]), ("ws", output)])
        bt, m, n, uc = self._sizes(inputs, params)
        if m < n or n == 0:
            raise ArgumentError(f"{self.name}: m {m} and n {n}; expected m ≥ n ≥ 1")
        self.check_shape("wq", inputs[0].shape, (qr_r_workspace(bt, m, n),))
        self.check_shape("wr", inputs[1].shape, (svd_workspace(bt, n, n, n),))
        self.check_shape("ws", output.shape, (svd_workspace(bt, m, n, uc),))

    def output_spec(self, inputs, params):
        return (svd_workspace(*self._sizes(inputs, params)),), inputs[0].dtype

    def uniform(self, inputs, output, params):
        bt, m, n, uc = self._sizes(inputs, params)
        return {"m": m, "n": n, "uc": uc, "batch": bt, "phase": 0, "j0": 0, "j1": 0}

    def launches(self, inputs, output, params, device):
        bt, m, n, uc = self._sizes(inputs, params)
        base = self.uniform(inputs, output, params)
        wg = self.workgroup_size

        def launch(groups: int, **u) -> Launch:
            return Launch(fold_grid(groups, device, self.name), dict(base, **u))

        # reflectors n - 1 - j0 down to n - j1 a launch: a workgroup's 32 columns take them all
        # in turn (columns are independent), the slices sized so that no launch runs long
        blocks = [{"phase": 1, "j0": i, "j1": j} for i, j in chunks(
            [32 * (m - (n - 1 - jj)) for jj in range(n)])]
        return ([launch(-(-bt * m * uc // wg), phase=0)]
                + [launch(bt * -(-uc // 32), **b) for b in blocks]
                + [launch(-(-bt * (n + n * n) // wg), phase=2)])
