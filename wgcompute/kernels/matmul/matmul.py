"""The matmul kernel: 2-D block tiling with register blocking, vec4 loads and workgroup tiles
(double-buffered, or single with two barriers); tile configurations per adapter chosen by the
tuner (core/tuning.py, before binding). ``_config`` pins one (tests, benchmarks/sweep_matmul.py).

f16 inputs have two precisions (the ``precision`` param): "f32" converts to f32 on the way
into workgroup memory and accumulates every product in f32; "mixed" keeps f16 tiles and sums
each BK-wide k slice in f16 (packed f16 multiply-adds, twice the FP32 rate on NVIDIA) before
adding the slice into f32 accumulators. The error bound of each is in Matmul's docstring.

Split-K configurations (skinny outputs) add each k slice's block into an f32 output by
32-bit compare-and-swap; an f16 product at precision "f32" does that into an f32 temporary,
which a second step in the same compute pass converts to f16 (``Matmul.passes``).

The place where a cooperative-matrix (tensor core) kernel would plug in is
``_cooperative_matrix_config`` (it returns None today: see its docstring)."""

from __future__ import annotations

import math
import time

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ...runtime import Device
from ..core import tuning
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import uniform_values
from ..core.tuning import TuneProblem
from .configs import (
    _DEFAULTS,
    _MIXED_DEFAULTS,
    _MIXED_TUNE_SETS,
    _TUNE_REVISION,
    _TUNE_SETS,
    BUCKET_MACS,
    CANDIDATES,
    MIXED_CANDIDATES,
    OWN_SHAPE_MACS,
    TileConfig,
    bucket_class,
    bucket_default,
    bucket_set,
    is_bucket,
    tune_shape,
)
from .shapes import (  # noqa: F401 - the product's shapes, imported from here by others
    MatmulShape,
    check_view,
    check_view_extent,
    matmul_shape,
    operand_shapes,
    shape_of,
    swap_last,
)
from .tiling import render_tiled, tiled_substitutions  # noqa: F401 - conv builds on the tiling

FLOATS = ("f32", "f64", "f16")
PRECISIONS = ("f32", "mixed")
# f16 with no precision param. "mixed" is the fast path; the default stays "f32" (every
# product summed in f32) because tests/test_kernels_core.py holds wgc.matmul's f16 results to
# the f32-accumulation bound; flip this once that bound is the mixed one (Matmul docstring).
F16_DEFAULT_PRECISION = "f32"
MIXED_BK = (8, 16)  # "mixed" sums BK products in f16: kept short, the error grows with BK


def problem_class(m: int, n: int, k: int) -> str:
    """"large", "skinny" (one side of 64 at most), "small", or between them (BUCKET_MACS
    multiply-adds or more) the product's own shape, rounded (configs.py: bucket_class)."""
    if min(m, n) >= 1024:
        return "large"
    if max(m, n) >= 1024 and min(m, n) <= 64:
        return "skinny"
    if m * n * k >= BUCKET_MACS:
        return bucket_class(m, n, k)
    if max(m, n) >= 1024 and min(m, n) <= 256:
        return "skinny"
    return "small"


def elem_bytes(dtype: str, precision: str) -> int:
    """Bytes of one workgroup tile element for this dtype and precision."""
    if dtype == "f64":
        return 8
    return 2 if precision == "mixed" else 4


def _cooperative_matrix_config(device: Device, dtype: str):
    """Where a cooperative-matrix (tensor core) matmul would plug in: return its kernel
    config when the device has enabled "cooperative-matrix" for this dtype.

    Today it always returns None: wgpu 0.32 (wgpu-native 29) refuses to enable the
    experimental feature and supports only 8×8 f32 tiles, so no adapter reaches here with
    it enabled. A future kernel lives in kernels/matmul/matmul_coop.wgsl and is chosen
    here."""
    if "cooperative-matrix" not in device.features:
        return None
    return None


def cooperative_matrix_listed(device: Device) -> bool:
    """True if the adapter lists cooperative-matrix (even though it cannot be enabled)."""
    return "cooperative-matrix" in set(device.adapter.features)


def _check_precision(value, dt: str) -> str:
    """The precision param resolved for dtype ``dt`` (None -> the dtype's default)."""
    if value is None:
        return F16_DEFAULT_PRECISION if dt == "f16" else "f32"
    if not isinstance(value, str) or value not in PRECISIONS:
        raise ArgumentError(f"matmul: param 'precision' must be one of "
                            f"{', '.join(map(repr, PRECISIONS))}, got {value!r}")
    if value == "mixed" and dt != "f16":
        raise ArgumentError(f"matmul: param 'precision' 'mixed' (f16 sums over each k slice) "
                            f"needs f16 a and b; {dt} accumulates in {dt}: leave precision out "
                            f"or pass 'f32'")
    return value


class Matmul(BuiltinKernel):
    """out = a · b for f32, f64 and f16 buffers of any shape, with numpy's matmul rules:
    2-D products, batches over leading dimensions (broadcast), 1-D operands as vectors.

    Params: ``precision`` (f16 only): "f32" (the default) converts a and b to f32 in
    workgroup memory and sums every product in f32; "mixed" multiplies and adds in f16
    within each BK-wide k slice (BK is 8 or 16) and adds each slice's sum into an f32
    accumulator, about twice as fast where f16 arithmetic is twice the f32 rate (NVIDIA).
    f32 and f64 take only "f32" (or nothing). ``_config`` (a TileConfig) pins the tile
    configuration instead of the tuned one (tests, benchmarks).

    Error bounds, elementwise, with |A|·|B| the product of absolute values and
    γ(n, u) = n·u / (1 − n·u):

    * f32, f64, f16 "f32": |C − A·B| ≤ γ(K, u_acc)·(|A|·|B|) (+ 2^-11·|A·B| for the final
      rounding of an f16 result), u_acc = 2^-24 (f32 accumulator) or 2^-53 (f64).
    * f16 "mixed": |C − A·B| ≤ (γ(2·BK, 2^-11) + γ(⌈K/BK⌉, 2^-24))·(|A|·|B|)
      + 2^-11·|A·B| + 2K·2^-14. The first term is the f16 sum of each slice of BK products
      (two f16 roundings per product: Vulkan lets fma round after the multiply), the second the
      f32 sum of the ⌈K/BK⌉ slices, the third the f16 result, the last f16 subnormals
      (flushed to zero on some drivers). For BK = 16 that is at most about 1.6 % of
      (|A|·|B|); random signs give far less (the errors are ~2^-11·√BK per slice). Each
      slice's partial sum must stay inside f16's range (|sum| < 65504): with BK = 16, inputs
      below 64 in magnitude are always safe.

    The reference for these bounds is the exact product of the (f16-rounded) inputs, e.g.
    numpy's f64 matmul of them."""

    name = "matmul"
    not_in_place = "matmul reads whole rows of a and columns of b for each output element"
    inputs = ("a", "b")
    dtypes = FLOATS
    params = (Param("precision", "str", None,
                    "f16 only: 'f32' (default: every product summed in f32) or 'mixed' (f16 "
                    "sums over each BK-wide k slice, f32 across slices)"),)
    description = ("out = a · b (numpy's matmul: (..., M, K) · (..., K, N), batch dimensions "
                   "broadcast, 1-D operands as vectors); f16 accumulates in f32 "
                   "(precision='mixed': in f16 within each k slice of BK ≤ 16)")

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        # the f32 temporary of an f16 split-K product (see passes) takes f16 a and b
        want_in = "f16" if params.get("_f32_out") else output.dtype
        if params.get("_f32_out") and output.dtype != "f32":
            raise DtypeError(f"matmul: the split-K temporary must be f32, got {output.dtype}")
        for nm, x in (("a", a), ("b", b)):
            if x.dtype != want_in:
                raise DtypeError(f"matmul: {nm} is {x.dtype}, out is {output.dtype}; "
                                 f"dtypes must match")
        sa, sb = operand_shapes(inputs, params)
        want = shape_of(inputs, params).out
        for nm, x in (("a", a), ("b", b)):
            if params.get(f"_l{nm}") is not None:
                check_view_extent(nm, x, params[f"_l{nm}"])
        if output.shape != want:
            raise ShapeError(f"matmul: out is {output.shape}, expected {want} for a {sa} "
                             f"· b {sb}")
        device = output.device
        cfg = params.get("_config")
        if cfg is not None and not cfg.fits(device, elem_bytes(output.dtype,
                                                               params["precision"])):
            raise ArgumentError(f"matmul: tile config {cfg.name} does not fit this adapter's "
                                f"limits ({device.name})")
        limit = device.limit("max-storage-buffer-binding-size")
        for nm, x in (("a", a), ("b", b), ("out", output)):
            if x.nbytes > limit:
                raise ShapeError(f"matmul: {nm} {x.shape} is {x.nbytes} bytes; this adapter "
                                 f"binds at most {limit} bytes per buffer")

    def output_spec(self, inputs, params):
        a, b = inputs
        if a.dtype != b.dtype:
            raise DtypeError(f"matmul: a is {a.dtype} and b is {b.dtype}; dtypes must match")
        params = params if isinstance(params, dict) else {}
        for nm, x in (("a", a), ("b", b)):
            if params.get(f"_t{nm}") and x.ndim < 2 and params.get(f"_l{nm}") is None:
                raise ShapeError(f"matmul: {nm} is {x.shape}; an operand read transposed "
                                 f"('_t{nm}') needs at least 2 dimensions")
        return shape_of(inputs, params).out, a.dtype

    def resolve_params(self, params, dt):
        # "_config" (a TileConfig) pins the tile configuration: for the autotuner and tests
        params = dict(params or {}) if isinstance(params, dict) or params is None else params
        cfg = params.pop("_config", None) if isinstance(params, dict) else None
        # "_f32_out": the first step of an f16 split-K product (f16 a and b, f32 temporary)
        f32_out = bool(params.pop("_f32_out", False)) if isinstance(params, dict) else False
        # "_ta" / "_tb": a / b is given with its last two axes swapped and read transposed
        # (automatic fusion folds a queued transpose into the product this way: no copy)
        # "_la" / "_lb": a / b is read through a view (shape, strides, offset) of the buffer
        flags = {nm: params.pop(nm) for nm in ("_ta", "_tb", "_la", "_lb")
                 if isinstance(params, dict) and nm in params}
        out = super().resolve_params(params, dt)
        for nm, v in flags.items():
            if nm[1] == "l":
                if flags.get(f"_t{nm[2]}"):
                    raise ArgumentError(f"matmul: params '_t{nm[2]}' and {nm!r} both say how "
                                        f"to read {nm[2]}; pass one")
                out[nm] = check_view(nm[2], v)
            elif not isinstance(v, bool):
                raise ArgumentError(f"matmul: param {nm!r} must be True or False, got {v!r}")
            elif v:
                out[nm] = True
        out["precision"] = precision = _check_precision(out.get("precision"), dt.name)
        if cfg is not None:
            if not isinstance(cfg, TileConfig):
                raise ArgumentError(f"matmul: param '_config' must be a TileConfig, got "
                                    f"{type(cfg).__name__}")
            if cfg.split > 1 and not (dt.name == "f32" or
                                      (dt.name == "f16" and precision == "f32")):
                raise ArgumentError(f"matmul: split-K config {cfg.name} needs f32 sums (f32, "
                                    f"or f16 at precision 'f32'): its partial sums meet by "
                                    f"32-bit compare-and-swap; {dt.name} at precision "
                                    f"{precision!r} cannot take it")
            if precision == "mixed" and cfg.bk not in MIXED_BK:
                raise ArgumentError(f"matmul: tile config {cfg.name} has BK={cfg.bk}; "
                                    f"precision 'mixed' sums BK products in f16 and takes BK "
                                    f"{' or '.join(map(str, MIXED_BK))}")
            out["_config"] = cfg
        if f32_out:
            if cfg is None or cfg.split == 1:
                raise ArgumentError("matmul: '_f32_out' is the first step of an f16 split-K "
                                    "product and needs a split-K '_config'")
            out["_f32_out"] = True
        return out

    # -- configuration -----------------------------------------------------------------------------
    @staticmethod
    def candidates(dtype: str, device: Device, precision: str = "f32") -> list[TileConfig]:
        """The configs that fit ``device`` for this dtype and precision, best guesses first."""
        size = elem_bytes(dtype, precision)
        if precision == "mixed":
            return [c for c in MIXED_CANDIDATES if c.bk in MIXED_BK and c.fits(device, size)]
        return [c for c in CANDIDATES
                if c.fits(device, size) and (c.split == 1 or dtype in ("f32", "f16"))]

    @tuning.memoized  # made once per device and sizes (a queued product asks at each binding)
    def tune_problem(self, m: int, n: int, k: int, dtype: str, device: Device,
                     precision: str = "f32") -> TuneProblem | None:
        """The tuner's problem for an m × n × k product (its class's candidates that fit), or
        None where nothing is tuned (a cooperative-matrix config)."""
        if _cooperative_matrix_config(device, dtype) is not None:  # pragma: no cover
            return None
        fits = self.candidates(dtype, device, precision)
        if not fits:
            raise ShapeError(f"matmul: no tile configuration fits this adapter's limits "
                             f"({device.name})")
        cls = problem_class(m, n, k)
        mixed = precision == "mixed"
        if is_bucket(cls) and mixed:  # f16 tiles: the classes' sets
            cls = "skinny" if max(m, n) >= 1024 and min(m, n) <= 256 else "small"
        if is_bucket(cls):
            default = bucket_default(m, n, k, {c.name for c in fits})
            wanted = bucket_set() + (default,)
        else:
            default = (_MIXED_DEFAULTS if mixed else _DEFAULTS)[cls]
            wanted = (_MIXED_TUNE_SETS if mixed else _TUNE_SETS)[cls] + (default,)
        names = [c.name for c in fits if c.name in wanted] or [c.name for c in fits]
        # a large f32 product up to OWN_SHAPE_MACS is timed on its own (rounded) shape too:
        # on 2048³ the tiles ranked by a wave count ViT-B/16's 6304 x 3072 x 768 does not have
        # (its pick took 963 us on an H200 where 64x128x8_8x8_u_e takes 807)
        shape = f"{cls} {bucket_class(m, n, k)}" if (
            cls == "large" and not mixed and m * n * k <= OWN_SHAPE_MACS) else cls
        return TuneProblem(
            "matmul", f"matmul {dtype}{' mixed' if mixed else ''} {shape} r{_TUNE_REVISION}",
            tuple(names), default,
            lambda name: _measure(self, TileConfig.parse(name), dtype, shape, device,
                                  precision))

    def tune_problems(self, inputs, output, params) -> list[TuneProblem]:
        if params.get("_config") is not None:
            return []
        sh = shape_of(inputs, params)
        problem = self.tune_problem(sh.m, sh.n, sh.k, output.dtype, output.device,
                                    params.get("precision", "f32"))
        return [problem] if problem is not None else []

    def config_for(self, m: int, n: int, k: int, dtype: str, device: Device,
                   precision: str = "f32") -> TileConfig:
        """The tuned (or default) tile configuration; looks up only (``bind`` tunes first)."""
        coop = _cooperative_matrix_config(device, dtype)
        if coop is not None:  # pragma: no cover - no adapter can enable it with wgpu 0.32
            return coop
        problem = self.tune_problem(m, n, k, dtype, device, precision)
        chosen = TileConfig.parse(tuning.choice(device, problem))
        if (chosen.split > 1 and dtype == "f16"
                and m * n * 4 > device.limit("max-storage-buffer-binding-size")):
            # its f32 temporary (Matmul.passes) would not bind: the class's one-pass default
            chosen = TileConfig.parse(problem.default)
        return chosen

    def pin(self, inputs, output, params) -> dict:
        """The tuned tile config fixed as ``_config``: background tuning may remember another
        between the key (the shader) and the launches (the grid), which would then disagree
        (a grid of another tile leaves part of out unwritten)."""
        if params.get("_config") is not None or output is None:
            return params
        sh = shape_of(inputs[:2], params)
        return dict(params, _config=self.config_for(sh.m, sh.n, sh.k, output.dtype,
                                                     output.device,
                                                     params.get("precision", "f32")))

    def key(self, inputs, output, params) -> PipelineKey:
        a = inputs[0]
        sh = shape_of(inputs, params)
        m, k, n = sh.m, sh.k, sh.n
        precision = params.get("precision", "f32")
        cfg = params.get("_config")
        cfg = cfg or self.config_for(m, n, k, output.dtype, output.device, precision)
        # K = 0 leaves a and b empty: their 16-byte allocations are shorter than one vec4<f64>
        # The key's dtype is a's and b's: an f16 split-K step writes f32 bits, as f32 does.
        if sh.batch:  # batched products (and views): 2-D keys (and shaders) stay as they were
            return PipelineKey(self.name, (a.dtype,), (("config", cfg.name),
                                                      ("precision", precision))
                               + _batched_consts(sh, params))
        # vec_a: a's vec4 loads run along k, or along m when a is held transposed
        vec_a = k > 0 and (m if params.get("_ta") else k) % 4 == 0
        consts = (("config", cfg.name), ("precision", precision),
                  ("vec_a", vec_a), ("vec_b", k > 0 and n % 4 == 0))
        # transposed operands: only their keys carry it (b's vec4 loads then run along k)
        if params.get("_ta"):
            consts += (("_ta", True),)
        if params.get("_tb"):
            consts += (("_tb", True), ("vec_bt", k > 0 and k % 4 == 0))
        return PipelineKey(self.name, (a.dtype,), consts)

    def passes(self, inputs, output, params):
        """An f16 product whose config splits K runs in two steps of one compute pass: the
        split-K matmul into an f32 temporary (f32 sums, added by compare-and-swap), then
        its conversion to f16. Every other product is one pass (None)."""
        if output.dtype != "f16" or params.get("_f32_out"):
            return None
        sh = shape_of(inputs, params)
        m, k, n = sh.m, sh.k, sh.n
        if output.size == 0 or params["precision"] != "f32":
            return None
        cfg = params.get("_config") or self.config_for(m, n, k, "f16", output.device, "f32")
        if cfg.split == 1:
            return None
        limit = output.device.limit("max-storage-buffer-binding-size")
        if output.size * 4 > limit:
            if "_config" in params:
                raise ShapeError(f"matmul: split-K config {cfg.name} needs an f32 temporary "
                                 f"of {output.size * 4} bytes for out {output.shape}; this "
                                 f"adapter binds at most {limit}")
            return None  # tuned choice: one pass with the class's default tile instead
        first = {"precision": "f32", "_config": cfg, "_f32_out": True,
                 **{nm: params[nm] for nm in ("_ta", "_tb", "_la", "_lb") if params.get(nm)}}
        return [(output.shape, "f32")], [(self, ["in0", "in1"], "tmp0", first),
                                         (TO_F16, ["tmp0"], "out", {})]

    def render(self, key):
        consts = dict(key.constants)
        return render_tiled(TileConfig.parse(consts["config"]), DTYPES[key.dtypes[0]].wgsl,
                            consts["vec_a"], consts["vec_b"], consts["precision"] == "mixed",
                            consts.get("batch", 0), consts.get("_ta", False),
                            consts.get("_tb", False), consts.get("vec_bt", False),
                            consts.get("vec_out"))

    def launches(self, inputs, output, params, device):
        sh = shape_of(inputs, params)
        m, k, n = sh.m, sh.k, sh.n
        if output.size == 0:
            return []
        # (the config the key names: chosen as key chooses it, without making a key again)
        cfg = params.get("_config") or self.config_for(m, n, k, output.dtype, output.device,
                                                       params.get("precision", "f32"))
        limit = device.limit("max-compute-workgroups-per-dimension")
        gx, gy = math.ceil(n / cfg.bn), math.ceil(m / cfg.bm)
        if gx > limit or gy > limit:
            raise ShapeError(f"matmul: output {output.shape} needs a {gy}×{gx} grid; this "
                             f"adapter allows {limit} per dimension")
        u = {"M": m, "N": n, "K": k, "phase": 1, "kchunk": k}
        kslices = 1
        if cfg.split > 1:
            per_split = -(-k // cfg.split)  # ceil: each z slice's share of K, in whole BK steps
            kchunk = max(cfg.bk, -(-per_split // cfg.bk) * cfg.bk)
            kslices = max(1, -(-k // kchunk))
            u["kchunk"] = kchunk
        if sh.batch:
            lda, ldb = _leading(sh, params)
            u.update(uniform_values(sh.batch, {"a": (sh.a_strides, sh.a_offset),
                                               "b": (sh.b_strides, sh.b_offset)}),
                     kslices=kslices, zbase=0, nbatch=sh.nbatch, lda=lda, ldb=ldb)
        # split-K adds into out: a first launch zeroes it
        zero = [Launch(fold_grid(-(-output.size // cfg.threads), device, self.name),
                       dict(u, phase=0))] if cfg.split > 1 else []
        if not sh.batch:
            return zero + [Launch((gx, gy, kslices), u)]
        # batched: workgroup z = batch · kslices + k slice, at most `limit` z per launch
        per = max(1, limit // kslices)
        return zero + [Launch((gx, gy, min(per, sh.nbatch - z0) * kslices), dict(u, zbase=z0))
                       for z0 in range(0, sh.nbatch, per)]


def _leading(sh: MatmulShape, params) -> tuple[int, int]:
    """(lda, ldb) of a batched product: the element stride between a's rows (its k rows when
    read transposed) and b's rows (its n rows when transposed) in memory."""
    if sh.strided:
        return sh.lda, sh.ldb
    ta, tb = _transposed(sh, params)
    return sh.m if ta else sh.k, sh.k if tb else sh.n


def _transposed(sh: MatmulShape, params) -> tuple[bool, bool]:
    if sh.strided:
        return sh.ta, sh.tb
    return bool(params.get("_ta")), bool(params.get("_tb"))


def _batched_consts(sh: MatmulShape, params) -> tuple:
    """A batched product's key constants: vec_a / vec_b / vec_bt say that a's (b's, b's read
    transposed) vec4 loads are aligned (the loaded dimension, the row stride, every batch
    stride and the offset are multiples of 4), vec_out that out is written as vec4."""
    m, k, n = sh.m, sh.k, sh.n
    ta, tb = _transposed(sh, params)
    lda, ldb = _leading(sh, params)

    def aligned(size, ld, strides, offset):
        return k > 0 and all(v % 4 == 0 for v in (size, ld, offset, *strides))

    vec_b = aligned(k if tb else n, ldb, sh.b_strides, sh.b_offset)
    consts = (("vec_a", aligned(m if ta else k, lda, sh.a_strides, sh.a_offset)),
              ("vec_b", vec_b and not tb), ("batch", len(sh.batch)))
    if ta:
        consts += (("_ta", True),)
    if tb:
        consts += (("_tb", True), ("vec_bt", vec_b))
    return consts + (("vec_out", k > 0 and n % 4 == 0),)


class _ToF16(BuiltinKernel):
    """out (f16) = a (f32), elementwise: the last step of an f16 split-K product (internal,
    not in the registry)."""

    name = "matmul_to_f16"
    inputs = ("a",)
    dtypes = ("f16",)
    workgroup_size = 256
    description = "out = f16(a): an f16 split-K product's f32 temporary, converted"

    def check(self, inputs, output, params) -> None:
        (a,) = inputs
        if a.dtype != "f32" or output.dtype != "f16" or a.size != output.size:
            raise DtypeError(f"matmul_to_f16: takes an f32 input and an f16 output of the "
                             f"same size, got {a.dtype} {a.shape} and {output.dtype} "
                             f"{output.shape}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, ("f16",), ())

    def render(self, key: PipelineKey):
        # vec4 items: both buffers are allocated in 16-byte multiples, so the last item
        # may run into padding that is never read back
        src = (f"enable f16;\n"
               f"struct Params {{ n: u32, }}\n"
               f"@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;\n"
               f"@group(0) @binding(1) var<storage, read_write> out: array<vec4<f16>>;\n"
               f"@group(0) @binding(2) var<uniform> p: Params;\n"
               f"@compute @workgroup_size({self.workgroup_size})\n"
               f"fn main(@builtin(workgroup_id) wid: vec3<u32>,\n"
               f"        @builtin(num_workgroups) nwg: vec3<u32>,\n"
               f"        @builtin(local_invocation_index) lid: u32) {{\n"
               f"    let i = (wid.y * nwg.x + wid.x) * {self.workgroup_size}u + lid;\n"
               f"    if (i < p.n) {{\n"
               f"        out[i] = vec4<f16>(a[i]);\n"
               f"    }}\n"
               f"}}\n")
        return src, (("n", "u32"),)

    def launches(self, inputs, output, params, device):
        items = -(-output.size // 4)
        if items == 0:
            return []
        groups = -(-items // self.workgroup_size)
        return [Launch(fold_grid(groups, device, self.name), {"n": items})]


TO_F16 = _ToF16()


def _measure(kernel: Matmul, cfg: TileConfig, dtype: str, cls: str, device: Device,
             precision: str = "f32") -> float:
    """Seconds of one matmul of the class's tuning shape with ``cfg`` (median of 3 after a
    warm-up; GPU wall time of submit + wait, with several matmuls in one pass)."""
    import numpy as np

    from ... import _queue
    from ...buffer import empty
    from ..core.bind import bind

    m, n, k = tune_shape(cls)
    a, b, out = (empty((m, k), dtype, "autotune-a", device=device),
                 empty((k, n), dtype, "autotune-b", device=device),
                 empty((m, n), dtype, "autotune-out", device=device))
    try:
        d = bind(kernel, [a, b], out, {"_config": cfg, "precision": precision})
        calls = d.raw_calls() * 3
        times = []
        for rep in range(4):
            enc = device.link.encoder()
            enc.record_calls(calls)
            t0 = time.perf_counter()
            _queue.wait(device.submit([enc.finish()]))
            if rep:
                times.append((time.perf_counter() - t0) / 3)
        return float(np.median(times))
    finally:
        for x in (a, b, out):
            x.free()
