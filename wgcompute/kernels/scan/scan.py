"""Inclusive prefix sums and products along the last axis of a (rows, n) batch (scan.wgsl),
with or without the identity written first (include_initial: rows of n + 1).

Dtypes: f32, f64, f16 (accumulated in f32), s32, u32, s64, u64 (wrapping, as the GPU's integer
arithmetic does), c64 and c128; the output has the input's dtype (callers convert first: the array
namespace sums u8 and bool as wider integers). How: rows of one tile (WG·ITEMS elements) or
many rows of a few tiles scan in one pass, a workgroup per row (many rows of at most 16
elements: an invocation per row); long rows in three steps of one compute
pass (reduce-then-scan): each tile's total, the totals' exclusive prefixes, each tile scanned
from its prefix. x is read twice and the output written once; no workgroup waits on another,
so it needs no forward-progress guarantee from the GPU."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Kernel, Launch, Param, PipelineKey, check_flag, fold_grid

SCAN_DTYPES = ("f32", "f64", "f16", "s32", "u32", "s64", "u64", "c64", "c128")
OPS = ("sum", "prod")
WG = 256
_ACC = {"f16": "f32"}  # the accumulator's dtype where it is not the element's


def acc_dtype(dt: str) -> str:
    return _ACC.get(dt, dt)


def items(acc: str) -> int:
    """Elements per invocation: the tile (and its padding) fits 16 KiB of workgroup memory
    with the invocations' totals, WebGPU's guaranteed minimum."""
    size = DTYPES[acc].itemsize
    return 8 if size <= 4 else 4 if size <= 8 else 2


def tile(dt: str) -> int:
    return WG * items(acc_dtype(dt))


def _ident(op: str, acc: str) -> str:
    w = DTYPES[acc].wgsl
    one = "1" if op == "prod" else "0"
    if DTYPES[acc].kind == "c":
        return f"{w}({one}.0, 0.0)"
    return f"{w}({one})"


def _combine(op: str, acc: str) -> str:
    if op == "sum":
        return "a + b"
    if DTYPES[acc].kind == "c":
        return f"{DTYPES[acc].wgsl}(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x)"
    return "a * b"


def render_scan(key: PipelineKey, op: str):
    xd, od = key.dtypes
    c = dict(key.constants)
    acc = acc_dtype(od)
    types = [DTYPES[d].wgsl for d in (xd, od, acc)]
    src = shaders.render(shaders.load("scan/scan.wgsl"), {
        "ENABLE": shaders.enable_directives(types), "XT": types[0], "OT": types[1],
        "ACC": types[2], "WG": WG, "ITEMS": items(acc), "MODE": c["mode"],
        "PREFIX": c["prefix"], "IDENT": _ident(op, acc), "COMBINE": _combine(op, acc)},
        name="scan/scan.wgsl")
    fields = tuple((n, "u32") for n in ("rows", "n", "tiles", "per", "shift", "groups"))
    return src, fields


def _launch(groups: int, device, name: str, **u) -> list[Launch]:
    if groups == 0:
        return []
    return [Launch(fold_grid(groups, device, name), dict(u, groups=groups))]


class ScanStep(BuiltinKernel):
    """One step of a scan, bound by Scan.passes (not in the registry; Scan checked the
    buffers): "reduce" (tile totals), "scan" (tiles in order from the identity), "final"
    (tiles from their prefixes, read from a second input)."""

    workgroup_size = WG

    def __init__(self, op: str, mode: str):
        self.op = op
        self.mode = mode
        self.name = f"cumulative_{op}.{mode}"
        self.inputs = ("x", "pre") if mode == "final" else ("x",)
        self.kind = {"final": "scan", "serial": "serial", "reduce": "reduce"}.get(mode, "scan")
        self.dtypes = tuple(SCAN_DTYPES)
        self.params = tuple(Param(n, "u32", 0) for n in ("rows", "n", "tiles", "per",
                                                          "shift"))
        self.description = f"{mode} step of cumulative_{op}"

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (inputs[0].dtype, output.dtype),
                           (("mode", self.kind),
                            ("prefix", self.mode == "final")))

    def render(self, key: PipelineKey):
        return render_scan(key, self.op)

    def launches(self, inputs, output, params, device):
        rows, tiles, per = params["rows"], params["tiles"], params["per"]
        u = {k: params[k] for k in ("rows", "n", "tiles", "per", "shift")}
        if self.mode == "reduce":
            return _launch(rows * tiles, device, self.name, **u)
        if self.mode == "serial":
            if rows == 0:
                return []
            return [Launch(fold_grid(-(-rows // WG), device, self.name),
                           dict(u, groups=-(-rows // WG)))]
        return _launch(rows * -(-tiles // max(per, 1)), device, self.name, **u)


_STEPS: dict[tuple[str, str], ScanStep] = {}


def step(op: str, mode: str) -> ScanStep:
    s = _STEPS.get((op, mode))
    if s is None:
        s = _STEPS[(op, mode)] = ScanStep(op, mode)
    return s


# rows at least this many (of at most _SHORT tiles each) scan one row per workgroup in one
# pass: enough workgroups to fill a GPU without the three steps
_MANY_ROWS = 1024
_SHORT = 8
_SERIAL = 16  # rows of at most this many elements (and many rows): an invocation each


class Scan(BuiltinKernel):
    """out[r, j] = x[r, 0] ⊕ ... ⊕ x[r, j] (⊕ = + or ×) for a 2-D x; with include_initial
    out[r, 0] is the identity and out[r, j + 1] that prefix."""

    inputs = ("x",)
    workgroup_size = WG
    not_in_place = "a scan's steps read x after others have written their outputs"

    def __init__(self, op: str):
        self.op = op
        self.name = f"cumulative_{op}"
        self.dtypes = SCAN_DTYPES
        self.params = (Param("include_initial", "bool", False,
                             "write the identity first (rows of n + 1)"),)
        self.description = (f"cumulative {op} along the last axis of a 2-D x (rows of n, or "
                            f"n + 1 with include_initial)")

    def output_spec(self, inputs, params):
        (x,) = inputs
        self._shape(x)
        shift = int(check_flag(self.name, "include_initial", params.get("include_initial",
                                                                         False)))
        return (x.shape[0], x.shape[1] + shift), x.dtype

    def _shape(self, x):
        if x.ndim != 2:
            raise ShapeError(f"{self.name}: x must be 2-D (rows, n), got shape {x.shape}")

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        self._shape(x)
        if x.dtype not in SCAN_DTYPES:
            raise DtypeError(f"{self.name}: x is {x.dtype}; expected one of "
                             f"{', '.join(SCAN_DTYPES)}")
        if output.dtype != x.dtype:
            raise DtypeError(f"{self.name}: out is {output.dtype} and x is {x.dtype}; dtypes "
                             f"must match")
        shape = (x.shape[0], x.shape[1] + int(params["include_initial"]))
        if tuple(output.shape) != shape:
            raise ShapeError(f"{self.name}: out is {output.shape}, expected {shape} for x "
                             f"{x.shape}" + (" with include_initial" if shape[1] >
                                             x.shape[1] else ""))
        if math.prod(shape) >= 2**32:
            raise ShapeError(f"{self.name}: out {shape} holds {math.prod(shape)} elements; "
                             f"scans address at most 2**32 - 1")
        limit = x.device.limit("max-storage-buffer-binding-size")
        for name, b in (("x", x), ("out", output)):
            if b.nbytes > limit:
                raise ShapeError(f"{self.name}: {name} {b.shape} {b.dtype} is {b.nbytes} bytes, "
                                 f"more than this adapter binds at once ({limit}, "
                                 f"max-storage-buffer-binding-size)")

    def passes(self, inputs, output, params):
        (x,) = inputs
        return self.plan(tuple(x.shape), str(x.dtype), bool(params["include_initial"]))

    def plan(self, shape: tuple[int, int], dt: str, include_initial: bool):
        """(temporaries, steps) of a scan of a (rows, n) x of dtype ``dt``, as passes()
        returns them (callers that keep the temporaries bind the steps themselves)."""
        rows, n = shape
        shift = int(include_initial)
        if rows == 0 or rows * (n + shift) == 0:
            return [], []
        t = tile(dt)
        tiles = max(1, -(-n // t))
        if n <= _SERIAL and rows >= _MANY_ROWS:
            return [], [(step(self.op, "serial"), ["in0"], "out",
                         {"rows": rows, "n": n, "tiles": 1, "per": 1, "shift": shift})]
        if tiles == 1 or (rows >= _MANY_ROWS and tiles <= _SHORT):
            return [], [(step(self.op, "scan"), ["in0"], "out",
                         {"rows": rows, "n": n, "tiles": tiles, "per": tiles, "shift": shift})]
        acc = acc_dtype(dt)
        spine_tiles = -(-tiles // tile(acc))
        return [((rows * tiles,), acc), ((rows * (tiles + 1),), acc)], [
            (step(self.op, "reduce"), ["in0"], "tmp0",
             {"rows": rows, "n": n, "tiles": tiles, "per": 1, "shift": 0}),
            (step(self.op, "scan"), ["tmp0"], "tmp1",
             {"rows": rows, "n": tiles, "tiles": spine_tiles, "per": spine_tiles,
              "shift": 1}),
            (step(self.op, "final"), ["in0", "tmp1"], "out",
             {"rows": rows, "n": n, "tiles": tiles, "per": 1, "shift": shift})]


SCANS = {op: Scan(op) for op in OPS}


def scan_kernels() -> list[Kernel]:
    return list(SCANS.values())
